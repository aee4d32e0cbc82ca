// Weightless contexts through the real tools (docs/weight-sharing.md#weightless): `ctxgen --weightless` writes a
// context binary that records where each weight lives in the source models instead of its bytes; ctxrun reads them from
// the source model beside the _ctx.onnx or from --source-model and matches the samples' independent expected outputs; a
// missing, different or changed source model is a clear error. tests/ort_ep covers ONNX Runtime + the plugin EP on the
// same files.
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <set>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
using ctxkit::testing::kSamples;
using ctxkit::testing::sampleData;
namespace fs = std::filesystem;

namespace {

// Copies sample models into `dir` (the source models a weightless context reads).
void copySamples(const fs::path& dir, std::initializer_list<const char*> stems) {
  fs::create_directories(dir);
  for (const char* stem : stems)
    fs::copy_file(kSamples / (std::string(stem) + ".onnx"), dir / (std::string(stem) + ".onnx"),
                  fs::copy_options::overwrite_existing);
}

testing::ToolResult compile(const std::vector<std::string>& args) { return testing::runToolOk(CTXKIT_CTXGEN, args); }

void expectMatches(const fs::path& model, const std::string& stem, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {model.string(), "--inputs", sampleData(stem), "--expected", sampleData(stem), "--verify"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = runTool(CTXKIT_CTXRUN, args);
  INFO(model.string() << "\n" << r.out << r.err);
  CHECK(r.exitCode == 0);
  CHECK(r.out.find("match") != std::string::npos);
}

}  // namespace

TEST_CASE("a weightless --share pair keeps its weights in the source models and runs from them", "[e2e][weightless]") {
  TempDir dir("weightless_pair");
  const fs::path src = dir / "src", out = dir / "out", full = dir / "full";
  copySamples(src, {"tiny_prefill", "tiny_decode"});
  const std::string models = (src / "tiny_prefill.onnx").string() + "," + (src / "tiny_decode.onnx").string();
  auto r = compile({models, "--share", "--weightless", "-o", out.string(), "--json", "-"});
  auto report = nlohmann::json::parse(r.out);
  compile({models, "--share", "-o", full.string(), "-q"});

  // Every weight of the pair is a source initializer: the .bin holds programs and the weight table only.
  const auto& weights = report["weights"];
  CHECK(weights["weightless"].get<bool>());
  CHECK(weights["source_bytes"].get<uint64_t>() == weights["unique_bytes"].get<uint64_t>());
  CHECK(weights["source_count"].get<size_t>() == weights["unique_count"].get<size_t>());
  const uint64_t weightless = fs::file_size(out / "tiny_prefill_ctxkit.bin");
  const uint64_t normal = fs::file_size(full / "tiny_prefill_ctxkit.bin");
  // (The weightless file adds a table of source model and initializer names: less than half the weight bytes here.)
  CHECK(weightless + weights["unique_bytes"].get<uint64_t>() / 2 < normal);

  // The pair shares its weights under different initializer names: each weight records its place in both models,
  // and that place holds the same bytes (checked here against the source models, not through ctxkit's runtime).
  auto view = format::ContainerView::openFile(out / "tiny_prefill_ctxkit.bin");
  REQUIRE(view);
  CHECK(view->weightless());
  CHECK(view->compat().formatMinor == format::kFormatMinor);
  auto prefill = onnx_io::loadModel(src / "tiny_prefill.onnx");
  auto decode = onnx_io::loadModel(src / "tiny_decode.onnx");
  REQUIRE(prefill);
  REQUIRE(decode);
  for (const auto& w : view->weights()) {
    REQUIRE(w.sources.size() == 2);
    std::set<std::string> names;
    for (const auto& s : w.sources) {
      const ir::Model& m = s.model == "tiny_prefill.onnx" ? *prefill : *decode;
      const ir::Initializer* init = m.graph.findInitializer(s.initializer);
      REQUIRE(init);
      CHECK(hash128(init->tensor.bytes()) == w.hash);
      names.insert(s.initializer);
    }
    CHECK(names.size() == 2);
  }

  // The source models beside the compiled ones (onnx_model_filename): both run and match the expected outputs.
  copySamples(out, {"tiny_prefill", "tiny_decode"});
  expectMatches(out / "tiny_prefill_ctx.onnx", "tiny_prefill");
  expectMatches(out / "tiny_decode_ctx.onnx", "tiny_decode");

  // ctxinspect lists the source models as files the deployment needs and says what the .bin leaves out.
  auto inspect = runTool(CTXKIT_CTXINSPECT, {(out / "tiny_prefill_ctx.onnx").string(), "--verify"});
  INFO(inspect.out << inspect.err);
  CHECK(inspect.exitCode == 0);
  CHECK(inspect.out.find("source model (weights of a weightless context)") != std::string::npos);
  CHECK(inspect.out.find("weightless:") != std::string::npos);

  // Embedded (embed mode 1): the context travels in the _ctx.onnx, the weights still in the source model.
  const fs::path embedded = dir / "embedded";
  copySamples(embedded, {"tiny_decode"});
  compile({(embedded / "tiny_decode.onnx").string(), "--weightless", "--embed-mode", "1", "-o", embedded.string(), "-q"});
  CHECK_FALSE(fs::exists(embedded / "tiny_decode_ctxkit.bin"));
  expectMatches(embedded / "tiny_decode_ctx.onnx", "tiny_decode");
  auto listed = runTool(CTXKIT_CTXINSPECT, {(embedded / "tiny_decode_ctx.onnx").string()});
  CHECK(listed.out.find("source model (weights of a weightless context)") != std::string::npos);
}

TEST_CASE("a weightless context finds its source model through --source-model, with external data in place",
          "[e2e][weightless]") {
  TempDir dir("weightless_external");
  const fs::path src = dir / "src", out = dir / "out";
  fs::create_directories(src);
  // The source model keeps its weights as ONNX external data: the runtime maps that file.
  auto model = onnx_io::loadModel(kSamples / "tiny_prefill.onnx");
  REQUIRE(model);
  REQUIRE(onnx_io::saveModelWithExternalData(std::move(model).value(), src / "tiny_prefill.onnx", "tiny_prefill.data", 0));
  compile({(src / "tiny_prefill.onnx").string(), "--weightless", "-o", out.string(), "-q"});
  CHECK(fs::file_size(out / "tiny_prefill_ctxkit.bin") < fs::file_size(src / "tiny_prefill.data"));

  // Nothing beside the compiled model: the run says where it looked and how to point at the weights.
  auto missing = runTool(CTXKIT_CTXRUN, {(out / "tiny_prefill_ctx.onnx").string()});
  CHECK(missing.exitCode != 0);
  CHECK(missing.err.find("the context is weightless") != std::string::npos);
  CHECK(missing.err.find("tiny_prefill.onnx") != std::string::npos);
  CHECK(missing.err.find("--source-model") != std::string::npos);

  expectMatches(out / "tiny_prefill_ctx.onnx", "tiny_prefill", {"--source-model", (src / "tiny_prefill.onnx").string()});

  // Another model given as the source: its initializers have other names.
  auto other = runTool(CTXKIT_CTXRUN,
                       {(out / "tiny_prefill_ctx.onnx").string(), "--source-model", (kSamples / "tiny_cnn.onnx").string()});
  CHECK(other.exitCode != 0);
  CHECK(other.err.find("has no initializer of that name") != std::string::npos);
}

TEST_CASE("weightless: a changed source model fails the weight hash under --verify", "[e2e][weightless]") {
  TempDir dir("weightless_changed");
  const fs::path out = dir / "out";
  copySamples(out, {"tiny_cnn"});
  compile({(out / "tiny_cnn.onnx").string(), "--weightless", "--target", "cpu", "-o", out.string(), "-q"});
  expectMatches(out / "tiny_cnn_ctx.onnx", "tiny_cnn");

  // Same names, types and sizes, one value different: only the hash can tell.
  auto model = onnx_io::loadModel(out / "tiny_cnn.onnx");
  REQUIRE(model);
  ir::Initializer* biggest = nullptr;
  for (auto& init : model->graph.initializers)
    if (init.tensor.type() == ir::ElemType::Float && (!biggest || init.tensor.byteSize() > biggest->tensor.byteSize()))
      biggest = &init;
  REQUIRE(biggest);
  auto changed = ir::Tensor::copyOf(biggest->tensor.type(), biggest->tensor.shape(), biggest->tensor.bytes());
  REQUIRE(changed);
  changed->mutableDataAs<float>()[0] += 1.0f;
  biggest->tensor = std::move(changed).value();
  REQUIRE(onnx_io::saveModel(*model, out / "tiny_cnn.onnx"));

  auto r = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--verify"});
  CHECK(r.exitCode != 0);
  CHECK(r.err.find("fails its hash") != std::string::npos);
  CHECK(r.err.find(biggest->name) != std::string::npos);
}

TEST_CASE("weightless: derived weights are stored and packed layouts are made at load", "[e2e][weightless]") {
  // The QDQ CNN's integer weights are derived by the compiler (not in the source model): they stay in the .bin.
  TempDir dir("weightless_derived");
  for (const char* target : {"cpu", "npu-sim"}) {
    const fs::path out = dir / target;
    copySamples(out, {"tiny_qdq_cnn", "tiny_prefill"});
    for (const char* stem : {"tiny_qdq_cnn", "tiny_prefill"}) {
      auto r = compile({(out / (std::string(stem) + ".onnx")).string(), "--weightless", "--target", target, "-o",
                        out.string(), "--json", "-"});
      auto report = nlohmann::json::parse(r.out);
      INFO(stem << " on " << target);
      CHECK(report["weights"]["source_bytes"].get<uint64_t>() > 0);
      expectMatches(out / (std::string(stem) + "_ctx.onnx"), stem);
    }
  }
}

TEST_CASE("weightless: weights in Constant nodes (as paddle2onnx writes them) stay in the source model too",
          "[e2e][weightless]") {
  TempDir dir("weightless_constants");
  const fs::path out = dir / "out";
  fs::create_directories(out);
  // tiny_cnn with every initializer turned into a Constant node of the same name: ONNX Runtime sees the same model.
  auto model = onnx_io::loadModel(kSamples / "tiny_cnn.onnx");
  REQUIRE(model);
  std::vector<ir::Node> constants;
  for (auto& init : model->graph.initializers) {
    ir::Node n;
    n.name = "const_" + init.name;
    n.opType = "Constant";
    n.kind = ir::OpKind::Constant;
    n.outputs = {init.name};
    n.attrs.set(ir::Attribute::makeTensor("value", init.tensor));
    constants.push_back(std::move(n));
  }
  const size_t count = constants.size();
  REQUIRE(count > 0);
  model->graph.initializers.clear();
  model->graph.nodes.insert(model->graph.nodes.begin(), constants.begin(), constants.end());
  REQUIRE(onnx_io::saveModel(*model, out / "tiny_cnn.onnx"));

  auto r = compile({(out / "tiny_cnn.onnx").string(), "--weightless", "-o", out.string(), "--json", "-"});
  auto report = nlohmann::json::parse(r.out);
  CHECK(report["weights"]["source_count"].get<size_t>() > 0);
  expectMatches(out / "tiny_cnn_ctx.onnx", "tiny_cnn");
}
