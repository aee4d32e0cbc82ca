// Compiled programs with bounded tensors (value-dependent shapes planned at their bound): a hand-built program run at
// 0 rows, some rows and the bound against results worked out here element by element, and the run errors.
#include "epcontext/contract.h"
#include "format/container.h"
#include "ops/typed_attrs.h"
#include "program/program.h"
#include "runtime/compiled_program.h"
#include "runtime/session.h"
#include "support/hash.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace ctxkit;
using program::TensorKind;

namespace {

constexpr float kThreshold = 0.5f;
const std::vector<float> kB = {0.5f, -1, 2, 1, 0.25f, -0.5f, -2, 3, 1, 0.75f, 1.5f, -1.25f};  // [4, 3]

template <typename T> std::span<const std::byte> bytesOf(const std::vector<T>& v) { return std::as_bytes(std::span(v)); }

// The weights: the threshold (a float scalar), Squeeze's axes ([0]) and MatMul's B ([4, 3]); with `program` as its
// graph, written to `file` when given.
std::shared_ptr<const format::ContainerView> weightsContainer(const program::Program* program = nullptr,
                                                              const std::filesystem::path* file = nullptr) {
  static const std::vector<float> threshold = {kThreshold};
  static const std::vector<int64_t> axes = {0};
  format::CompatInfo compat;
  compat.producer = epcontext::kProducer;
  compat.producerVersion = "0.1.0";
  compat.targetId = epcontext::kCpu.id;
  compat.targetRevision = epcontext::kCpu.revision;
  format::ContainerWriter writer(compat);
  REQUIRE(writer.addWeight(ir::ElemType::Float, {}, bytesOf(threshold)));
  REQUIRE(writer.addWeight(ir::ElemType::Int64, {1}, bytesOf(axes)));
  REQUIRE(writer.addWeight(ir::ElemType::Float, {4, 3}, bytesOf(kB)));
  if (program) REQUIRE(writer.addGraph("bounded_ctxkit_0", "bounded.onnx", program::serialize(*program)));
  auto bytes = writer.serialize();
  REQUIRE(bytes);
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes).value());
  if (file) {
    std::ofstream out(*file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(owned->data()), static_cast<std::streamsize>(owned->size()));
    REQUIRE(out.good());
  }
  auto view = format::ContainerView::open(std::span(*owned), owned, "bounded.bin");
  REQUIRE(view);
  return std::make_shared<const format::ContainerView>(std::move(view).value());
}

program::Op op(ir::OpKind kind, const char* name, std::vector<int32_t> ins, std::vector<int32_t> outs) {
  return program::Op{kind, 17, name, program::Indices(ins.begin(), ins.end()),
                     program::Indices(outs.begin(), outs.end()), ops::defaultAttrsFor(kind)};
}

// scores [6] > threshold -> NonZero -> [1, <=bound] -> Squeeze -> rows [<=bound] -> Gather(x [6, 4], rows) ->
// Relu -> MatMul(B [4, 3]) -> y [<=bound, 3]; Concat(relu, relu) on axis 1 -> [<=bound, 8]; the NonZero result's
// Shape ([2], static); TopK(relu, k = the row count, axis 0) -> top, top_idx [<=bound, 4]. `bound` is the rows the program is planned for (6: every row).
program::Program detectorProgram(int64_t bound = 6) {
  const auto n = static_cast<uint64_t>(bound);
  program::Program p;
  p.tensors = {
      {TensorKind::Input, ir::ElemType::Float, {6}, 0, 0, 24, "scores", {}},
      {TensorKind::Input, ir::ElemType::Float, {6, 4}, 1, 0, 96, "x", {}},
      {TensorKind::Weight, ir::ElemType::Float, {}, 0, 0, 4, "threshold", {}},
      {TensorKind::Weight, ir::ElemType::Int64, {1}, 1, 0, 8, "axes", {}},
      {TensorKind::Weight, ir::ElemType::Float, {4, 3}, 2, 0, 48, "B", {}},
      {TensorKind::Arena, ir::ElemType::Bool, {6}, 0, 0, 6, "keep", {}},
      {TensorKind::Arena, ir::ElemType::Int64, {1, bound}, 0, 64, 8 * n, "idx", {}, 0b10},
      {TensorKind::Arena, ir::ElemType::Int64, {bound}, 0, 128, 8 * n, "rows", {}, 0b1},
      {TensorKind::Arena, ir::ElemType::Float, {bound, 4}, 0, 192, 16 * n, "picked", {}, 0b1},
      {TensorKind::Arena, ir::ElemType::Float, {bound, 4}, 0, 320, 16 * n, "relu", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Float, {bound, 3}, 0, 0, 12 * n, "y", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Float, {bound, 8}, 1, 0, 32 * n, "both", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Int64, {2}, 2, 0, 16, "idx_shape", {}},
      {TensorKind::Arena, ir::ElemType::Int64, {1}, 0, 448, 8, "k", {}},
      {TensorKind::Output, ir::ElemType::Float, {bound, 4}, 3, 0, 16 * n, "top", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Int64, {bound, 4}, 4, 0, 32 * n, "top_idx", {}, 0b1},
  };
  p.arenaSize = 512;
  program::Op concat = op(ir::OpKind::Concat, "cat", {9, 9}, {11});
  std::get<ops::AxisAttrs>(concat.typed).axis = 1;
  p.ops = {op(ir::OpKind::Greater, "gt", {0, 2}, {5}),     op(ir::OpKind::NonZero, "nz", {5}, {6}),
           op(ir::OpKind::Squeeze, "sq", {6, 3}, {7}),     op(ir::OpKind::Gather, "gather", {1, 7}, {8}),
           op(ir::OpKind::Relu, "relu", {8}, {9}),         op(ir::OpKind::MatMul, "mm", {9, 4}, {10}),
           concat,                                         op(ir::OpKind::Shape, "shape", {6}, {12}),
           op(ir::OpKind::Shape, "count", {7}, {13}),      op(ir::OpKind::TopK, "topk", {9, 13}, {14, 15})};
  // TopK over the rows with k computed from their count: every column sorted, largest first.
  std::get<ops::TopKAttrs>(p.ops.back().typed).axis = 0;
  p.inputs = {0, 1};
  p.outputs = {10, 11, 12, 14, 15};
  return p;
}

ir::Tensor floats(ir::Shape shape, const std::vector<float>& v) {
  return ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v);
}

// x's rows: row r is r - 2.5, r * 0.5, -r, 1 + r.
std::vector<float> xValues() {
  std::vector<float> x;
  for (int r = 0; r < 6; ++r) x.insert(x.end(), {r - 2.5f, r * 0.5f, static_cast<float>(-r), 1.0f + r});
  return x;
}

// Runs the program on `scores` and compares every output with what the ops compute, element by element; the first
// difference as text, empty when all agree. No test macros: threads call it too.
std::string runDiffers(const runtime::CompiledProgram& cp, const std::vector<float>& scores, kernels::ThreadPool* pool) {
  const ir::Tensor s = floats({6}, scores);
  const std::vector<float> xv = xValues();
  const ir::Tensor x = floats({6, 4}, xv);
  const ir::Tensor* ins[] = {&s, &x};
  auto outs = cp.run(ins, pool);
  if (!outs) return outs.error().message();
  std::vector<int> kept;
  for (int r = 0; r < 6; ++r)
    if (scores[r] > kThreshold) kept.push_back(r);
  const auto k = static_cast<int64_t>(kept.size());
  const ir::Tensor& y = (*outs)[0];
  const ir::Tensor& both = (*outs)[1];
  const ir::Tensor& shape = (*outs)[2];
  if (!ir::sameShape(y.shape(), ir::Shape{k, 3}) || !ir::sameShape(both.shape(), ir::Shape{k, 8}) ||
      !ir::sameShape(shape.shape(), ir::Shape{2}))
    return fmt::format("shapes {} {} {} for {} rows", ir::shapeToString(y.shape()), ir::shapeToString(both.shape()),
                       ir::shapeToString(shape.shape()), k);
  if (shape.dataAs<int64_t>()[0] != 1 || shape.dataAs<int64_t>()[1] != k) return "NonZero's shape differs";
  const ir::Tensor& top = (*outs)[3];
  const ir::Tensor& topIdx = (*outs)[4];
  if (!ir::sameShape(top.shape(), ir::Shape{k, 4}) || !ir::sameShape(topIdx.shape(), ir::Shape{k, 4}))
    return fmt::format("TopK shapes {} {} for {} rows", ir::shapeToString(top.shape()),
                       ir::shapeToString(topIdx.shape()), k);
  for (int c = 0; c < 4; ++c) {
    // ONNX: largest first, equal values in index order.
    std::vector<std::pair<float, int64_t>> column;
    for (int64_t i = 0; i < k; ++i) column.emplace_back(std::max(0.0f, xv[kept[i] * 4 + c]), i);
    std::stable_sort(column.begin(), column.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int64_t i = 0; i < k; ++i)
      if (top.dataAs<float>()[i * 4 + c] != column[i].first || topIdx.dataAs<int64_t>()[i * 4 + c] != column[i].second)
        return fmt::format("TopK differs at [{}, {}]", i, c);
  }
  for (int64_t i = 0; i < k; ++i) {
    float relu[4];
    for (int c = 0; c < 4; ++c) relu[c] = std::max(0.0f, xv[kept[i] * 4 + c]);
    for (int c = 0; c < 8; ++c)
      if (both.dataAs<float>()[i * 8 + c] != relu[c % 4]) return fmt::format("Concat differs at row {}", i);
    for (int j = 0; j < 3; ++j) {
      float sum = 0;
      for (int c = 0; c < 4; ++c) sum += relu[c] * kB[c * 3 + j];
      if (std::abs(y.dataAs<float>()[i * 3 + j] - sum) > 1e-5f * (1 + std::abs(sum)))
        return fmt::format("MatMul differs at [{}, {}]: {} vs {}", i, j, y.dataAs<float>()[i * 3 + j], sum);
    }
  }
  return {};
}

// `p` written and read back, as a program read from a file, then created on the weights above.
Expected<std::unique_ptr<runtime::CompiledProgram>> throughTheEncoding(const program::Program& p, const char* name) {
  auto read = program::deserialize(program::serialize(p), 3, name);
  if (!read) return read.takeError();
  return runtime::CompiledProgram::create(std::move(read).value(), weightsContainer(), name);
}

void checkRun(const runtime::CompiledProgram& cp, const std::vector<float>& scores) {
  CHECK(runDiffers(cp, scores, nullptr) == "");
}

}  // namespace

TEST_CASE("a bounded program runs at 0 rows, some rows and its bound, its outputs at the run's extent",
          "[runtime][bounded]") {
  auto cp = throughTheEncoding(detectorProgram(), "bounded");
  INFO((cp ? std::string() : cp.error().message()));
  REQUIRE(cp);
  checkRun(**cp, {0, 0, 0, 0, 0, 0});                  // no row
  checkRun(**cp, {0.9f, 0, 0.7f, 0.1f, 0.6f, 0.5f});  // rows 0, 2, 4
  checkRun(**cp, {1, 1, 1, 1, 1, 1});                  // the bound
  checkRun(**cp, {0, 0, 0, 0, 0, 2});                  // the last row only, after larger runs
  checkRun(**cp, {0.9f, 0, 0.7f, 0.1f, 0.6f, 0.5f});  // a signature met before
  // MatMul's plain B was packed into panels once, for the four row counts its dynamic op was prepared for.
  CHECK((*cp)->panelPacks() == 1);
  // A caller's buffer for an output of bounded shape is refused: it is made at the run's extent.
  const ir::Tensor s = floats({6}, std::vector<float>(6, 1.0f));
  const ir::Tensor x = floats({6, 4}, xValues());
  const ir::Tensor* ins[] = {&s, &x};
  auto given = ir::Tensor::allocate(ir::ElemType::Float, {6, 3});
  REQUIRE(given);
  ir::Tensor* outs[] = {&given.value(), nullptr, nullptr, nullptr, nullptr};
  auto refused = (*cp)->runInto(ins, outs, nullptr);
  REQUIRE(!refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("output 0 ('y') has a bounded shape <=6x3"));
}

TEST_CASE("a bounded program pre-faulted at load makes no output buffer in its runs, one per output without",
          "[runtime][bounded][prefault]") {
  for (const bool prefault : {true, false}) {
    INFO("prefault " << prefault);
    runtime::ProgramOptions options;
    options.prefault = prefault;
    auto read = program::deserialize(program::serialize(detectorProgram()), 3, "bounded");
    REQUIRE(read);
    auto cp = runtime::CompiledProgram::create(std::move(read).value(), weightsContainer(), "bounded", options);
    REQUIRE(cp);
    checkRun(**cp, {0.9f, 0, 0.7f, 0.1f, 0.6f, 0.5f});  // the first run: the frame made at load
    checkRun(**cp, {1, 1, 1, 1, 1, 1});                  // the bound, in the same buffers
    // y, both, top and top_idx have bounded shapes: their buffers are the frame's, made with it or by the first run.
    CHECK((*cp)->outputSlotsMadeInRuns() == (prefault ? 0 : 4));
    CHECK((*cp)->frameCount() == 1);
  }
}

namespace {

// rows [<=6] (a bounded input: a fallback node's value-dependent result) -> Gather(x [6, 4], rows) -> Relu -> MatMul(B)
// -> y [<=6, 3]; picked [<=6, 4] -> Shape -> n [2].
program::Program boundedInputProgram() {
  program::Program p;
  p.tensors = {
      {TensorKind::Input, ir::ElemType::Int64, {6}, 0, 0, 48, "rows", {}, 0b1},
      {TensorKind::Input, ir::ElemType::Float, {6, 4}, 1, 0, 96, "x", {}},
      {TensorKind::Weight, ir::ElemType::Float, {4, 3}, 2, 0, 48, "B", {}},
      {TensorKind::Arena, ir::ElemType::Float, {6, 4}, 0, 0, 96, "picked", {}, 0b1},
      {TensorKind::Arena, ir::ElemType::Float, {6, 4}, 0, 128, 96, "relu", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Float, {6, 3}, 0, 0, 72, "y", {}, 0b1},
      {TensorKind::Output, ir::ElemType::Int64, {2}, 1, 0, 16, "n", {}},
  };
  p.arenaSize = 256;
  p.ops = {op(ir::OpKind::Gather, "gather", {1, 0}, {3}), op(ir::OpKind::Relu, "relu", {3}, {4}),
           op(ir::OpKind::MatMul, "mm", {4, 2}, {5}), op(ir::OpKind::Shape, "shape", {3}, {6})};
  p.inputs = {0, 1};
  p.outputs = {5, 6};
  return p;
}

}  // namespace

TEST_CASE("a bounded program input is taken at 0 rows, some and its bound, and refused above it or unequal elsewhere",
          "[runtime][bounded]") {
  auto cp = throughTheEncoding(boundedInputProgram(), "bounded_input");
  REQUIRE(cp);
  const std::vector<float> xv = xValues();
  const ir::Tensor x = floats({6, 4}, xv);
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{}, std::vector<int64_t>{4, 0, 4},
                                           std::vector<int64_t>{5, 4, 3, 2, 1, 0}, std::vector<int64_t>{2}}) {
    const auto k = static_cast<int64_t>(rows.size());
    // The caller's buffer holds exactly the run's rows: a program reading past them would show under the sanitizers.
    const ir::Tensor r = ir::Tensor::fromVector(ir::ElemType::Int64, {k}, rows);
    const ir::Tensor* ins[] = {&r, &x};
    auto outs = (*cp)->run(ins, nullptr);
    REQUIRE(outs);
    const ir::Tensor& y = (*outs)[0];
    REQUIRE(ir::sameShape(y.shape(), ir::Shape{k, 3}));
    REQUIRE(ir::sameShape((*outs)[1].shape(), ir::Shape{2}));
    CHECK((*outs)[1].dataAs<int64_t>()[0] == k);
    CHECK((*outs)[1].dataAs<int64_t>()[1] == 4);
    for (int64_t i = 0; i < k; ++i)
      for (int j = 0; j < 3; ++j) {
        float sum = 0;
        for (int c = 0; c < 4; ++c) sum += std::max(0.0f, xv[rows[i] * 4 + c]) * kB[c * 3 + j];
        CHECK(y.dataAs<float>()[i * 3 + j] == Approx(sum).epsilon(1e-6));
      }
  }
  // Above the bound, an exact dimension unequal, another rank or type: refused before anything runs, naming the input.
  auto refused = [&](const ir::Tensor& rows, const ir::Tensor& xs, const char* text) {
    const ir::Tensor* ins[] = {&rows, &xs};
    auto outs = (*cp)->run(ins, nullptr);
    REQUIRE(!outs);
    CHECK(outs.error().code() == ErrorCode::InvalidArgument);
    CHECK_THAT(outs.error().message(), Catch::Contains(text));
  };
  const ir::Tensor seven = ir::Tensor::fromVector(ir::ElemType::Int64, {7}, std::vector<int64_t>(7, 0));
  refused(seven, x, "input 0 ('rows') was compiled for int64 <=6 (\"<=\": at most) but got int64 7");
  const ir::Tensor flat = ir::Tensor::fromVector(ir::ElemType::Int64, {1, 2}, std::vector<int64_t>{0, 1});
  refused(flat, x, "input 0 ('rows') was compiled for int64 <=6 (\"<=\": at most) but got int64 1x2");
  const ir::Tensor narrow = ir::Tensor::fromVector(ir::ElemType::Int32, {2}, std::vector<int32_t>{0, 1});
  refused(narrow, x, "but got int32 2");
  const ir::Tensor two = ir::Tensor::fromVector(ir::ElemType::Int64, {2}, std::vector<int64_t>{0, 1});
  const ir::Tensor fewer = floats({5, 4}, std::vector<float>(20, 1.0f));
  refused(two, fewer, "input 1 ('x') was compiled for float32 6x4 but got float32 5x4");
  // The program still runs after the refusals.
  const ir::Tensor* ins[] = {&two, &x};
  CHECK((*cp)->run(ins, nullptr));
}

TEST_CASE("a run whose extent exceeds a recorded bound is an error naming the op and both shapes",
          "[runtime][bounded]") {
  auto container = weightsContainer();
  auto cp = runtime::CompiledProgram::create(detectorProgram(2), container, "small");
  REQUIRE(cp);
  checkRun(**cp, {0.9f, 0, 0, 0, 0, 0.7f});  // 2 rows: within the bound
  const ir::Tensor s = floats({6}, {0.9f, 0.9f, 0.9f, 0, 0, 0});
  const ir::Tensor x = floats({6, 4}, xValues());
  const ir::Tensor* ins[] = {&s, &x};
  auto outs = (*cp)->run(ins, nullptr);
  REQUIRE(!outs);
  CHECK(outs.error().code() == ErrorCode::InvalidGraph);
  CHECK_THAT(outs.error().message(),
             Catch::Contains("op 1 ('nz', NonZero) output 0 ('idx') computes int64 1x3 but is recorded as int64 1x<=2"));
  checkRun(**cp, {0, 0, 0, 0, 0, 0.7f});  // the frame is usable again
}

TEST_CASE("a bounded output read before its op writes it is refused, not read", "[runtime][bounded]") {
  auto container = weightsContainer();
  program::Program p = detectorProgram();
  // The Concat reads y (a bounded output) and is moved before the MatMul that writes it.
  p.ops[6].inputs[1] = 10;
  std::swap(p.ops[5], p.ops[6]);
  auto cp = runtime::CompiledProgram::create(std::move(p), container, "early");
  REQUIRE(cp);
  const ir::Tensor s = floats({6}, std::vector<float>(6, 1.0f));
  const ir::Tensor x = floats({6, 4}, xValues());
  const ir::Tensor* ins[] = {&s, &x};
  auto outs = (*cp)->run(ins, nullptr);
  REQUIRE(!outs);
  CHECK_THAT(outs.error().message(), Catch::Contains("op 5 ('cat', Concat) reads tensor 10 ('y') before any op writes it"));
}

TEST_CASE("threads run one bounded program at different extents at once, on a thread pool", "[runtime][bounded]") {
  auto container = weightsContainer();
  auto cp = runtime::CompiledProgram::create(detectorProgram(), container, "threads");
  REQUIRE(cp);
  auto pool = kernels::makeThreadPool(2);
  std::vector<std::string> failures(3);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40 && failures[t].empty(); ++i) {
        // Run i keeps the rows whose bit is set in (i * 7 + t) mod 64: every count from 0 to the bound.
        std::vector<float> scores(6);
        for (int r = 0; r < 6; ++r) scores[r] = (((i * 7 + static_cast<int>(t)) >> r) & 1) ? 0.75f : 0.25f;
        failures[t] = runDiffers(**cp, scores, t == 0 ? pool.get() : nullptr);
      }
    });
  for (auto& th : threads) th.join();
  for (const std::string& f : failures) CHECK(f == "");
}

TEST_CASE("a session runs an EPContext node of a bounded program and a fallback node reading its output",
          "[runtime][bounded]") {
  // scores, x -> EPContext (the program above) -> y [n, 3], both [n, 8], idx_shape [2]; Neg(y) on the fallback path.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "ctxkit_bounded_session_test";
  std::filesystem::create_directories(dir);
  const program::Program p = detectorProgram();
  const std::filesystem::path bin = dir / "bounded_ctx.bin";
  weightsContainer(&p, &bin);
  ir::Model m;
  m.irVersion = 8;
  m.opsets.push_back(ir::OpsetImport{"", 17});
  m.opsets.push_back(ir::OpsetImport{"com.microsoft", 1});
  ir::Graph& g = m.graph;
  g.name = "bounded";
  auto value = [](const std::string& name, ir::ElemType type, std::vector<ir::Dim> dims) {
    return ir::ValueInfo{name, type, std::move(dims), {}};
  };
  using ir::Dim;
  g.inputs = {value("scores", ir::ElemType::Float, {Dim::known(6)}),
              value("x", ir::ElemType::Float, {Dim::known(6), Dim::known(4)})};
  g.outputs = {value("negy", ir::ElemType::Float, {Dim::named("n"), Dim::known(3)}),
               value("both", ir::ElemType::Float, {Dim::named("n"), Dim::known(8)}),
               value("idx_shape", ir::ElemType::Int64, {Dim::known(2)}),
               value("top", ir::ElemType::Float, {Dim::named("n"), Dim::known(4)}),
               value("top_idx", ir::ElemType::Int64, {Dim::named("n"), Dim::known(4)})};
  ir::Node ep;
  ep.name = "ep0";
  ep.inputs = {"scores", "x"};
  ep.outputs = {"y", "both", "idx_shape", "top", "top_idx"};
  epcontext::NodeAttributes attrs = epcontext::ourNodeAttributes();
  attrs.mainContext = 1;
  attrs.embedMode = 0;
  const std::string cache = bin.filename().string();
  attrs.cacheContext = cache;
  attrs.partitionName = "bounded_ctxkit_0";
  attrs.hardwareArchitecture = epcontext::kCpu.id;
  epcontext::writeNodeAttributes(attrs, ep);
  ir::Node neg;
  neg.name = "neg0";
  neg.opType = "Neg";
  neg.kind = ir::OpKind::Neg;
  neg.opset = 17;
  neg.inputs = {"y"};
  neg.outputs = {"negy"};
  g.nodes = {ep, neg};
  auto s = runtime::Session::load(std::move(m), dir, {}, "bounded model");
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
  CHECK((*s)->stats().compiledNodes == 1);
  const std::vector<float> xv = xValues();
  for (const std::vector<float>& scores :
       {std::vector<float>{0.9f, 0, 0.7f, 0.1f, 0.6f, 0.5f}, std::vector<float>(6, 0.0f), std::vector<float>(6, 1.0f),
        std::vector<float>{0, 0, 0, 0, 0, 0.9f}}) {
    auto out = (*s)->run({floats({6}, scores), floats({6, 4}, xv)});
    REQUIRE(out);
    std::vector<int> kept;
    for (int r = 0; r < 6; ++r)
      if (scores[r] > kThreshold) kept.push_back(r);
    const auto k = static_cast<int64_t>(kept.size());
    REQUIRE(ir::sameShape((*out)[0].shape(), ir::Shape{k, 3}));
    REQUIRE(ir::sameShape((*out)[1].shape(), ir::Shape{k, 8}));
    CHECK((*out)[2].dataAs<int64_t>()[1] == k);
    for (int64_t i = 0; i < k; ++i)
      for (int j = 0; j < 3; ++j) {
        float sum = 0;
        for (int c = 0; c < 4; ++c) sum += std::max(0.0f, xv[kept[i] * 4 + c]) * kB[c * 3 + j];
        CHECK((*out)[0].dataAs<float>()[i * 3 + j] == Approx(-sum).epsilon(1e-6));
      }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a bounded program with any one byte changed is refused or runs, without reading or writing out of bounds",
          "[runtime][bounded]") {
  // Under the sanitizer builds an access outside a slot shows here; in any build, no crash and no hang. Both a
  // program computing its bounded values (the detector's rows) and one reading a bounded input.
  auto container = weightsContainer();
  const ir::Tensor s = floats({6}, {0.9f, 0.9f, 0, 0.9f, 0, 0.9f});
  const ir::Tensor x = floats({6, 4}, xValues());
  const ir::Tensor rows = ir::Tensor::fromVector(ir::ElemType::Int64, {3}, std::vector<int64_t>{5, 0, 2});
  const ir::Tensor* detectorIns[] = {&s, &x};
  const ir::Tensor* inputIns[] = {&rows, &x};
  struct Subject {
    const char* name;
    program::Program program;
    std::span<const ir::Tensor* const> inputs;
  };
  const Subject subjects[] = {{"computed bounds", detectorProgram(), detectorIns},
                              {"bounded input", boundedInputProgram(), inputIns}};
  runtime::ProgramOptions options;
  options.prefault = false;
  for (const Subject& subject : subjects) {
    INFO(subject.name);
    const std::vector<std::byte> bytes = program::serialize(subject.program);
    size_t refused = 0, ran = 0, failed = 0;
    for (size_t at = 16; at < bytes.size(); ++at) {  // not the arena size: a larger arena is merely larger
      for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{2}, uint8_t{0x7f}, uint8_t{0xff}}) {
        if (bytes[at] == std::byte{v}) continue;
        std::vector<std::byte> changed = bytes;
        changed[at] = std::byte{v};
        auto read = program::deserialize(changed, 3, "changed");
        if (!read) {
          ++refused;
          continue;
        }
        auto cp = runtime::CompiledProgram::create(std::move(read).value(), container, "changed", options);
        if (!cp) {
          ++refused;
          continue;
        }
        auto outs = (*cp)->run(subject.inputs, nullptr);
        ++(outs ? ran : failed);
      }
    }
    CHECK(refused > 0);
    CHECK(ran > 0);  // a changed name, say
    INFO(fmt::format("{} refused, {} ran, {} failed at run time", refused, ran, failed));
    CHECK(refused + ran + failed > bytes.size());
  }
}
