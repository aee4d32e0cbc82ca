// Runtime sessions: loading from a buffer with a context path, shared mappings, compatibility, validation.
#include "../common/graph_builder.h"
#include "onnx_io/onnx_io.h"
#include "ops/node_attrs.h"
#include "runtime_test_util.h"
#include "support/file_io.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

using namespace ctxkit;
namespace fs = std::filesystem;

using namespace ctxkit::runtime::testing;

TEST_CASE("a model in memory resolves its .bin against the context file path", "[runtime]") {
  Workspace ws("buffer");
  compile({"tiny_cnn"}, ws.dir, false);
  auto bytes = readFile(ws.dir / "tiny_cnn_ctx.onnx");
  REQUIRE(bytes);
  auto span = std::as_bytes(std::span(bytes->data(), bytes->size()));
  auto good = runtime::Session::loadBuffer(span, ws.dir / "tiny_cnn_ctx.onnx");
  INFO((good ? std::string() : good.error().message()));
  REQUIRE(good);
  expectMatch(**good, "tiny_cnn");
  auto wrong = runtime::Session::loadBuffer(span, fs::temp_directory_path() / "elsewhere" / "m_ctx.onnx");
  REQUIRE(!wrong);
  CHECK_THAT(wrong.error().message(), Catch::Contains("tiny_cnn_ctxkit.bin"));
}

TEST_CASE("sessions on one shared .bin map it once", "[runtime]") {
  Workspace ws("shared");
  compile({"tiny_prefill", "tiny_decode"}, ws.dir, true);
  size_t before = runtime::sharedContextCount();
  auto prefill = runtime::Session::loadFile(ws.dir / "tiny_prefill_ctx.onnx");
  auto decode = runtime::Session::loadFile(ws.dir / "tiny_decode_ctx.onnx");
  REQUIRE(prefill);
  REQUIRE(decode);
  CHECK(runtime::sharedContextCount() == before + 1);
  CHECK((*prefill)->stats().compiledNodes == 1);
  expectMatch(**prefill, "tiny_prefill");
  expectMatch(**decode, "tiny_decode");
}

TEST_CASE("a different target revision warns, or fails when asked to", "[runtime]") {
  Workspace ws("revision");
  std::ofstream(ws.dir / "rev2.json")
      << R"({"name":"npu-sim-rev2","hardware_architecture":"npu-sim","revision":"2","ops":"all-kernels"})";
  pipeline::CompileOptions o;
  o.models = {kSamples / "tiny_cnn.onnx"};
  o.outputDir = ws.dir / "out";
  o.target = (ws.dir / "rev2.json").string();
  REQUIRE(pipeline::compileModels(o));
  auto lenient = runtime::Session::loadFile(ws.dir / "out" / "tiny_cnn_ctx.onnx");
  REQUIRE(lenient);
  CHECK((*lenient)->compatibility() == runtime::Compatibility::PreferRecompilation);
  REQUIRE((*lenient)->warnings().size() == 1);
  CHECK_THAT((*lenient)->warnings()[0], Catch::Contains("revision '2'"));
  runtime::SessionOptions strict;
  strict.failOnSuboptimal = true;
  auto failed = runtime::Session::loadFile(ws.dir / "out" / "tiny_cnn_ctx.onnx", strict);
  REQUIRE(!failed);
  CHECK_THAT(failed.error().message(), Catch::Contains("PREFER_RECOMPILATION"));
}

TEST_CASE("inputs of the wrong shape are refused before anything runs", "[runtime]") {
  Workspace ws("shape");
  compile({"tiny_decode"}, ws.dir, false);
  auto s = runtime::Session::loadFile(ws.dir / "tiny_decode_ctx.onnx");
  REQUIRE(s);
  auto wrong = ir::Tensor::allocate(ir::ElemType::Float, {1, 2, 64});
  REQUIRE(wrong);
  auto r = (*s)->run({*wrong});
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("1x1x64"));
}

TEST_CASE("a plain .onnx runs entirely on the fallback path", "[runtime]") {
  auto s = runtime::Session::loadFile(kSamples / "tiny_prefill.onnx");
  REQUIRE(s);
  CHECK((*s)->stats().compiledNodes == 0);
  CHECK((*s)->stats().fallbackNodes == 33);
  expectMatch(**s, "tiny_prefill");
}

TEST_CASE("sessions of one unchanged file share its parsed model and prepared fallback ops", "[runtime]") {
  Workspace ws("shared_model");
  const fs::path model = ws.dir / "m.onnx";
  fs::copy_file(kSamples / "tiny_prefill.onnx", model);
  auto first = runtime::Session::loadFile(model);
  REQUIRE(first);
  CHECK_FALSE((*first)->stats().sharedModel);
  const size_t prepared = (*first)->preparedFallbackOps();
  CHECK(prepared > 0);  // static shapes: prepared at load
  auto second = runtime::Session::loadFile(model);
  REQUIRE(second);
  CHECK((*second)->stats().sharedModel);
  CHECK((*second)->preparedFallbackOps() == prepared);  // the same cache, nothing prepared again
  expectMatch(**second, "tiny_prefill");
  expectMatch(**first, "tiny_prefill");
  // Not with sharing off.
  runtime::SessionOptions own;
  own.shareContexts = false;
  auto unshared = runtime::Session::loadFile(model, own);
  REQUIRE(unshared);
  CHECK_FALSE((*unshared)->stats().sharedModel);
  // A file rewritten in place is another model: tiny_cnn under the same name is parsed afresh and runs as itself.
  fs::copy_file(kSamples / "tiny_cnn.onnx", model, fs::copy_options::overwrite_existing);
  auto rewritten = runtime::Session::loadFile(model);
  REQUIRE(rewritten);
  CHECK_FALSE((*rewritten)->stats().sharedModel);
  expectMatch(**rewritten, "tiny_cnn");
  // Once no session holds it, a model is parsed again.
  first->reset();
  second->reset();
  fs::copy_file(kSamples / "tiny_prefill.onnx", model, fs::copy_options::overwrite_existing);
  auto again = runtime::Session::loadFile(model);
  REQUIRE(again);
  CHECK_FALSE((*again)->stats().sharedModel);
}

namespace {

// Models with If, Loop and Scan built here (no outside material), each with compiled work around the control flow.
// Values: x feeds, the graph reads outer-scope values from inside its bodies, and expected outputs are worked out
// by hand from the ONNX operator definitions.
ir::ValueInfo value(const std::string& name, ir::ElemType type, std::vector<int64_t> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  v.shape.emplace();
  for (int64_t d : dims) v.shape->push_back(ir::Dim::known(d));
  return v;
}

ir::Node op(const std::string& type, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  return ctxkit::testing::node(type, std::move(inputs), std::move(outputs));
}

ir::Initializer floats(const std::string& name, ir::Shape shape, std::vector<float> v) {
  return {name, ir::Tensor::fromVector(ir::ElemType::Float, std::move(shape), v), std::nullopt};
}

ir::Model modelOf(ir::Graph g) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.producerName = "ctxkit-tests";
  m.graph = std::move(g);
  return m;
}

using ir::ElemType;

// y = 2 * (cond ? x*x + 1 : x*x - x)
ir::Model ifModel() {
  auto thenG = std::make_shared<ir::Graph>();
  thenG->name = "then";
  thenG->initializers.push_back(floats("one", {3}, {1, 1, 1}));
  thenG->nodes.push_back(op("Add", {"x2", "one"}, {"t_out"}));
  thenG->outputs.push_back(value("t_out", ElemType::Float, {3}));
  auto elseG = std::make_shared<ir::Graph>();
  elseG->name = "else";
  elseG->nodes.push_back(op("Sub", {"x2", "x"}, {"e_out"}));
  elseG->outputs.push_back(value("e_out", ElemType::Float, {3}));
  ir::Graph g;
  g.name = "if_model";
  g.inputs = {value("cond", ElemType::Bool, {}), value("x", ElemType::Float, {3})};
  g.initializers.push_back(floats("two", {3}, {2, 2, 2}));
  g.nodes.push_back(op("Mul", {"x", "x"}, {"x2"}));
  ir::Node branch = op("If", {"cond"}, {"picked"});
  branch.attrs.set(ir::Attribute::makeGraph("then_branch", thenG));
  branch.attrs.set(ir::Attribute::makeGraph("else_branch", elseG));
  g.nodes.push_back(std::move(branch));
  g.nodes.push_back(op("Mul", {"picked", "two"}, {"y"}));
  g.outputs = {value("y", ElemType::Float, {3})};
  return modelOf(std::move(g));
}

// Three iterations of v += x (x from the outer scope), the running v as a scan output, then Relu(-v_final).
ir::Model loopModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "loop_body";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  value("v_in", ElemType::Float, {2})};
  body->nodes.push_back(op("Identity", {"c_in"}, {"c_out"}));
  body->nodes.push_back(op("Add", {"v_in", "x"}, {"v_out"}));
  body->nodes.push_back(op("Neg", {"v_out"}, {"each"}));
  body->outputs = {value("c_out", ElemType::Bool, {}), value("v_out", ElemType::Float, {2}),
                   value("each", ElemType::Float, {2})};
  ir::Graph g;
  g.name = "loop_model";
  g.inputs = {value("x", ElemType::Float, {2}), value("v0", ElemType::Float, {2})};
  g.initializers.push_back({"trips", ir::Tensor::fromVector(ElemType::Int64, {}, std::vector<int64_t>{3}), {}});
  g.initializers.push_back({"go", ir::Tensor::fromVector(ElemType::Bool, {}, std::vector<uint8_t>{1}), {}});
  g.nodes.push_back(op("Abs", {"v0"}, {"start"}));
  ir::Node loop = op("Loop", {"trips", "go", "start"}, {"v_final", "all"});
  loop.attrs.set(ir::Attribute::makeGraph("body", body));
  g.nodes.push_back(std::move(loop));
  g.nodes.push_back(op("Neg", {"v_final"}, {"neg"}));
  g.nodes.push_back(op("Relu", {"neg"}, {"r"}));
  g.outputs = {value("r", ElemType::Float, {2}), value("all", ElemType::Float, {3, 2})};
  return modelOf(std::move(g));
}

// Running sums over the rows of xs*2: the final sum and every partial one.
ir::Model scanModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "scan_body";
  body->inputs = {value("s_in", ElemType::Float, {2}), value("row", ElemType::Float, {2})};
  body->nodes.push_back(op("Add", {"s_in", "row"}, {"s_out"}));
  body->nodes.push_back(op("Identity", {"s_out"}, {"partial"}));
  body->outputs = {value("s_out", ElemType::Float, {2}), value("partial", ElemType::Float, {2})};
  ir::Graph g;
  g.name = "scan_model";
  g.inputs = {value("s0", ElemType::Float, {2}), value("xs", ElemType::Float, {3, 2})};
  g.initializers.push_back(floats("two", {3, 2}, {2, 2, 2, 2, 2, 2}));
  g.nodes.push_back(op("Mul", {"xs", "two"}, {"doubled"}));
  ir::Node scan = op("Scan", {"s0", "doubled"}, {"s_final", "partials"});
  scan.attrs.set(ir::Attribute::makeGraph("body", body));
  scan.attrs.set(ir::Attribute::makeInt("num_scan_inputs", 1));
  g.nodes.push_back(std::move(scan));
  g.outputs = {value("s_final", ElemType::Float, {2}), value("partials", ElemType::Float, {3, 2})};
  return modelOf(std::move(g));
}

struct ControlFlowCase {
  std::string name;
  ir::Model model;
  std::vector<ir::Tensor> feeds;
  std::vector<std::vector<float>> expected;
};

ir::Tensor floatTensor(ir::Shape shape, std::vector<float> v) {
  return ir::Tensor::fromVector(ElemType::Float, std::move(shape), v);
}
ir::Tensor boolScalar(bool b) { return ir::Tensor::fromVector(ElemType::Bool, {}, std::vector<uint8_t>{b}); }

}  // namespace

TEST_CASE("If, Loop and Scan run on the fallback path, before and after compilation", "[runtime]") {
  std::vector<ControlFlowCase> cases;
  // x = [1, -2, 3]: x*x = [1, 4, 9]; then: 2*(x*x+1); else: 2*(x*x-x).
  cases.push_back({"if_true", ifModel(), {boolScalar(true), floatTensor({3}, {1, -2, 3})}, {{4, 10, 20}}});
  cases.push_back({"if_false", ifModel(), {boolScalar(false), floatTensor({3}, {1, -2, 3})}, {{0, 12, 12}}});
  // |v0| = [10, 20], x = [1, -2]: v = [11, 18], [12, 16], [13, 14]; r = relu(-v) = 0; all = -v per iteration.
  cases.push_back({"loop", loopModel(), {floatTensor({2}, {1, -2}), floatTensor({2}, {-10, 20})},
                   {{0, 0}, {-11, -18, -12, -16, -13, -14}}});
  // rows*2 = [2, 4], [6, 8], [-2, 0]; s0 = [1, 1]: partials [3, 5], [9, 13], [7, 13].
  cases.push_back({"scan", scanModel(), {floatTensor({2}, {1, 1}), floatTensor({3, 2}, {1, 2, 3, 4, -1, 0})},
                   {{7, 13}, {3, 5, 9, 13, 7, 13}}});
  for (const auto& c : cases) {
    for (const std::string target : {"cpu", "npu-sim"}) {
      INFO(c.name << " on " << target);
      Workspace ws(c.name + "_" + target);
      const fs::path source = ws.dir / "model.onnx";
      REQUIRE(onnx_io::saveModel(c.model, source));
      pipeline::CompileOptions o;
      o.models = {source};
      o.outputDir = ws.dir / "out";
      o.target = target;
      auto compiled = pipeline::compileModels(o);
      INFO((compiled ? std::string() : compiled.error().message()));
      REQUIRE(compiled);
      for (const fs::path& model : {source, ws.dir / "out" / "model_ctx.onnx"}) {
        INFO(model.string());
        auto s = runtime::Session::loadFile(model);
        INFO((s ? std::string() : s.error().message()));
        REQUIRE(s);
        auto outs = (*s)->run(c.feeds);
        INFO((outs ? std::string() : outs.error().message()));
        REQUIRE(outs);
        REQUIRE(outs->size() == c.expected.size());
        for (size_t i = 0; i < outs->size(); ++i) {
          const ir::Tensor& got = (*outs)[i];
          REQUIRE(got.type() == ElemType::Float);
          REQUIRE(got.elementCount() == c.expected[i].size());
          std::vector<float> values(got.dataAs<float>(), got.dataAs<float>() + got.elementCount());
          CHECK(values == c.expected[i]);
        }
      }
    }
  }
}

TEST_CASE("a graph whose nodes are out of order, or that never writes an output, is refused at load", "[runtime]") {
  ir::Graph g;
  g.name = "unordered";
  g.inputs = {value("x", ElemType::Float, {3})};
  g.nodes = {op("Neg", {"a"}, {"y"}), op("Relu", {"x"}, {"a"})};
  g.outputs = {value("y", ElemType::Float, {3})};
  auto unordered = runtime::Session::load(modelOf(g), ".");
  REQUIRE(!unordered);
  CHECK_THAT(unordered.error().message(), Catch::Contains("reads 'a' before any node produces it"));

  std::swap(g.nodes[0], g.nodes[1]);
  REQUIRE(runtime::Session::load(modelOf(g), "."));
  g.outputs.push_back(value("never", ElemType::Float, {3}));
  auto missing = runtime::Session::load(modelOf(g), ".");
  REQUIRE(!missing);
  CHECK_THAT(missing.error().message(), Catch::Contains("'never'"));
}

TEST_CASE("a compiled node runs into the caller's output buffers, which must fit", "[runtime]") {
  Workspace ws("run_into");
  compile({"tiny_cnn"}, ws.dir, false);
  auto session = runtime::Session::loadFile(ws.dir / "tiny_cnn_ctx.onnx");
  REQUIRE(session);
  const runtime::Session& s = **session;
  auto feeds = tooling::loadInputFolder(kSamples / "tiny_cnn" / "test_data_set_0", s.inputs());
  REQUIRE(feeds);
  std::vector<const ir::Tensor*> ins;
  for (const auto& f : *feeds) ins.push_back(&f);
  auto want = s.runCompiledNode(0, ins);  // tiny_cnn compiles into one EPContext node, the model's node 0
  REQUIRE(want);
  auto descs = s.compiledNodeOutputs(0);
  REQUIRE(descs);
  REQUIRE(descs->size() == want->size());
  // The caller's buffer receives the result; nothing else is allocated for it.
  std::vector<float> buffer(static_cast<size_t>((*want)[0].elementCount()), -7.0f);
  auto view = ir::Tensor::mutableView((*descs)[0].type, (*descs)[0].shape, reinterpret_cast<std::byte*>(buffer.data()),
                                      buffer.size() * sizeof(float));
  REQUIRE(view);
  std::vector<ir::Tensor*> outs{&*view};
  REQUIRE(s.runCompiledNodeInto(0, ins, outs));
  CHECK(std::memcmp(buffer.data(), (*want)[0].data(), (*want)[0].byteSize()) == 0);
  // No buffer (an output nobody reads) runs on a scratch buffer; a buffer of another shape is refused.
  std::vector<ir::Tensor*> none{nullptr};
  CHECK(s.runCompiledNodeInto(0, ins, none));
  auto wrong = ir::Tensor::allocate(ir::ElemType::Float, {1});
  REQUIRE(wrong);
  std::vector<ir::Tensor*> bad{&*wrong};
  auto refused = s.runCompiledNodeInto(0, ins, bad);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("but the buffer given is float32 1"));
}

TEST_CASE("sessions of a weightless context share its programs only over the same source model", "[runtime]") {
  Workspace ws("weightless_sharing");
  const fs::path src = ws.dir / "src", copy = ws.dir / "copy", out = ws.dir / "out";
  fs::create_directories(src);
  fs::create_directories(copy);
  fs::copy_file(kSamples / "tiny_cnn.onnx", src / "tiny_cnn.onnx");
  fs::copy_file(kSamples / "tiny_cnn.onnx", copy / "tiny_cnn.onnx");
  pipeline::CompileOptions o;
  o.models.push_back(src / "tiny_cnn.onnx");
  o.outputDir = out;
  o.weightless = true;
  auto compiled = pipeline::compileModels(o);
  INFO((compiled ? std::string() : compiled.error().message()));
  REQUIRE(compiled);
  const fs::path model = out / "tiny_cnn_ctx.onnx";
  auto load = [&](const fs::path& source, bool verify, bool share) {
    runtime::SessionOptions options;
    options.sourceModelPath = source;
    options.verifyWeights = verify;
    options.shareContexts = share;
    auto s = runtime::Session::loadFile(model, options);
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    REQUIRE((*s)->stats().compiledNodes > 0);
    expectMatch(**s, "tiny_cnn");
    return std::move(s).value();
  };
  auto first = load(src / "tiny_cnn.onnx", false, true);
  CHECK(first->stats().sharedPrograms == 0);
  // The same source model (another spelling of its path): the program, its packed weights included, is shared.
  auto second = load(src / ".." / "src" / "tiny_cnn.onnx", false, true);
  CHECK(second->stats().sharedPrograms == second->stats().compiledNodes);
  // Checking the weights' hashes, another source file with the same bytes, or no sharing: programs of their own.
  CHECK(load(src / "tiny_cnn.onnx", true, true)->stats().sharedPrograms == 0);
  CHECK(load(copy / "tiny_cnn.onnx", false, true)->stats().sharedPrograms == 0);
  CHECK(load(src / "tiny_cnn.onnx", false, false)->stats().sharedPrograms == 0);
}

TEST_CASE("attributes are decoded once, at import: compiling and running loaded models decodes nothing again",
          "[runtime]") {
  Workspace ws("decode_once");
  const uint64_t before = ops::lateDecodes();
  // The compile path (analysis, partitioner, every lowering pass, emit) on a float and a QDQ model, both targets.
  compile({"tiny_cnn", "tiny_qdq_cnn", "tiny_prefill"}, ws.dir / "npu", false);
  compile({"tiny_cnn", "tiny_prefill"}, ws.dir / "cpu", false, "cpu");
  CHECK(ops::lateDecodes() == before);
  // The run path: compiled programs, and plain models on the fallback interpreter (prepared ops).
  for (const char* stem : {"tiny_cnn", "tiny_qdq_cnn", "tiny_prefill"}) {
    auto compiled = runtime::Session::loadFile(ws.dir / "npu" / (std::string(stem) + "_ctx.onnx"));
    REQUIRE(compiled);
    expectMatch(**compiled, stem);
    auto plain = runtime::Session::loadFile(kSamples / (std::string(stem) + ".onnx"));
    REQUIRE(plain);
    expectMatch(**plain, stem);
    expectMatch(**plain, stem);
  }
  CHECK(ops::lateDecodes() == before);
}
