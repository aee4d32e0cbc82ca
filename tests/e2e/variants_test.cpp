// Shape variants and bindings through the real ctxgen (SPEC §5, §10): --variant compiles a model once per variant
// into one context binary holding every weight once; --dim/--shape take a STEM: prefix for one model of a group;
// bindings that match nothing, shapes of another rank and values contradicting a static dimension are usage errors;
// compiled models carry their bound static shapes.
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <set>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kSamples = CTXKIT_SAMPLES_DIR;

// tiny_prefill with a symbolic sequence length: input x and output y are [1, seq, 64], and the reshapes into and
// out of the heads infer the sequence length (-1) instead of naming 16.
fs::path writeDynamicBlock(const fs::path& dir, const std::string& stem) {
  auto model = onnx_io::loadModel(kSamples / "tiny_prefill.onnx");
  REQUIRE(model);
  for (auto* v : {&model->graph.inputs[0], &model->graph.outputs[0]}) (*v->shape)[1] = ir::Dim::named("seq");
  for (auto& init : model->graph.initializers)
    if (init.tensor.type() == ir::ElemType::Int64) {
      std::vector<int64_t> dims(init.tensor.dataAs<int64_t>(), init.tensor.dataAs<int64_t>() + init.tensor.elementCount());
      for (auto& d : dims)
        if (d == 16 && &d == &dims[1]) d = -1;
      init.tensor = ir::Tensor::fromVector(ir::ElemType::Int64, init.tensor.shape(), dims);
    }
  const fs::path path = dir / (stem + ".onnx");
  REQUIRE(onnx_io::saveModel(*model, path));
  return path;
}

std::vector<int64_t> staticShape(const ir::ValueInfo& v) {
  std::vector<int64_t> out;
  REQUIRE(v.shape);
  for (const auto& d : *v.shape) {
    REQUIRE(d.isKnown());
    out.push_back(d.value);
  }
  return out;
}

}  // namespace

TEST_CASE("variants compile a model per sequence length into one context that stores every weight once", "[e2e]") {
  TempDir dir("variants");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  const fs::path out = dir.path() / "out";
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "--variant", "seq=1", "--variant", "seq=16", "--variant",
                                   "long:seq=64", "-o", out.string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  for (const char* name : {"block_seq1_ctx.onnx", "block_seq16_ctx.onnx", "block_long_ctx.onnx", "block_ctxkit.bin"})
    CHECK(fs::exists(out / name));
  CHECK_FALSE(fs::exists(out / "block_ctx.onnx"));

  // Independent expectation: the distinct float32 weight matrices and vectors of the source, stored once; the
  // three variants each refer to all of them.
  auto source = onnx_io::loadModel(model);
  REQUIRE(source);
  std::set<std::string> weights;
  uint64_t weightBytes = 0;
  for (const auto& i : source->graph.initializers)
    if (i.tensor.type() == ir::ElemType::Float && i.tensor.elementCount() > 1 &&
        weights.insert(std::string(reinterpret_cast<const char*>(i.tensor.data()), i.tensor.byteSize())).second)
      weightBytes += i.tensor.byteSize();
  auto report = nlohmann::json::parse(r.out);
  const auto unique = report["weights"]["unique_bytes"].get<uint64_t>();
  CHECK(unique >= weightBytes);
  CHECK(unique < weightBytes + 64);  // at most a few one-value constants besides
  CHECK(report["weights"]["referenced_bytes"].get<uint64_t>() == 3 * unique);
  auto view = format::ContainerView::openFile(out / "block_ctxkit.bin");
  REQUIRE(view);
  std::set<std::string> graphs;
  for (const auto& g : view->graphs()) graphs.insert(g.name);
  CHECK(graphs == std::set<std::string>{"block_seq1_ctxkit_0", "block_seq16_ctxkit_0", "block_long_ctxkit_0"});

  // Each compiled model carries its static shapes: ctxrun needs no binding. The seq=16 variant computes what the
  // static sample computes on the sample's input.
  for (auto [name, seq] : {std::pair{"seq1", 1}, std::pair{"seq16", 16}, std::pair{"long", 64}}) {
    const fs::path ctx = out / fmt::format("block_{}_ctx.onnx", name);
    auto compiled = onnx_io::loadModel(ctx);
    REQUIRE(compiled);
    CHECK(staticShape(compiled->graph.inputs[0]) == std::vector<int64_t>{1, seq, 64});
    CHECK(staticShape(compiled->graph.outputs[0]) == std::vector<int64_t>{1, seq, 64});
    auto run = runTool(CTXKIT_CTXRUN, {ctx.string()});
    INFO(run.out << run.err);
    CHECK(run.exitCode == 0);
  }
  const std::string data = (kSamples / "tiny_prefill" / "test_data_set_0").string();
  auto same = runTool(CTXKIT_CTXRUN, {(out / "block_seq16_ctx.onnx").string(), "--inputs", data, "--expected", data});
  INFO(same.out << same.err);
  CHECK(same.exitCode == 0);
}

TEST_CASE("STEM: bindings apply to one model of a group", "[e2e]") {
  TempDir dir("model_bindings");
  const fs::path a = writeDynamicBlock(dir.path(), "first"), b = writeDynamicBlock(dir.path(), "second");
  auto r = runTool(CTXKIT_CTXGEN, {a.string() + "," + b.string(), "--share", "--dim", "first:seq=4", "--shape",
                                   "second:x=1x8x64", "-o", dir.path().string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto first = onnx_io::loadModel(dir.path() / "first_ctx.onnx");
  auto second = onnx_io::loadModel(dir.path() / "second_ctx.onnx");
  REQUIRE(first);
  REQUIRE(second);
  CHECK(staticShape(first->graph.inputs[0]) == std::vector<int64_t>{1, 4, 64});
  CHECK(staticShape(second->graph.inputs[0]) == std::vector<int64_t>{1, 8, 64});
}

TEST_CASE("bindings that match nothing, the wrong rank or a contradicted dimension are usage errors", "[e2e]") {
  TempDir dir("bad_bindings");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--dim", "batch=2"}, "--dim 'batch=2': no symbolic dimension 'batch' in any model (inputs: block: x 1xseqx64)"},
           {{"--shape", "y=1x2x64"}, "no input 'y' in any model"},
           {{"--shape", "x=1x16"}, "model 'block' input 'x' is declared 1xseqx64 (rank 3) but the shape given is 1x16 (rank 2)"},
           {{"--shape", "x=2x16x64"}, "whose dimension 0 is 1, but the shape given is 2x16x64"},
           {{"--dim", "other:seq=4"}, "no symbolic dimension 'other:seq'"},
           {{"--variant", "len=4"}, "--variant 'len=4': 'len' is no input or symbolic dimension of any model"},
           {{"--variant", "a:seq=1", "--variant", "a:seq=2"}, "a variant named 'a' is given twice"},
           {{"--variant", "seq"}, "item 'seq' is not NAME=VALUE"}}) {
    std::vector<std::string> args{model.string(), "-o", (dir.path() / "out").string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = runTool(CTXKIT_CTXGEN, args);
    INFO(fmt::format("{}", fmt::join(c.args, " ")) << ": " << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path() / "out"));
  }
}
