// Runtime sessions: loading from a buffer with a context path, shared mappings, compatibility, validation.
#include "../common/control_flow_models.h"
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
using namespace ctxkit::testing::control_flow;
using ir::ElemType;

// One run of a control-flow case: its float outputs equal the hand-worked ones.
void checkRun(runtime::Session& s, const Case& c) {
  auto outs = s.run(c.feeds);
  INFO((outs ? std::string() : outs.error().message()));
  REQUIRE(outs);
  REQUIRE(outs->size() == c.expected.size());
  for (size_t i = 0; i < outs->size(); ++i) {
    const ir::Tensor& got = (*outs)[i];
    REQUIRE(got.type() == ElemType::Float);
    REQUIRE(got.elementCount() == c.expected[i].size());
    CHECK(std::vector<float>(got.dataAs<float>(), got.dataAs<float>() + got.elementCount()) == c.expected[i]);
  }
}
}  // namespace

TEST_CASE("If, Loop and Scan run on the fallback path, before and after compilation", "[runtime]") {
  // Nested subgraphs, loop-carried values that grow or are passed through swapped, zero and one iterations, scans
  // along other axes in reverse (tests/common/control_flow_models.h); each run twice in one session, the second
  // reusing the first's buffers.
  for (const auto& c : cases()) {
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
        CHECK((*s)->stats().planned);  // subgraphs on the frame path, not the Scope interpreter
        for (int run = 0; run < 2; ++run) checkRun(**s, c);
      }
    }
  }
}

TEST_CASE("graphs the run plan refuses run on the Scope interpreter, their values by id", "[runtime]") {
  // Each control-flow case with one more If whose branches return two values to its one output: the run plan refuses
  // the graph (the outputs do not match), so it runs on the Scope interpreter, which keeps the If's first value. Nested
  // bodies read values two graphs up (if_loop) and carried values change shape (loop_grow): the same hand-worked
  // outputs are expected.
  for (const auto& c : cases()) {
    INFO(c.name);
    ir::Model model = c.model;
    auto branch = [](const std::string& name) {
      auto g = std::make_shared<ir::Graph>();
      g->name = name;
      g->initializers.push_back(floats(name + "_k", {1}, {1}));
      g->nodes.push_back(op("Identity", {name + "_k"}, {name + "_v"}));
      g->outputs = {value(name + "_v", ElemType::Float, {1}), value(name + "_v", ElemType::Float, {1})};
      return g;
    };
    model.graph.initializers.push_back(boolInit("refused_cond", true));
    ir::Node refused = withGraph(op("If", {"refused_cond"}, {"refused_out"}), "then_branch", branch("refused_then"));
    refused.attrs.set(ir::Attribute::makeGraph("else_branch", branch("refused_else")));
    model.graph.nodes.insert(model.graph.nodes.begin(), std::move(refused));
    auto s = runtime::Session::load(model, ".", {}, c.name + ".onnx");
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    CHECK_FALSE((*s)->stats().planned);
    for (int run = 0; run < 2; ++run) checkRun(**s, c);
  }
}

TEST_CASE("a Loop scan output whose shape changes between iterations is an error naming the node and iteration",
          "[runtime]") {
  auto s = runtime::Session::load(loopGrowModel(true), ".", {}, "grow.onnx");
  REQUIRE(s);
  CHECK((*s)->stats().planned);
  auto outs = (*s)->run({floatTensor({2}, {2, 3}), floatTensor({1}, {5})});
  REQUIRE(!outs);
  CHECK_THAT(outs.error().message(),
             Catch::Contains("grow.onnx: node 'Loop_v_final' (Loop): iteration 1: scan output 1: a float32 value of "
                             "shape 5, but the first iteration gave float32 of shape 3"));
}

TEST_CASE("a Loop-carried input left out is an error naming the node and the body input", "[runtime]") {
  ir::Model model = loopGrowModel();
  model.graph.nodes[0].inputs = {"trips", "", ""};  // v0 omitted: the body's v_in has nothing to start from
  auto s = runtime::Session::load(model, ".", {}, "grow.onnx");
  REQUIRE(s);
  auto outs = (*s)->run({floatTensor({2}, {2, 3}), floatTensor({1}, {5})});
  REQUIRE(!outs);
  CHECK_THAT(outs.error().message(), Catch::Contains("(Loop): Loop-carried input 0 (body input 'v_in') is missing"));
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
