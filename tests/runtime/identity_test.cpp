// Process-wide stores share by file identity: a deployment recompiled in place while a session holds it is read
// afresh, a store entry whose file was replaced is not handed out again, and loading many programs stays linear.
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"
#include "runtime/compiled_program.h"
#include "runtime/context_store.h"
#include "runtime_test_util.h"
#include "support/file_identity.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

using namespace ctxkit;
using namespace ctxkit::runtime::testing;
namespace fs = std::filesystem;

namespace {

// y = x + W for x, W of 1x8; W's values start at `start`.
ir::Model addModel(float start) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = "add";
  m.graph.inputs.push_back(ctxkit::testing::floatValue("x", ctxkit::testing::dims({1, 8})));
  m.graph.outputs.push_back(ctxkit::testing::floatValue("y", ctxkit::testing::dims({1, 8})));
  m.graph.initializers.push_back(ctxkit::testing::floatInit("W", {1, 8}, start));
  m.graph.nodes.push_back(ctxkit::testing::node("Add", {"x", "W"}, {"y"}));
  return m;
}

// What addModel(start) computes for `x`, worked out here rather than by any kernel.
std::vector<float> expectedAdd(const std::vector<float>& x, float start) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float w = start + 0.25f * static_cast<float>(i % 7);  // floatInit's values
    y[i] = x[i] + w;
  }
  return y;
}

// Compiles `source` for the cpu target into `out`, replacing what is there.
void compileInto(const fs::path& source, const fs::path& out) {
  pipeline::CompileOptions o;
  o.models = {source};
  o.outputDir = out;
  o.target = "cpu";
  o.force = true;
  auto r = pipeline::compileModels(o);
  INFO((r ? std::string() : r.error().message()));
  REQUIRE(r);
}

std::vector<float> runOnce(const runtime::Session& s, const std::vector<float>& x) {
  auto in = ir::Tensor::fromVector(ir::ElemType::Float, {1, 8}, x);
  auto out = s.run({in});
  INFO((out ? std::string() : out.error().message()));
  REQUIRE(out);
  REQUIRE(out->size() == 1);
  const float* p = out->front().dataAs<float>();
  return std::vector<float>(p, p + out->front().elementCount());
}

FileIdentity identityOf(const fs::path& p) {
  auto id = identifyFile(p);
  REQUIRE(id);
  return *id;
}

}  // namespace

TEST_CASE("a model recompiled in place while a session holds it: new sessions run the new weights, the old one the "
          "old",
          "[runtime][identity]") {
  Workspace ws("inplace");
  const fs::path source = ws.dir / "m.onnx";
  const fs::path out = ws.dir / "out";
  const std::vector<float> x = {1, -2, 3, -4, 5, -6, 7, -8};

  REQUIRE(onnx_io::saveModel(addModel(0.5f), source));
  compileInto(source, out);
  const FileIdentity oldBin = identityOf(out / "m_ctxkit.bin");
  auto before = runtime::Session::loadFile(out / "m_ctx.onnx");
  INFO((before ? std::string() : before.error().message()));
  REQUIRE(before);
  REQUIRE((*before)->stats().compiledNodes == 1);
  CHECK(runOnce(**before, x) == expectedAdd(x, 0.5f));

  // Same file names, other weights; ctxgen replaces each file by rename.
  REQUIRE(onnx_io::saveModel(addModel(10.0f), source));
  compileInto(source, out);
  const FileIdentity newBin = identityOf(out / "m_ctxkit.bin");
  REQUIRE(!newBin.sameFile(oldBin));

  auto after = runtime::Session::loadFile(out / "m_ctx.onnx");
  INFO((after ? std::string() : after.error().message()));
  REQUIRE(after);
  CHECK(!(*after)->stats().sharedModel);
  CHECK((*after)->stats().sharedPrograms == 0);
  CHECK(runOnce(**after, x) == expectedAdd(x, 10.0f));
  CHECK(runOnce(**before, x) == expectedAdd(x, 0.5f));  // the old session keeps its own mapping and program

  // A third session on the unchanged new files shares the second one's model, mapping and program.
  auto again = runtime::Session::loadFile(out / "m_ctx.onnx");
  REQUIRE(again);
  CHECK((*again)->stats().sharedModel);
  CHECK((*again)->stats().sharedPrograms == 1);
  CHECK(runOnce(**again, x) == expectedAdd(x, 10.0f));
}

TEST_CASE("a store entry whose file is replaced between lookups is not handed out again", "[runtime][identity]") {
  Workspace ws("replaced");
  for (const char* name : {"a", "b"}) {
    fs::create_directories(ws.dir / name);
    REQUIRE(onnx_io::saveModel(addModel(name[0] == 'a' ? 1.0f : 2.0f), ws.dir / name / "m.onnx"));
    compileInto(ws.dir / name / "m.onnx", ws.dir / name);
  }
  const fs::path bin = fs::canonical(ws.dir / "a" / "m_ctxkit.bin");

  SECTION("container: replaced by rename") {
    auto first = runtime::openSharedContainer(bin, true);
    REQUIRE(first);
    auto same = runtime::openSharedContainer(bin, true);
    REQUIRE(same);
    CHECK(*same == *first);
    const auto oldChecksum = (*first)->checksum();
    fs::copy_file(ws.dir / "b" / "m_ctxkit.bin", ws.dir / "a" / "tmp.bin");
    fs::rename(ws.dir / "a" / "tmp.bin", bin);
    auto second = runtime::openSharedContainer(bin, true);
    REQUIRE(second);
    CHECK(*second != *first);
    CHECK((*second)->checksum() != oldChecksum);
    CHECK((*first)->checksum() == oldChecksum);  // still mapped as it was
    auto third = runtime::openSharedContainer(bin, true);
    REQUIRE(third);
    CHECK(*third == *second);
  }

  SECTION("container: rewritten in place, same inode") {
    auto first = runtime::openSharedContainer(bin, true);
    REQUIRE(first);
    const FileIdentity was = identityOf(bin);
    // Same bytes written over the same inode, and a later modification time: another state of the file.
    auto bytes = readFile(bin);
    REQUIRE(bytes);
    {
      std::ofstream rewrite(bin, std::ios::binary | std::ios::trunc);
      rewrite << *bytes;
    }
    fs::last_write_time(bin, fs::last_write_time(bin) + std::chrono::seconds(2));
    const FileIdentity now = identityOf(bin);
    REQUIRE(now.sameFile(was));
    REQUIRE(!(now == was));
    auto second = runtime::openSharedContainer(bin, true);
    REQUIRE(second);
    CHECK(*second != *first);
  }

  SECTION("source model: replaced by rename") {
    const fs::path model = fs::canonical(ws.dir / "a" / "m.onnx");
    auto first = runtime::openSharedSourceModel(model, true);
    REQUIRE(first);
    auto same = runtime::openSharedSourceModel(model, true);
    REQUIRE(same);
    CHECK(*same == *first);
    REQUIRE(onnx_io::saveModel(addModel(3.0f), model));
    auto second = runtime::openSharedSourceModel(model, true);
    REQUIRE(second);
    CHECK(*second != *first);
    REQUIRE((*first)->byName.count("W") == 1);
    REQUIRE((*second)->byName.count("W") == 1);
    CHECK((*first)->byName.at("W").dataAs<float>()[0] == 1.0f);
    CHECK((*second)->byName.at("W").dataAs<float>()[0] == 3.0f);
  }
}

TEST_CASE("loading n compiled programs looks at O(n) store entries", "[runtime][identity]") {
  // n independent nodes, each its own partition: a store scanned per load made this quadratic (20,000 nodes: 5 s).
  constexpr size_t n = 2000;
  Workspace ws("many");
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.graph.name = "many";
  m.graph.inputs.push_back(ctxkit::testing::floatValue("x", ctxkit::testing::dims({1, 4})));
  for (size_t i = 0; i < n; ++i) {
    const std::string y = "y" + std::to_string(i);
    m.graph.outputs.push_back(ctxkit::testing::floatValue(y, ctxkit::testing::dims({1, 4})));
    m.graph.nodes.push_back(ctxkit::testing::node("Relu", {"x"}, {y}));
  }
  REQUIRE(onnx_io::saveModel(m, ws.dir / "many.onnx"));
  compileInto(ws.dir / "many.onnx", ws.dir / "out");

  const size_t before = runtime::programStoreProbes();
  auto first = runtime::Session::loadFile(ws.dir / "out" / "many_ctx.onnx");
  INFO((first ? std::string() : first.error().message()));
  REQUIRE(first);
  REQUIRE((*first)->stats().compiledNodes == n);
  const size_t firstProbes = runtime::programStoreProbes() - before;
  // Per program: two lookups and an insertion in the loaded-program store, a lookup and an insertion in the inferred
  // one, and sweeps that visit at most twice what each store was given: 9n. A scan per load would be n^2/2.
  INFO("store entries looked at: " << firstProbes);
  CHECK(firstProbes <= 10 * n);

  auto second = runtime::Session::loadFile(ws.dir / "out" / "many_ctx.onnx");
  REQUIRE(second);
  CHECK((*second)->stats().sharedPrograms == n);
  // One lookup per program, none of them inserted again.
  CHECK(runtime::programStoreProbes() - before - firstProbes <= 2 * n);
}
