// Unit tests for the compiler libraries: analysis, partitioner, weightshare, codegen's memory plan and lowering.
#include "analysis/analysis.h"
#include "codegen/lower.h"
#include "codegen/memory_plan.h"
#include "graph_builder.h"
#include "cpu/gemm.h"
#include "partitioner/partitioner.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

// x -> Relu -> a -> Exp(unsupported by the test target) -> b ; a and b -> Add -> y
ir::Graph diamondThroughUnsupported() {
  ir::Graph g;
  g.name = "diamond";
  g.inputs = {floatValue("x", dims({2, 3}))};
  g.outputs = {floatValue("y", dims({2, 3}))};
  g.nodes = {node("Relu", {"x"}, {"a"}), node("Exp", {"a"}, {"b"}), node("Add", {"a", "b"}, {"y"})};
  return g;
}

partitioner::Target targetWithout(const std::string& excluded) {
  std::string ops;
  for (const char* op : {"Relu", "Exp", "Add", "MatMul", "Reshape", "Conv", "BatchNormalization", "Sigmoid"})
    if (op != excluded) ops += std::string(ops.empty() ? "" : ",") + "{\"op\":\"" + op + "\"}";
  auto t = partitioner::parseTarget(R"({"name":"test","element_types":["float32"],"ops":[)" + ops + "]}", "test target");
  REQUIRE(t);
  return *t;
}

}  // namespace

TEST_CASE("analysis rejects cycles, double producers and undefined inputs, naming the node", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({2}))};
  g.nodes = {node("Relu", {"b"}, {"a"}), node("Relu", {"a"}, {"b"})};
  auto cyclic = analysis::analyzeGraph(g, {});
  REQUIRE(!cyclic);
  CHECK_THAT(cyclic.error().message(), Catch::Contains("cycle"));

  g.nodes = {node("Relu", {"x"}, {"a"}), node("Sigmoid", {"x"}, {"a"})};
  auto twice = analysis::analyzeGraph(g, {});
  REQUIRE(!twice);
  CHECK_THAT(twice.error().message(), Catch::Contains("'a' is produced twice"));

  g.nodes = {node("Relu", {"nowhere"}, {"a"})};
  auto undefined = analysis::analyzeGraph(g, {});
  REQUIRE(!undefined);
  CHECK_THAT(undefined.error().message(), Catch::Contains("'nowhere'"));
}

TEST_CASE("analysis sorts nodes, binds symbols and folds constants", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("batch"), ir::Dim::known(4)})};
  g.outputs = {floatValue("y", {ir::Dim::named("batch"), ir::Dim::known(4)})};
  g.initializers = {floatInit("c", {4})};
  // Listed out of order on purpose: the Add needs the folded Relu(c).
  g.nodes = {node("Add", {"x", "rc"}, {"y"}), node("Relu", {"c"}, {"rc"})};
  auto unbound = analysis::analyzeGraph(g, {});
  REQUIRE(unbound);
  CHECK(unbound->order == std::vector<size_t>{1, 0});
  CHECK(!unbound->find("y")->shape);
  CHECK_THAT(unbound->find("y")->blocker, Catch::Contains("'batch'"));
  CHECK(unbound->find("rc")->constant);

  analysis::Bindings b;
  b.dims["batch"] = 3;
  auto bound = analysis::analyzeGraph(g, b);
  REQUIRE(bound);
  CHECK(*bound->find("y")->shape == ir::Shape{3, 4});
}

TEST_CASE("partitions never create a cycle through a fallback node", "[partitioner]") {
  ir::Graph g = diamondThroughUnsupported();
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("Exp"));
  // Relu and Add are both supported and connected, but Relu -> Exp -> Add forbids fusing them.
  REQUIRE(plan.partitions.size() == 2);
  CHECK(plan.nodes[1].placement == partitioner::NodePlacement::Fallback);
  CHECK_THAT(plan.nodes[1].reason, Catch::Contains("Exp"));
  CHECK(plan.nodes[0].partition != plan.nodes[2].partition);

  // With everything supported, one partition.
  auto all = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(all.partitions.size() == 1);
  CHECK(all.partitions[0].nodes.size() == 3);
}

TEST_CASE("partitioning is deterministic and names the symbol that blocks compilation", "[partitioner]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("seq"), ir::Dim::known(4)})};
  g.outputs = {floatValue("y", {})};
  g.nodes = {node("Relu", {"x"}, {"y"})};
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(plan.partitions.empty());
  CHECK_THAT(plan.nodes[0].reason, Catch::Contains("'seq'"));
  CHECK_THAT(plan.nodes[0].reason, Catch::Contains("--dim seq="));
}

TEST_CASE("target files are parsed with errors that name the field", "[partitioner]") {
  CHECK(partitioner::loadTarget("npu-sim"));
  CHECK(partitioner::loadTarget("cpu"));
  auto unknown = partitioner::loadTarget("tpu");
  REQUIRE(!unknown);
  CHECK_THAT(unknown.error().message(), Catch::Contains("npu-sim"));
  auto badType = partitioner::parseTarget(R"({"name":"t","element_types":["float33"],"ops":[]})", "t.json");
  REQUIRE(!badType);
  CHECK_THAT(badType.error().message(), Catch::Contains("float33"));
  auto badAlign = partitioner::parseTarget(R"({"name":"t","weight_alignment":100,"ops":[]})", "t.json");
  REQUIRE(!badAlign);
  CHECK_THAT(badAlign.error().message(), Catch::Contains("weight_alignment"));
  auto notJson = partitioner::parseTarget("{", "t.json");
  REQUIRE(!notJson);
  CHECK_THAT(notJson.error().message(), Catch::Contains("t.json"));

  auto constrained = partitioner::parseTarget(
      R"({"name":"t","ops":[{"op":"Conv","constraints":{"auto_pad":["NOTSET"],"max_rank":4}}]})", "t.json");
  REQUIRE(constrained);
  REQUIRE(constrained->ops.size() == 1);
  CHECK(constrained->ops[0].maxRank == 4);
  CHECK(constrained->ops[0].attrs[0].allowedStrings == std::vector<std::string>{"NOTSET"});
}

TEST_CASE("weights are one entry per content, not per name", "[weightshare]") {
  weightshare::WeightPool pool;
  auto a = floatInit("a", {2, 3}).tensor;
  auto sameBytes = floatInit("b", {2, 3}).tensor;
  auto otherShape = floatInit("c", {3, 2}).tensor;
  auto otherBytes = floatInit("d", {2, 3}, 9.0f).tensor;
  CHECK(*pool.intern(a) == 0);
  CHECK(*pool.intern(sameBytes) == 0);
  CHECK(*pool.intern(otherShape) == 1);
  CHECK(*pool.intern(otherBytes) == 2);
  CHECK(pool.weights().size() == 3);
  CHECK(pool.referencedBytes() == 4 * 24);
  CHECK(pool.uniqueBytes() == 3 * 24);
  CHECK(pool.weights()[0].references == 2);
}

// The pool written to a container in memory, which opens and verifies.
static std::vector<std::byte> writePool(const weightshare::WeightPool& pool) {
  format::ContainerWriter writer(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(weightshare::addPoolWeights(writer, pool));
  auto bytes = writer.serialize();
  REQUIRE(bytes);
  auto view = format::ContainerView::open(*bytes, nullptr, "pool.bin");
  REQUIRE(view);
  REQUIRE(view->verify());
  return std::move(bytes).value();
}

TEST_CASE("packed weights are pooled as recipes: sampled, hashed only to tell look-alikes apart, written packed",
          "[weightshare]") {
  const ops::WeightLayout panels{ops::WeightLayoutKind::GemmPanels, 8, 7};  // K = 20, N = 13: odd blocks and panels
  const ops::WeightLayout transposed{ops::WeightLayoutKind::GemmPanelsTransposed, 8, 7};
  auto b = floatInit("b", {20, 13}, 1.0f).tensor;
  auto sameBytes = floatInit("b2", {20, 13}, 1.0f).tensor;  // other storage, equal bytes
  auto packed = cpu::packWeight(panels, b);
  REQUIRE(packed);
  // A plain 1-D weight whose bytes are exactly b's packed bytes: the same stored weight.
  auto packedCopy = ir::Tensor::copyOf(ir::ElemType::Float, packed->shape(), packed->bytes());
  REQUIRE(packedCopy);

  weightshare::WeightPool pool;
  CHECK(*pool.intern(b, panels) == 0);
  CHECK(pool.bytesHashed() == 0);       // nothing like it yet: its fingerprint is enough
  CHECK(*pool.intern(b, panels) == 0);  // the same storage in the same layout
  CHECK(pool.bytesHashed() == 0);
  CHECK(*pool.intern(sameBytes, panels) == 0);  // equal fingerprints: both hashed, then compared
  CHECK(pool.bytesHashed() == 2 * packed->byteSize());
  CHECK(*pool.intern(*packedCopy) == 0);
  CHECK(*pool.intern(b) == 1);               // plain: other bytes
  CHECK(*pool.intern(b, transposed) == 2);  // b as a transposed B operand: other bytes
  CHECK(pool.weights().size() == 3);
  CHECK(pool.weights()[0].references == 4);
  const auto& w = pool.weights()[0];
  CHECK(w.shape == packed->shape());
  CHECK(w.size == packed->byteSize());
  CHECK(*w.storedHash() == hash128(packed->bytes()));
  CHECK(*pool.weights()[2].storedHash() == hash128(cpu::packWeight(transposed, b)->bytes()));
  CHECK_FALSE(pool.intern(floatInit("v", {4}).tensor, panels));  // a 1-D weight has no panel layout

  // The container gets the packed bytes, produced while it is written, under the hash of those bytes.
  auto bytes = writePool(pool);
  auto view = format::ContainerView::open(bytes, nullptr, "pool.bin");
  REQUIRE(view);
  REQUIRE(view->weights().size() == 3);
  auto stored = view->weightBytes(0);
  REQUIRE(stored.size() == packed->byteSize());
  CHECK(std::memcmp(stored.data(), packed->data(), stored.size()) == 0);
  CHECK(view->weights()[0].hash == hash128(packed->bytes()));
  CHECK(view->weights()[0].shape == packed->shape());
  // Fingerprints sample the stored bytes: weights that differ only between the samples are hashed, and kept apart.
  {
    weightshare::WeightPool large;
    std::vector<float> values(1 << 16, 1.0f);
    auto first = ir::Tensor::fromVector(ir::ElemType::Float, {256, 256}, values);
    values[12345] = 2.0f;  // between two sampled windows
    auto second = ir::Tensor::fromVector(ir::ElemType::Float, {256, 256}, values);
    CHECK(*large.intern(first, panels) == 0);
    CHECK(*large.intern(second, panels) == 1);
    CHECK(large.bytesHashed() == 2 * large.weights()[0].size);
    CHECK(large.weights()[0].fingerprint == large.weights()[1].fingerprint);
    // Two recipes of other shapes whose packed bytes are equal (all zeros, 64 K floats each): one stored weight.
    auto zerosWide = ir::Tensor::fromVector(ir::ElemType::Float, {128, 512}, std::vector<float>(1 << 16));
    auto zerosTall = ir::Tensor::fromVector(ir::ElemType::Float, {512, 128}, std::vector<float>(1 << 16));
    CHECK(*large.intern(zerosWide, panels) == 2);
    CHECK(*large.intern(zerosTall, panels) == 2);
    auto written = writePool(large);
    auto opened = format::ContainerView::open(written, nullptr, "large.bin");
    REQUIRE(opened);
    REQUIRE(opened->weights().size() == 3);
    CHECK(opened->weights()[1].hash == hash128(cpu::packWeight(panels, second)->bytes()));
  }
  // A producer that gives the wrong byte count fails the write instead of leaving a short weight.
  format::ContainerWriter wrong(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(wrong.addWeight(ir::ElemType::Float, {4}, 16, Hash128{}, [&](const auto& sink) {
    return sink(packed->bytes().first(8));
  }));
  CHECK_FALSE(wrong.serialize());
}

TEST_CASE("a pool's packed weights are packed ahead of the writer, across weights, for every output call",
          "[weightshare]") {
  const ops::WeightLayout panels{ops::WeightLayoutKind::GemmPanels, 16, 256};
  const ops::WeightLayout transposed{ops::WeightLayoutKind::GemmPanelsTransposed, 8, 256};
  weightshare::WeightPool pool;
  std::vector<std::pair<ir::Tensor, ops::WeightLayout>> added;
  for (int i = 0; i < 4; ++i) {  // 1.6 MiB each: two pieces, and more pieces in all than the packer queues
    std::vector<float> values(600 * 700);
    for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>((k * 7 + i) % 1000);
    added.emplace_back(ir::Tensor::fromVector(ir::ElemType::Float, {600, 700}, values), i % 2 ? transposed : panels);
    CHECK(*pool.intern(added.back().first, added.back().second) == added.size() - 1);
    added.emplace_back(floatInit(fmt::format("plain{}", i), {3}, static_cast<float>(i)).tensor, ops::WeightLayout{});
    CHECK(*pool.intern(added.back().first) == added.size() - 1);  // plain ones between the packed ones
  }
  format::ContainerWriter writer(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(weightshare::addPoolWeights(writer, pool));
  auto first = writer.serialize();
  REQUIRE(first);
  auto second = writer.serialize();  // the packing thread starts over
  REQUIRE(second);
  CHECK(*first == *second);
  auto view = format::ContainerView::open(*first, nullptr, "ahead.bin");
  REQUIRE(view);
  REQUIRE(view->verify());
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& [tensor, layout] = added[i];
    auto stored = layout.plain() ? std::optional(tensor) : std::optional(*cpu::packWeight(layout, tensor));
    REQUIRE(view->weightBytes(i).size() == stored->byteSize());
    CHECK(std::memcmp(view->weightBytes(i).data(), stored->data(), stored->byteSize()) == 0);
    CHECK(view->weights()[i].hash == hash128(stored->bytes()));
  }
  // A write that fails in the middle of a packed weight (the file size limit: EFBIG) leaves no file, and the next
  // output call starts the packing over and gives the same bytes.
  const auto path = std::filesystem::temp_directory_path() / fmt::format("ctxkit_ahead_{}.bin", ::getpid());
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 3 << 20;  // in the second packed weight
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  Status failed = writer.write(path);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
  std::signal(SIGXFSZ, previous);
  CHECK_FALSE(failed.isOk());
  CHECK_FALSE(std::filesystem::exists(path));
  REQUIRE(writer.write(path));
  auto file = readFile(path);
  REQUIRE(file);
  REQUIRE(file->size() == first->size());
  CHECK(std::memcmp(file->data(), first->data(), file->size()) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("the memory plan reuses dead buffers and keeps live ones apart", "[codegen]") {
  std::vector<codegen::BufferRequest> reqs = {{100, 0, 1}, {200, 1, 2}, {100, 2, 3}, {50, 3, 3}};
  auto plan = codegen::planMemory(reqs, 64);
  auto overlaps = [&](size_t i, size_t j) {
    auto end = [&](size_t k) { return plan.offsets[k] + (reqs[k].size + 63) / 64 * 64; };
    return plan.offsets[i] < end(j) && plan.offsets[j] < end(i);
  };
  for (size_t i = 0; i < reqs.size(); ++i) {
    CHECK(plan.offsets[i] % 64 == 0);
    for (size_t j = i + 1; j < reqs.size(); ++j)
      if (reqs[i].firstUse <= reqs[j].lastUse && reqs[j].firstUse <= reqs[i].lastUse) CHECK(!overlaps(i, j));
  }
  // Buffers 0 and 2 never live together: the arena is smaller than the sum of all sizes.
  CHECK(plan.arenaSize < 128 + 256 + 128 + 64);
  CHECK(plan.arenaSize >= 256 + 128);
}

TEST_CASE("lowering folds BatchNormalization and Relu into Conv and turns Reshape into a view", "[codegen]") {
  ir::Graph g;
  g.inputs = {floatValue("x", dims({1, 2, 4, 4}))};
  g.outputs = {floatValue("y", dims({1, 32}))};
  g.initializers = {floatInit("w", {2, 2, 3, 3}), floatInit("scale", {2}), floatInit("bias", {2}), floatInit("mean", {2}),
                    floatInit("var", {2}, 1.0f)};
  std::vector<int64_t> target = {1, 32};
  g.initializers.push_back(ir::Initializer{"shape", ir::Tensor::fromVector(ir::ElemType::Int64, {2}, target), std::nullopt});
  ir::Node conv = node("Conv", {"x", "w"}, {"c"});
  conv.attrs.set(ir::Attribute::makeInts("pads", {1, 1, 1, 1}));
  g.nodes = {conv, node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}), node("Relu", {"n"}, {"r"}),
             node("Reshape", {"r", "shape"}, {"flat"}), node("Sigmoid", {"flat"}, {"y"})};
  auto facts = analysis::analyzeGraph(g, {});
  REQUIRE(facts);
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  REQUIRE(plan.partitions.size() == 1);
  weightshare::WeightPool pool;
  auto lowered = codegen::lowerPartition(g, *facts, plan.partitions[0], {"y"}, [&](const ir::Tensor& t, const ops::WeightLayout& l) { return pool.intern(t, l); });
  REQUIRE(lowered);
  std::vector<ir::OpKind> kinds;
  for (const auto& op : lowered->program.ops) kinds.push_back(op.kind);
  CHECK(kinds == std::vector<ir::OpKind>{ir::OpKind::Conv, ir::OpKind::Sigmoid});
  REQUIRE(std::holds_alternative<ops::ConvAttrs>(lowered->program.ops[0].typed));
  CHECK(std::get<ops::ConvAttrs>(lowered->program.ops[0].typed).epilogue.activation == ops::Activation::Relu);
  CHECK(lowered->inputs == std::vector<std::string>{"x"});
  CHECK(lowered->outputs == std::vector<std::string>{"y"});
  // The folded weight and bias are the only weights; the Reshape shape is not one.
  CHECK(pool.weights().size() == 2);
  bool hasView = std::any_of(lowered->program.tensors.begin(), lowered->program.tensors.end(),
                             [](const auto& t) { return t.kind == program::TensorKind::View; });
  CHECK(hasView);
  CHECK(lowered->program.arenaSize > 0);
}

TEST_CASE("Shape of a static value folds to a constant, so shape arithmetic compiles away", "[analysis]") {
  ir::Graph g;
  g.inputs = {floatValue("x", {ir::Dim::named("n"), ir::Dim::known(6)})};
  g.outputs = {floatValue("y", {ir::Dim::named("n"), ir::Dim::known(6)}), floatValue("last", dims({1}))};
  ir::Node lastDim = node("Shape", {"x"}, {"last"}, 15);
  lastDim.attrs.set(ir::Attribute::makeInt("start", -1));
  g.nodes = {node("Shape", {"x"}, {"s"}, 15), lastDim, node("Reshape", {"x", "s"}, {"r"}), node("Relu", {"r"}, {"y"})};
  analysis::Bindings b;
  b.dims["n"] = 2;
  auto facts = analysis::analyzeGraph(g, b);
  INFO((facts ? std::string() : facts.error().message()));
  REQUIRE(facts);
  const auto* s = facts->find("s");
  REQUIRE(s->constant);
  CHECK(s->constant->shape() == ir::Shape{2});
  CHECK(s->constant->dataAs<int64_t>()[0] == 2);
  const auto* last = facts->find("last");
  REQUIRE(last->constant);
  CHECK(last->constant->elementCount() == 1);
  CHECK(last->constant->dataAs<int64_t>()[0] == 6);
  CHECK(*facts->find("y")->shape == ir::Shape{2, 6});
  auto plan = partitioner::partitionGraph(g, *facts, targetWithout("none"));
  CHECK(plan.nodes[0].placement == partitioner::NodePlacement::Folded);
  CHECK(plan.nodes[2].placement == partitioner::NodePlacement::Compiled);
}
