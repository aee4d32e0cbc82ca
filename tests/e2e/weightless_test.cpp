// Weightless contexts through the real tools (docs/weight-sharing.md#weightless): `ctxgen --weightless` writes a
// context binary that records where each weight lives in the source models instead of its bytes; ctxrun reads them from
// the source model beside the _ctx.onnx or from --source-model and matches the samples' independent expected outputs; a
// missing, different or changed source model is a clear error. tests/ort_ep covers ONNX Runtime + the plugin EP on the
// same files.
#include "format/container.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "samples/graph_builder.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
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

// A run refused by a pin: it names the source model and `also`, and says the file is not the one compiled from.
void expectPinRefusal(const testing::ToolResult& r, const std::string& model, const std::string& also) {
  INFO(r.err);
  CHECK(r.exitCode != 0);
  CHECK(r.err.find("source model '" + model + "'") != std::string::npos);
  CHECK(r.err.find(also) != std::string::npos);
  CHECK(r.err.find("is not the one the context was compiled from") != std::string::npos);
}

// The sample `stem` written into `dir` with its initializers of at least `threshold` bytes in `<stem>.data`.
fs::path withExternalData(const fs::path& dir, const std::string& stem, size_t threshold = 0) {
  fs::create_directories(dir);
  auto model = onnx_io::loadModel(kSamples / (stem + ".onnx"));
  REQUIRE(model);
  const fs::path path = dir / (stem + ".onnx");
  REQUIRE(onnx_io::saveModelWithExternalData(std::move(model).value(), path, stem + ".data", threshold));
  return path;
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
  // The source model keeps its weights as ONNX external data: the runtime maps that file.
  withExternalData(src, "tiny_prefill");
  compile({(src / "tiny_prefill.onnx").string(), "--weightless", "-o", out.string(), "-q"});
  CHECK(fs::file_size(out / "tiny_prefill_ctxkit.bin") < fs::file_size(src / "tiny_prefill.data"));

  // Nothing beside the compiled model: the run says where it looked and how to point at the weights.
  auto missing = runTool(CTXKIT_CTXRUN, {(out / "tiny_prefill_ctx.onnx").string()});
  CHECK(missing.exitCode != 0);
  CHECK(missing.err.find("the context is weightless") != std::string::npos);
  CHECK(missing.err.find("tiny_prefill.onnx") != std::string::npos);
  CHECK(missing.err.find("--source-model") != std::string::npos);

  expectMatches(out / "tiny_prefill_ctx.onnx", "tiny_prefill", {"--source-model", (src / "tiny_prefill.onnx").string()});

  // Another model given as the source: refused by its pin, naming the file given.
  auto other = runTool(CTXKIT_CTXRUN,
                       {(out / "tiny_prefill_ctx.onnx").string(), "--source-model", (kSamples / "tiny_cnn.onnx").string()});
  expectPinRefusal(other, "tiny_prefill.onnx", "tiny_cnn.onnx");
}

TEST_CASE("ctxinspect lists a weightless context's source model and its external data, and checks their pinned sizes",
          "[e2e][weightless]") {
  TempDir dir("weightless_inspect_data");
  const fs::path out = dir / "out";
  withExternalData(out, "tiny_prefill");
  compile({(out / "tiny_prefill.onnx").string(), "--weightless", "-o", out.string(), "-q"});
  const fs::path model = out / "tiny_prefill_ctx.onnx";

  auto listed = runTool(CTXKIT_CTXINSPECT, {model.string(), "--json"});
  INFO(listed.out << listed.err);
  CHECK(listed.exitCode == 0);
  auto report = nlohmann::json::parse(listed.out);
  std::map<std::string, std::string> roles;
  for (const auto& f : report["deployment_files"]) roles[fs::path(f["path"].get<std::string>()).filename().string()] = f["role"];
  CHECK(roles["tiny_prefill.onnx"] == "source model (weights of a weightless context)");
  CHECK(roles["tiny_prefill.data"] == "external data of a source model (weights of a weightless context)");

  // The data file grown by a byte: not the file the context was compiled from, said before anything loads.
  {
    std::ofstream grow(out / "tiny_prefill.data", std::ios::binary | std::ios::app);
    grow.put('\0');
  }
  auto grown = runTool(CTXKIT_CTXINSPECT, {model.string()});
  INFO(grown.out << grown.err);
  CHECK(grown.exitCode == 1);
  CHECK(grown.out.find("external data '") != std::string::npos);
  CHECK(grown.out.find("tiny_prefill.data' is " + std::to_string(fs::file_size(out / "tiny_prefill.data")) +
                       " bytes; the context binary was compiled from one of " +
                       std::to_string(fs::file_size(out / "tiny_prefill.data") - 1) + " bytes") != std::string::npos);
}

TEST_CASE("weightless: a changed source model is refused by name, by its pin", "[e2e][weightless]") {
  TempDir dir("weightless_changed");
  const fs::path out = dir / "out";
  copySamples(out, {"tiny_cnn"});
  compile({(out / "tiny_cnn.onnx").string(), "--weightless", "--target", "cpu", "-o", out.string(), "-q"});
  expectMatches(out / "tiny_cnn_ctx.onnx", "tiny_cnn");
  auto view = format::ContainerView::openFile(out / "tiny_cnn_ctxkit.bin");
  REQUIRE(view);
  REQUIRE(view->sourcePins().size() == 1);  // the model; it has no external data
  CHECK(view->sourcePins()[0].model == "tiny_cnn.onnx");
  CHECK(view->sourcePins()[0].file.empty());
  CHECK(view->sourcePins()[0].size == fs::file_size(out / "tiny_cnn.onnx"));

  // Same names, types and sizes, one value different: without --verify, the pin tells.
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

  for (bool verify : {false, true}) {
    std::vector<std::string> args = {(out / "tiny_cnn_ctx.onnx").string()};
    if (verify) args.push_back("--verify");
    expectPinRefusal(runTool(CTXKIT_CTXRUN, args), "tiny_cnn.onnx", "XXH3-128");
  }
}

TEST_CASE("weightless: changed external data is refused naming the data file", "[e2e][weightless]") {
  TempDir dir("weightless_changed_data");
  const fs::path src = dir / "src", out = dir / "out";
  withExternalData(src, "tiny_prefill");
  compile({(src / "tiny_prefill.onnx").string(), "--weightless", "-o", out.string(), "-q"});
  auto view = format::ContainerView::openFile(out / "tiny_prefill_ctxkit.bin");
  REQUIRE(view);
  REQUIRE(view->sourcePins().size() == 2);  // sorted: the model ("") first, then its data file
  CHECK(view->sourcePins()[1].file == "tiny_prefill.data");
  CHECK(view->sourcePins()[1].size == fs::file_size(src / "tiny_prefill.data"));
  const std::vector<std::string> run = {(out / "tiny_prefill_ctx.onnx").string(), "--source-model",
                                        (src / "tiny_prefill.onnx").string()};
  REQUIRE(runTool(CTXKIT_CTXRUN, run).exitCode == 0);

  // One byte of the data file flipped: same size, another hash.
  const fs::path data = src / "tiny_prefill.data";
  {
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(8);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(8);
    f.write(&c, 1);
  }
  auto flipped = runTool(CTXKIT_CTXRUN, run);
  CHECK(flipped.exitCode != 0);
  CHECK(flipped.err.find("external data file 'tiny_prefill.data' of source model 'tiny_prefill.onnx'") !=
        std::string::npos);
  CHECK(flipped.err.find("its XXH3-128 is") != std::string::npos);

  // Bytes appended: the size differs.
  {
    std::ofstream f(data, std::ios::app | std::ios::binary);
    f << "more";
  }
  auto grown = runTool(CTXKIT_CTXRUN, run);
  CHECK(grown.exitCode != 0);
  CHECK(grown.err.find(fmt::format("it is {} bytes; the context pins {}", fs::file_size(data), fs::file_size(data) - 4)) !=
        std::string::npos);
}

TEST_CASE("weightless --weightless-scope external-only leaves only external data in the source model",
          "[e2e][weightless]") {
  // ONNX Runtime's OrtWeightlessSupport_EXTERNAL_ONLY: initializers inside the .onnx file are copied into the context.
  TempDir dir("weightless_scope");
  const fs::path src = dir / "src";
  auto model = onnx_io::loadModel(kSamples / "tiny_prefill.onnx");
  REQUIRE(model);
  // The large initializers go to the data file, the small ones stay inside the model.
  std::vector<uint64_t> sizes;
  for (const auto& init : model->graph.initializers) sizes.push_back(init.tensor.byteSize());
  std::sort(sizes.begin(), sizes.end());
  REQUIRE(sizes.size() >= 2);
  const uint64_t threshold = sizes[sizes.size() / 2] + 1;
  REQUIRE(sizes.back() >= threshold);
  withExternalData(src, "tiny_prefill", threshold);
  auto compiled = [&](const std::string& scope) {
    const fs::path out = dir / scope;
    auto r = compile({(src / "tiny_prefill.onnx").string(), "--weightless", "--weightless-scope", scope, "-o",
                      out.string(), "--json", "-"});
    expectMatches(out / "tiny_prefill_ctx.onnx", "tiny_prefill", {"--source-model", (src / "tiny_prefill.onnx").string()});
    return std::pair{nlohmann::json::parse(r.out)["weights"], fs::file_size(out / "tiny_prefill_ctxkit.bin")};
  };
  auto [all, allBytes] = compiled("all");
  auto [external, externalBytes] = compiled("external-only");
  // Every weight left in the source is one at least the threshold (only those are external data).
  CHECK(external["source_count"].get<size_t>() > 0);
  CHECK(external["source_count"].get<size_t>() < all["source_count"].get<size_t>());
  CHECK(external["source_bytes"].get<uint64_t>() >= threshold * external["source_count"].get<uint64_t>());
  CHECK(externalBytes > allBytes);  // the internal initializers are in the .bin now

  // The scope is a weightless compile's.
  auto r = runTool(CTXKIT_CTXGEN, {(src / "tiny_prefill.onnx").string(), "--weightless-scope", "external-only", "-o",
                                   (dir / "plain").string()});
  CHECK(r.exitCode == 2);
  CHECK(r.err.find("--weightless-scope needs --weightless") != std::string::npos);
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

TEST_CASE("weightless: a BatchNorm folded into a Conv is recomputed at load, bit for bit the ordinary compile's",
          "[e2e][weightless]") {
  // tiny_cnn: Conv -> BatchNorm twice. Stage 2's weight (16x8x3x3, 4.5 KiB) is folded at load from the source
  // weight; stage 1's (864 bytes, under the 4 KiB floor) is folded now and stored, as in an ordinary compile.
  TempDir dir("weightless_folded");
  for (const char* target : {"cpu", "npu-sim"}) {
    const fs::path src = dir / target, full = dir / (std::string(target) + "_full");
    copySamples(src, {"tiny_cnn"});
    const std::string model = (src / "tiny_cnn.onnx").string();
    compile({model, "--target", target, "-o", full.string(), "-q"});
    compile({model, "--weightless", "--target", target, "-o", src.string(), "-q"});
    auto view = format::ContainerView::openFile(src / "tiny_cnn_ctxkit.bin");
    REQUIRE(view);
    std::set<std::string> inSource;
    for (const auto& w : view->weights())
      for (const auto& s : w.sources) inSource.insert(s.initializer);
    INFO(target);
    CHECK(inSource.count("cnn.stage2.conv.weight") == 1);  // read at load, rescaled there
    CHECK(inSource.count("cnn.stage1.conv.weight") == 0);  // folded at compile time, stored
    // The two runs compute the same bytes: the rescaled weight is the one the ordinary compile stored.
    for (const auto& [ctx, results] : {std::pair{full / "tiny_cnn_ctx.onnx", dir / (std::string(target) + "_r_full")},
                                       std::pair{src / "tiny_cnn_ctx.onnx", dir / (std::string(target) + "_r_wl")}}) {
      auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", sampleData("tiny_cnn"), "--expected",
                                       sampleData("tiny_cnn"), "--output-dir", results.string()});
      INFO(r.out << r.err);
      CHECK(r.exitCode == 0);
    }
    auto bytesOf = [](const fs::path& p) {
      std::ifstream in(p, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const auto a = bytesOf(dir / (std::string(target) + "_r_full") / "output_0.npy");
    CHECK(!a.empty());
    CHECK(a == bytesOf(dir / (std::string(target) + "_r_wl") / "output_0.npy"));
  }
}

namespace {

// Deterministic values in [lo, hi).
std::vector<float> valuesIn(size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

// A model whose weights a weightless compile derives at load, with its output computed here in double precision:
// x [1,8,3,3] -> Conv 3x3 at dilation 4, pads 4 (on a 3x3 map only the centre tap lands inside: prune-conv-taps cuts
// it to 1x1, a slice of the source weight) -> BatchNormalization (folded into the sliced weight) -> Relu -> Conv 1x1
// whose weight is Unsqueeze(Concat(Slice(g, 0:32), Slice(g, 64:96), Slice(g, 32:64))), an LSTM-style gate reorder the
// analysis folds -> y [1,96,3,3].
struct DerivedModel {
  ir::Model model;
  std::vector<float> x, y;
};

DerivedModel derivedModel() {
  constexpr int64_t C = 8, M = 16, K = 96, P = 9;  // channels in, after the dilated Conv, out; positions
  samples::GraphBuilder b("derived", "");
  const std::vector<float> x = valuesIn(C * P, 1, -1, 1), wd = valuesIn(M * C * 9, 2, -1, 1),
                           gamma = valuesIn(M, 3, 0.5f, 1.5f), beta = valuesIn(M, 4, -0.5f, 0.5f),
                           mean = valuesIn(M, 5, -0.2f, 0.2f), var = valuesIn(M, 6, 0.5f, 1.5f),
                           g = valuesIn(K * M, 7, -1, 1);
  b.addInput("x", {1, C, 3, 3});
  b.addOutput("y", {1, K, 3, 3});
  b.addFloats("wd", {M, C, 3, 3}, wd);
  b.addFloats("gamma", {M}, gamma);
  b.addFloats("beta", {M}, beta);
  b.addFloats("mean", {M}, mean);
  b.addFloats("var", {M}, var);
  b.addFloats("g", {K, M}, g);
  b.addNode("conv_d", "Conv", {"x", "wd"},
            {ir::Attribute::makeInts("dilations", {4, 4}), ir::Attribute::makeInts("pads", {4, 4, 4, 4}),
             ir::Attribute::makeInts("kernel_shape", {3, 3})});
  b.addNode("bn", "BatchNormalization", {"conv_d", "gamma", "beta", "mean", "var"});
  b.addNode("relu", "Relu", {"bn"});
  const std::vector<std::pair<int64_t, int64_t>> parts = {{0, 32}, {64, 96}, {32, 64}};
  std::vector<std::string> sliced;
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string s = std::to_string(k);
    sliced.push_back(b.addNode("slice" + s, "Slice",
                               {"g", b.addInt64s("start" + s, {1}, {parts[k].first}),
                                b.addInt64s("end" + s, {1}, {parts[k].second}), b.addInt64s("axis" + s, {1}, {0})}));
  }
  b.addNode("reordered", "Concat", sliced, {ir::Attribute::makeInt("axis", 0)});
  b.addNode("wr", "Unsqueeze", {"reordered", b.addInt64s("unsqueeze_axes", {2}, {2, 3})});
  b.addNode("conv_r", "Conv", {"relu", "wr"}, {}, "y");
  DerivedModel m{std::move(b).finish("weightless derived weights"), x, std::vector<float>(K * P)};
  std::vector<double> y1(M * P);
  for (int64_t c = 0; c < M; ++c)
    for (int64_t p = 0; p < P; ++p) {
      double sum = 0;  // the whole dilated window, taps in the padding reading zero
      for (int64_t ci = 0; ci < C; ++ci)
        for (int64_t ty = 0; ty < 3; ++ty)
          for (int64_t tx = 0; tx < 3; ++tx) {
            const int64_t iy = p / 3 + 4 * ty - 4, ix = p % 3 + 4 * tx - 4;
            if (iy >= 0 && iy < 3 && ix >= 0 && ix < 3)
              sum += double{wd[((c * C + ci) * 3 + ty) * 3 + tx]} * x[ci * P + iy * 3 + ix];
          }
      const double bn = (sum - mean[c]) / std::sqrt(double{var[c]} + 1e-5) * gamma[c] + beta[c];
      y1[c * P + p] = std::max(0.0, bn);
    }
  for (int64_t k = 0; k < K; ++k) {
    const int64_t row = k < 32 ? k : k < 64 ? k + 32 : k - 32;  // the reordered row's row of g
    for (int64_t p = 0; p < P; ++p) {
      double sum = 0;
      for (int64_t c = 0; c < M; ++c) sum += double{g[row * M + c]} * y1[c * P + p];
      m.y[k * P + p] = static_cast<float>(sum);
    }
  }
  return m;
}

std::string fileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("weightless: sliced taps and rearranged weights are computed at load, bit for bit the ordinary compile's",
          "[e2e][weightless]") {
  TempDir dir("weightless_recipes");
  DerivedModel m = derivedModel();
  const fs::path data = dir / "data";
  fs::create_directories(data);
  REQUIRE(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {1, 8, 3, 3}, m.x), data / "input_0.npy"));
  const fs::path expected = dir / "expected";
  fs::create_directories(expected);
  REQUIRE(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {1, 96, 3, 3}, m.y), expected / "output_0.npy"));
  for (const char* target : {"cpu", "npu-sim"}) {
    INFO(target);
    const fs::path src = dir / target, full = dir / (std::string(target) + "_full");
    fs::create_directories(src);
    REQUIRE(onnx_io::saveModel(m.model, src / "derived.onnx"));
    const std::string model = (src / "derived.onnx").string();
    compile({model, "--target", target, "-o", full.string(), "-q"});
    compile({model, "--weightless", "--target", target, "-o", src.string(), "-q"});
    auto view = format::ContainerView::openFile(src / "derived_ctxkit.bin");
    REQUIRE(view);
    std::set<std::string> inSource;
    uint64_t stored = 0;
    for (const auto& w : view->weights()) {
      for (const auto& s : w.sources) inSource.insert(s.initializer);
      if (!w.inSource()) stored += w.size;
    }
    // The dilated Conv's weight and g stay in the source model; what is stored is the slice bounds, the folded
    // BatchNorm's scale and bias, and what is smaller than 4 KiB.
    CHECK(inSource.count("wd") == 1);
    CHECK(inSource.count("g") == 1);
    CHECK(stored < 1024);
    const fs::path rFull = dir / (std::string(target) + "_r_full"), rWeightless = dir / (std::string(target) + "_r_wl");
    for (const auto& [ctx, results] : {std::pair{full / "derived_ctx.onnx", rFull},
                                       std::pair{src / "derived_ctx.onnx", rWeightless}}) {
      auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", expected.string(),
                                       "--output-dir", results.string()});
      INFO(r.out << r.err);
      CHECK(r.exitCode == 0);
    }
    const std::string a = fileBytes(rFull / "output_0.npy");
    CHECK(!a.empty());
    CHECK(a == fileBytes(rWeightless / "output_0.npy"));
  }
}

TEST_CASE("weightless: a load-time slice with crafted bounds is refused, naming the op", "[e2e][weightless][hostile]") {
  TempDir tmp("weightless_slice_bounds");
  const fs::path dir = tmp / "out";
  fs::create_directories(dir);
  DerivedModel m = derivedModel();
  REQUIRE(onnx_io::saveModel(m.model, dir / "derived.onnx"));
  compile({(dir / "derived.onnx").string(), "--weightless", "--target", "cpu", "-o", dir.string(), "-q"});
  const fs::path bin = dir / "derived_ctxkit.bin";
  const std::string original = fileBytes(bin);
  // The stored starts of the pruned Conv's slice: int64 [1, 1] (the centre tap on both spatial axes).
  std::optional<uint64_t> startsAt;
  {
    auto view = format::ContainerView::openFile(bin);
    REQUIRE(view);
    for (const auto& w : view->weights()) {
      if (w.inSource() || w.type != ir::ElemType::Int64 || w.size != 16) continue;
      int64_t v[2];
      std::memcpy(v, original.data() + w.offset, sizeof v);
      if (v[0] == 1 && v[1] == 1) startsAt = w.offset;
    }
  }
  REQUIRE(startsAt);
  for (int64_t start : {int64_t{0}, int64_t{2}, std::numeric_limits<int64_t>::max(),
                        std::numeric_limits<int64_t>::min(), int64_t{-1}}) {
    INFO(start);
    std::string crafted = original;
    std::memcpy(crafted.data() + *startsAt, &start, sizeof start);
    {
      std::ofstream out(bin, std::ios::binary | std::ios::trunc);
      out.write(crafted.data(), static_cast<std::streamsize>(crafted.size()));
    }
    auto r = runTool(CTXKIT_CTXRUN, {(dir / "derived_ctx.onnx").string()});
    INFO(r.err);
    CHECK(r.exitCode != 0);
    CHECK(r.err.find("derived_ctxkit.bin") != std::string::npos);
    CHECK(r.err.find(".slice") != std::string::npos);
    CHECK(r.err.find("is recorded as float32 16x8x1x1 but computes") != std::string::npos);
  }
}

TEST_CASE("weightless: a QDQ Gemm's transposed 8-bit weight is transposed at load", "[e2e][weightless]") {
  // x [2,64] -> Q/DQ (uint8) -> Gemm transB=1 with B = DQ(int8 [96,64], 6 KiB) -> Q/DQ -> y [2,96]. fuse-qdq makes a
  // QLinearMatMul reading B transposed; the weightless compile transposes the source weight at load. The expected
  // output is computed here (integer accumulation, requantized in double): within one output quantum.
  constexpr int64_t K = 64, N = 96;
  constexpr float sx = 0.02f, sw = 0.01f, sy = 0.01f;
  samples::GraphBuilder b("qdq_gemm", "");
  const std::vector<float> x = valuesIn(2 * K, 11, -1, 1);
  std::vector<int8_t> w(N * K);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 37 + 11) % 17) - 8);
  b.addInput("x", {2, K});
  b.addOutput("y", {2, N});
  b.addInitializer("w", ir::Tensor::fromVector(ir::ElemType::Int8, {N, K}, w));
  b.addInitializer("zx", ir::Tensor::fromVector(ir::ElemType::Uint8, {}, std::vector<uint8_t>{128}));
  b.addInitializer("zw", ir::Tensor::fromVector(ir::ElemType::Int8, {}, std::vector<int8_t>{0}));
  b.addFloats("sx", {}, {sx});
  b.addFloats("sw", {}, {sw});
  b.addFloats("sy", {}, {sy});
  b.addNode("xq", "QuantizeLinear", {"x", "sx", "zx"});
  b.addNode("xd", "DequantizeLinear", {"xq", "sx", "zx"});
  b.addNode("wd", "DequantizeLinear", {"w", "sw", "zw"});
  b.addNode("gemm", "Gemm", {"xd", "wd"}, {ir::Attribute::makeInt("transB", 1)});
  b.addNode("yq", "QuantizeLinear", {"gemm", "sy", "zx"});
  b.addNode("yd", "DequantizeLinear", {"yq", "sy", "zx"}, {}, "y");
  ir::Model model = std::move(b).finish("weightless QDQ Gemm");
  std::vector<float> y(2 * N);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double q = std::clamp(std::nearbyint(double{x[r * K + k]} / sx) + 128, 0.0, 255.0) - 128;
        acc += static_cast<int64_t>(q) * w[n * K + k];
      }
      const double q = std::clamp(std::nearbyint(static_cast<double>(acc) * sx * sw / sy) + 128, 0.0, 255.0);
      y[r * N + n] = static_cast<float>((q - 128) * sy);
    }
  TempDir dir("weightless_qdq_gemm");
  const fs::path data = dir / "data", expected = dir / "expected";
  fs::create_directories(data);
  fs::create_directories(expected);
  REQUIRE(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {2, K}, x), data / "input_0.npy"));
  REQUIRE(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {2, N}, y), expected / "output_0.npy"));
  for (const char* target : {"cpu", "npu-sim"}) {
    INFO(target);
    const fs::path src = dir / target, full = dir / (std::string(target) + "_full");
    fs::create_directories(src);
    REQUIRE(onnx_io::saveModel(model, src / "qdq_gemm.onnx"));
    const std::string path = (src / "qdq_gemm.onnx").string();
    compile({path, "--target", target, "-o", full.string(), "-q"});
    compile({path, "--weightless", "--target", target, "-o", src.string(), "-q"});
    auto view = format::ContainerView::openFile(src / "qdq_gemm_ctxkit.bin");
    REQUIRE(view);
    uint64_t stored = 0;
    bool wInSource = false;
    for (const auto& wi : view->weights()) {
      for (const auto& s : wi.sources) wInSource = wInSource || s.initializer == "w";
      if (!wi.inSource()) stored += wi.size;
    }
    CHECK(wInSource);
    CHECK(stored < 1024);  // (the 6 KiB transposed weight is not stored)
    const fs::path rFull = dir / (std::string(target) + "_r_full"), rWeightless = dir / (std::string(target) + "_r_wl");
    for (const auto& [ctx, results] : {std::pair{full / "qdq_gemm_ctx.onnx", rFull},
                                       std::pair{src / "qdq_gemm_ctx.onnx", rWeightless}}) {
      auto r = runTool(CTXKIT_CTXRUN, {ctx.string(), "--inputs", data.string(), "--expected", expected.string(),
                                       "--atol", "0.0101", "--output-dir", results.string()});
      INFO(r.out << r.err);
      CHECK(r.exitCode == 0);
    }
    const std::string a = fileBytes(rFull / "output_0.npy");
    CHECK(!a.empty());
    CHECK(a == fileBytes(rWeightless / "output_0.npy"));
  }
}
