// End-to-end: ctxgen, ctxinspect and ctxrun on the bundled samples, through the real command lines.
#include "format/container.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <span>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::runToolOk;
using ctxkit::testing::TempDir;
using ctxkit::testing::kSamples;
using ctxkit::testing::sample;
using ctxkit::testing::sampleData;
namespace fs = std::filesystem;

namespace {

std::set<std::string> filesIn(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("ctxgen --share writes exactly N _ctx.onnx files and one .bin", "[e2e]") {
  TempDir out("share");
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", out.path().string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  CHECK(filesIn(out.path()) == std::set<std::string>{"tiny_prefill_ctx.onnx", "tiny_decode_ctx.onnx", "tiny_prefill_ctxkit.bin"});
  CHECK(r.out.find("sharing ratio") != std::string::npos);

  // Both models point at the one shared binary.
  for (const char* m : {"tiny_prefill_ctx.onnx", "tiny_decode_ctx.onnx"}) {
    auto model = onnx_io::loadModel(out / m);
    REQUIRE(model);
    int mains = 0;
    for (const auto& n : model->graph.nodes)
      if (n.opType == "EPContext" && n.attrs.getInt("main_context", 0) == 1) {
        ++mains;
        CHECK(n.attrs.getString("ep_cache_context") == "tiny_prefill_ctxkit.bin");
        CHECK(n.attrs.getString("source") == "CtxKitExecutionProvider");
        CHECK(n.attrs.getInt("embed_mode", -1) == 0);
      }
    CHECK(mains == 1);
    CHECK(onnx_io::checkModelFile(out / m));
  }
}

TEST_CASE("the shared .bin stores the pair's weights once", "[e2e]") {
  TempDir out("dedupe");
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill"), sample("tiny_decode"), "--share", "-o", out.path().string(), "--json", "-"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  auto report = nlohmann::json::parse(r.out);

  // Independent expectation: the distinct float32 initializer contents of each source model (the sample's weights
  // have widths that panels of 32 hold without padding). One-value constants may be folded into an op instead (a
  // scale after MatMul joins its epilogue), so they bound the stored bytes from above only.
  auto distinctFloatBytes = [](const std::string& path, bool oneValueToo) {
    auto m = onnx_io::loadModel(path);
    REQUIRE(m);
    std::set<std::string> contents;
    for (const auto& i : m->graph.initializers)
      if (i.tensor.type() == ir::ElemType::Float && (oneValueToo || i.tensor.elementCount() > 1))
        contents.insert(std::string(reinterpret_cast<const char*>(i.tensor.data()), i.tensor.byteSize()) + "|" +
                        ir::shapeToString(i.tensor.shape()));
    return contents;
  };
  auto bytesOf = [](const std::set<std::string>& contents) {
    uint64_t n = 0;
    for (const auto& c : contents) n += c.size() - c.substr(c.rfind('|')).size();
    return n;
  };
  auto prefill = distinctFloatBytes(sample("tiny_prefill"), true);
  REQUIRE(prefill == distinctFloatBytes(sample("tiny_decode"), true));  // the pair shares every weight by content
  const uint64_t allBytes = bytesOf(prefill), tensorBytes = bytesOf(distinctFloatBytes(sample("tiny_prefill"), false));

  auto view = format::ContainerView::openFile(out / "tiny_prefill_ctxkit.bin");
  REQUIRE(view);
  uint64_t stored = 0;
  for (const auto& w : view->weights()) stored += w.size;
  CHECK(stored >= tensorBytes);
  CHECK(stored <= allBytes);
  CHECK(report["weights"]["unique_bytes"].get<uint64_t>() == stored);
  CHECK(report["weights"]["referenced_bytes"].get<uint64_t>() == 2 * stored);  // both graphs use every weight
  // Weights are interned in one stage of their own, between lowering and emit.
  std::vector<std::string> stages;
  for (const auto& [stage, ms] : report["stage_ms"].items()) stages.push_back(stage);
  CHECK(stages == std::vector<std::string>{"analyze", "dedupe", "emit", "load", "lower", "partition"});
  CHECK(view->graphs().size() == 2);
  CHECK(view->verify());
}

TEST_CASE("ctxrun matches the independent expected outputs on both targets", "[e2e]") {
  for (const char* target : {"npu-sim", "cpu"}) {
    TempDir out(std::string("run_") + target);
    auto gen = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "--target", target, "-o",
                                       out.path().string()});
    INFO(target << ": " << gen.out << gen.err);
    REQUIRE(gen.exitCode == 0);
    auto cnn = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", target, "-o", out.path().string()});
    INFO(cnn.out << cnn.err);
    REQUIRE(cnn.exitCode == 0);
    for (const char* stem : {"tiny_prefill", "tiny_decode", "tiny_cnn"}) {
      auto run = runTool(CTXKIT_CTXRUN, {(out / (std::string(stem) + "_ctx.onnx")).string(), "--inputs", sampleData(stem),
                                         "--expected", sampleData(stem), "--json"});
      INFO(stem << ": " << run.out << run.err);
      CHECK(run.exitCode == 0);
      auto j = nlohmann::json::parse(run.out);
      CHECK(j["ok"].get<bool>());
      CHECK(j["compiled_nodes"].get<int>() >= 1);
    }
  }
}

TEST_CASE("ctxrun --profile times every compiled op and every fallback node", "[e2e]") {
  TempDir out("profile");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()}).exitCode == 0);
  // The compiled model: its program's ops, by kind; the plain model: every node on the fallback path.
  for (const std::string& model : {(out / "tiny_cnn_ctx.onnx").string(), sample("tiny_cnn")}) {
    const bool compiled = model != sample("tiny_cnn");
    auto run = runToolOk(CTXKIT_CTXRUN, {model, "--inputs", sampleData("tiny_cnn"), "--expected", sampleData("tiny_cnn"),
                                         "--profile", "--iters", "5", "--json"});
    auto j = nlohmann::json::parse(run.out);
    INFO(model << ": " << run.out);
    REQUIRE(j.contains("profile"));
    const auto& p = j["profile"];
    CHECK(p["runs"].get<int>() == 4);  // the runs after the first
    REQUIRE(p["ops"].size() >= 3);
    double sum = 0, kindSum = 0;
    std::set<std::string> kinds;
    for (const auto& op : p["ops"]) {
      CHECK((op["graph"].get<std::string>() == "fallback") == !compiled);
      CHECK(op["ms"].get<double>() >= 0);
      CHECK(op["shape"].get<std::string>().starts_with("["));
      kinds.insert(op["kind"].get<std::string>());
      sum += op["ms"].get<double>();
    }
    for (const auto& k : p["by_kind"]) kindSum += k["ms"].get<double>();
    CHECK(kinds.count("Conv") == 1);
    CHECK(p["by_kind"].size() == kinds.size());
    CHECK(std::abs(sum - p["ms_per_run"].get<double>()) < 1e-6 * std::max(1.0, sum));
    CHECK(std::abs(kindSum - sum) < 1e-6 * std::max(1.0, sum));
    if (!compiled) CHECK(p["ops"].size() == j["fallback_nodes"].get<size_t>());
    // Slowest first.
    for (size_t i = 1; i < p["ops"].size(); ++i) CHECK(p["ops"][i - 1]["ms"].get<double>() >= p["ops"][i]["ms"].get<double>());
  }
  // Without --json, a table; without --iters, ten runs.
  auto text = runToolOk(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--profile", "--profile-top", "2"});
  CHECK(text.out.find("over 9 runs") != std::string::npos);
  CHECK(text.out.find("by kind:") != std::string::npos);
  CHECK(text.out.find("slowest ops:") != std::string::npos);
}

TEST_CASE("ctxrun rejects outputs that differ from the expected ones", "[e2e]") {
  // The CNN's expected logits against the prefill model's output: a real mismatch must fail.
  TempDir out("mismatch");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_decode"), "-o", out.path().string()}).exitCode == 0);
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_decode_ctx.onnx").string(), "--inputs", sampleData("tiny_decode"), "--expected",
                                     sampleData("tiny_prefill")});
  CHECK(run.exitCode == 1);
}

TEST_CASE("ctxinspect lists nodes, deployment files and sharing", "[e2e]") {
  TempDir out("inspect");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", out.path().string()}).exitCode == 0);
  auto r = runTool(CTXKIT_CTXINSPECT, {(out / "tiny_prefill_ctx.onnx").string(), (out / "tiny_decode_ctx.onnx").string(), "--json", "--verify"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["ep_context_nodes"].size() >= 2);
  for (const auto& n : j["ep_context_nodes"]) {
    CHECK(n["source"] == "CtxKitExecutionProvider");
    CHECK(n["hardware_architecture"] == "npu-sim");
    CHECK(!n["partition_name"].get<std::string>().empty());
    CHECK(!n["inputs"].empty());
  }
  std::set<std::string> files;
  for (const auto& f : j["deployment_files"]) {
    CHECK(f["exists"].get<bool>());
    files.insert(fs::path(f["path"].get<std::string>()).filename().string());
  }
  CHECK(files == std::set<std::string>{"tiny_prefill_ctx.onnx", "tiny_decode_ctx.onnx", "tiny_prefill_ctxkit.bin"});
  REQUIRE(j["context_binaries"].size() == 1);
  CHECK(j["context_binaries"][0]["verified"].get<bool>());
  CHECK(!j["context_binaries"][0]["shared_weights"].empty());

  // A missing .bin is a problem: exit 1 and named.
  fs::remove(out / "tiny_prefill_ctxkit.bin");
  auto missing = runTool(CTXKIT_CTXINSPECT, {(out / "tiny_decode_ctx.onnx").string()});
  CHECK(missing.exitCode == 1);
  CHECK(missing.out.find("missing") != std::string::npos);
}

TEST_CASE("embed mode 1 and node name prefix", "[e2e]") {
  TempDir out("embed");
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--embed-mode", "1", "--node-name-prefix", "pre_", "-o", out.path().string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  CHECK(filesIn(out.path()) == std::set<std::string>{"tiny_cnn_ctx.onnx"});
  auto model = onnx_io::loadModel(out / "tiny_cnn_ctx.onnx");
  REQUIRE(model);
  bool found = false;
  for (const auto& n : model->graph.nodes)
    if (n.opType == "EPContext") {
      found = true;
      CHECK(n.name.rfind("pre_tiny_cnn_ctxkit_", 0) == 0);
      CHECK(n.attrs.getString("partition_name") == n.name);
    }
  CHECK(found);
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--inputs", sampleData("tiny_cnn"), "--expected", sampleData("tiny_cnn")});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
}

TEST_CASE("usage errors and existing outputs", "[e2e]") {
  TempDir out("usage");
  auto shareEmbed = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "--embed-mode", "1", "-o", out.path().string()});
  CHECK(shareEmbed.exitCode == 2);
  CHECK(shareEmbed.err.find("--share") != std::string::npos);
  CHECK(filesIn(out.path()).empty());

  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()}).exitCode == 0);
  auto before = ctxkit::testing::readText(out / "tiny_cnn_ctx.onnx");
  auto again = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()});
  CHECK(again.exitCode == 2);
  CHECK(again.err.find("already exists") != std::string::npos);
  CHECK(ctxkit::testing::readText(out / "tiny_cnn_ctx.onnx") == before);
  CHECK(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string(), "--force"}).exitCode == 0);

  auto dry = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill"), "--dry-run", "-o", (out / "dry").string()});
  CHECK(dry.exitCode == 0);
  CHECK(dry.out.find("partition") != std::string::npos);
  CHECK(!fs::exists(out / "dry"));

  auto badTarget = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "tpu-9000", "--dry-run"});
  CHECK(badTarget.exitCode == 2);
  CHECK(badTarget.err.find("tpu-9000") != std::string::npos);
}

TEST_CASE("bad inputs give clear errors and no outputs", "[e2e]") {
  TempDir out("bad");
  // A truncated model.
  auto bytes = ctxkit::testing::readText(sample("tiny_cnn"));
  {
    std::ofstream f(out / "cut.onnx", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 3));
  }
  auto cut = runTool(CTXKIT_CTXGEN, {(out / "cut.onnx").string(), "-o", (out / "o").string()});
  CHECK(cut.exitCode == 1);
  CHECK(cut.err.find("cut.onnx") != std::string::npos);
  CHECK((!fs::exists(out / "o") || fs::is_empty(out / "o")));

  // A corrupt context binary: ctxrun fails naming the file.
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()}).exitCode == 0);
  {
    std::fstream f(out / "tiny_cnn_ctxkit.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string()});
  CHECK(run.exitCode == 1);
  CHECK(run.err.find("tiny_cnn_ctxkit.bin") != std::string::npos);

  // Compiling an already compiled model is refused.
  auto twice = runTool(CTXKIT_CTXGEN, {(out / "tiny_cnn_ctx.onnx").string(), "-o", (out / "again").string()});
  CHECK(twice.exitCode == 1);
  CHECK(twice.err.find("already compiled") != std::string::npos);
}

TEST_CASE("an EPContext node of another EP is named in the error", "[e2e]") {
  TempDir out("foreign");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()}).exitCode == 0);
  auto model = onnx_io::loadModel(out / "tiny_cnn_ctx.onnx");
  REQUIRE(model);
  std::string nodeName;
  for (auto& n : model->graph.nodes)
    if (n.opType == "EPContext") {
      n.attrs.set(ir::Attribute::makeString("source", "QNNExecutionProvider"));
      nodeName = n.name;
    }
  REQUIRE(onnx_io::saveModel(*model, out / "foreign_ctx.onnx"));
  auto run = runTool(CTXKIT_CTXRUN, {(out / "foreign_ctx.onnx").string()});
  CHECK(run.exitCode == 1);
  CHECK(run.err.find(nodeName) != std::string::npos);
  CHECK(run.err.find("QNNExecutionProvider") != std::string::npos);
  // ctxinspect still lists it.
  auto inspect = runTool(CTXKIT_CTXINSPECT, {(out / "foreign_ctx.onnx").string()});
  CHECK(inspect.out.find("QNNExecutionProvider") != std::string::npos);
}

TEST_CASE("fallback nodes keep their initializers, in an external file on request", "[e2e]") {
  TempDir out("fallback");
  {
    std::ofstream(out / "nogemm.json")
        << R"({"name":"nogemm","element_types":["float32"],"ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"MaxPool"}]})";
  }
  fs::path o = out / "o";
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", (out / "nogemm.json").string(), "-o", o.string(),
                                   "-C", "ep.context_model_external_initializers_file_name=weights.data", "-C",
                                   "ep.context_node_name_prefix=P_", "--depfile", (out / "deps.d").string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto report = nlohmann::json::parse(r.out);
  CHECK(report["models"][0]["fallback_nodes"].get<int>() == 2);
  CHECK(report["models"][0]["fallback"][1]["reason"].get<std::string>().find("Gemm") != std::string::npos);
  CHECK(filesIn(o) == std::set<std::string>{"tiny_cnn_ctx.onnx", "tiny_cnn_ctxkit.bin", "weights.data"});
  CHECK(ctxkit::testing::readText(out / "deps.d").find("tiny_cnn.onnx") != std::string::npos);

  auto run = runTool(CTXKIT_CTXRUN, {(o / "tiny_cnn_ctx.onnx").string(), "--inputs", sampleData("tiny_cnn"), "--expected", sampleData("tiny_cnn"), "--json"});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
  auto j = nlohmann::json::parse(run.out);
  CHECK(j["fallback_nodes"].get<int>() == 2);

  auto inspect = runTool(CTXKIT_CTXINSPECT, {(o / "tiny_cnn_ctx.onnx").string(), "--json", "--dot", (out / "g.dot").string()});
  INFO(inspect.out << inspect.err);
  CHECK(inspect.exitCode == 0);
  auto ji = nlohmann::json::parse(inspect.out);
  std::set<std::string> roles;
  for (const auto& f : ji["deployment_files"]) roles.insert(f["role"].get<std::string>());
  CHECK(roles == std::set<std::string>{"model", "context binary", "external data"});
  CHECK(ji["ep_context_nodes"][0]["name"].get<std::string>().rfind("P_tiny_cnn_ctxkit_", 0) == 0);
  auto dot = ctxkit::testing::readText(out / "g.dot");
  CHECK(dot.find("digraph") != std::string::npos);
  CHECK(dot.find("EPContext") != std::string::npos);
  CHECK(dot.find("Gemm") != std::string::npos);

  // Without the data file the deployment is incomplete, and both tools say which file is missing.
  fs::remove(o / "weights.data");
  auto missing = runTool(CTXKIT_CTXINSPECT, {(o / "tiny_cnn_ctx.onnx").string()});
  CHECK(missing.exitCode == 1);
  CHECK(missing.out.find("weights.data") != std::string::npos);
  auto runMissing = runTool(CTXKIT_CTXRUN, {(o / "tiny_cnn_ctx.onnx").string()});
  CHECK(runMissing.exitCode == 1);
  CHECK(runMissing.err.find("weights.data") != std::string::npos);
}

TEST_CASE("a model's large fallback initializers go to its own .bin when a partition compiled", "[e2e]") {
  TempDir out("fallbackbin");
  {
    std::ofstream(out / "nomatmul.json")
        << R"({"name":"nomatmul","element_types":["float32"],"ops":[{"op":"Add"},{"op":"LayerNormalization"},{"op":"Softmax"}]})";
  }
  const std::string target = (out / "nomatmul.json").string();
  fs::path o = out / "o", embedded = out / "embedded";
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill"), "--target", target, "-o", o.string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  CHECK(filesIn(o) == std::set<std::string>{"tiny_prefill_ctx.onnx", "tiny_prefill_ctxkit.bin"});
  auto report = nlohmann::json::parse(r.out);
  CHECK(report["models"][0]["fallback_nodes"].get<int>() > 0);
  CHECK(report["weights"]["stored_bytes"].get<uint64_t>() > report["weights"]["unique_bytes"].get<uint64_t>());
  auto model = onnx_io::loadModel(o / "tiny_prefill_ctx.onnx");
  REQUIRE(model);
  // The loader maps them from the .bin: the model file is smaller than they are.
  uint64_t large = 0;
  for (const auto& init : model->graph.initializers)
    if (init.tensor.byteSize() >= 1024) large += init.tensor.byteSize();
  CHECK(large > 0);
  CHECK(fs::file_size(o / "tiny_prefill_ctx.onnx") < large);
  auto run = runTool(CTXKIT_CTXRUN, {(o / "tiny_prefill_ctx.onnx").string(), "--inputs", sampleData("tiny_prefill"),
                                     "--expected", sampleData("tiny_prefill")});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
  auto inspect = runTool(CTXKIT_CTXINSPECT, {(o / "tiny_prefill_ctx.onnx").string(), "--verify"});
  INFO(inspect.out << inspect.err);
  CHECK(inspect.exitCode == 0);

  // --embed-fallback-initializers keeps them in the model, as before.
  auto e = runTool(CTXKIT_CTXGEN,
                   {sample("tiny_prefill"), "--target", target, "-o", embedded.string(), "--embed-fallback-initializers"});
  INFO(e.out << e.err);
  REQUIRE(e.exitCode == 0);
  CHECK(fs::file_size(embedded / "tiny_prefill_ctx.onnx") > large);
  auto embeddedRun = runTool(CTXKIT_CTXRUN, {(embedded / "tiny_prefill_ctx.onnx").string(), "--inputs",
                                             sampleData("tiny_prefill"), "--expected", sampleData("tiny_prefill")});
  INFO(embeddedRun.out << embeddedRun.err);
  CHECK(embeddedRun.exitCode == 0);
}

TEST_CASE("with --share, large fallback initializers are stored once in the shared .bin", "[e2e]") {
  TempDir out("sharefallback");
  {
    std::ofstream(out / "nomatmul.json")
        << R"({"name":"nomatmul","element_types":["float32"],"ops":[{"op":"Add"},{"op":"LayerNormalization"},{"op":"Softmax"}]})";
  }
  fs::path o = out / "o";
  auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "--target",
                                   (out / "nomatmul.json").string(), "-o", o.string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  CHECK(filesIn(o) == std::set<std::string>{"tiny_prefill_ctx.onnx", "tiny_decode_ctx.onnx", "tiny_prefill_ctxkit.bin"});
  auto report = nlohmann::json::parse(r.out);
  CHECK(report["models"][0]["fallback_nodes"].get<int>() > 0);
  // The MatMul weights stay on the fallback path but live once in the .bin: the models stay small.
  CHECK(fs::file_size(o / "tiny_prefill_ctx.onnx") < 16 * 1024);
  CHECK(fs::file_size(o / "tiny_decode_ctx.onnx") < 16 * 1024);
  CHECK(report["weights"]["referenced_bytes"].get<uint64_t>() == 2 * report["weights"]["unique_bytes"].get<uint64_t>());
  auto prefill = onnx_io::loadModel(o / "tiny_prefill_ctx.onnx");
  REQUIRE(prefill);
  size_t external = 0;
  for (const auto& init : prefill->graph.initializers) external += init.tensor.byteSize() >= 1024;
  CHECK(external > 0);
  CHECK(onnx_io::checkModelFile(o / "tiny_prefill_ctx.onnx"));
  for (const char* stem : {"tiny_prefill", "tiny_decode"}) {
    auto run = runTool(CTXKIT_CTXRUN, {(o / (std::string(stem) + "_ctx.onnx")).string(), "--inputs", sampleData(stem), "--expected", sampleData(stem)});
    INFO(run.out << run.err);
    CHECK(run.exitCode == 0);
  }
  auto inspect = runTool(CTXKIT_CTXINSPECT, {(o / "tiny_prefill_ctx.onnx").string(), (o / "tiny_decode_ctx.onnx").string(), "--verify", "--json"});
  INFO(inspect.out << inspect.err);
  CHECK(inspect.exitCode == 0);
  auto j = nlohmann::json::parse(inspect.out);
  CHECK(j["deployment_files"].size() == 3);
  CHECK(j["context_binaries"].size() == 1);

  // The fallback initializers are stored but no program uses them: both tools leave them out of the sharing figures
  // (one definition, program::sharingFigures), so they agree on the same .bin, in JSON and in text.
  const auto& weights = j["context_binaries"][0]["weights"];
  CHECK(report["weights"]["stored_bytes"].get<uint64_t>() > report["weights"]["unique_bytes"].get<uint64_t>());
  for (const char* key : {"referenced_bytes", "unique_bytes", "stored_bytes", "sharing_ratio"}) {
    INFO(key);
    CHECK(weights[key] == report["weights"][key]);
  }
  CHECK(weights["sharing_ratio"].get<double>() == 2.0);
  auto ratioIn = [](const std::string& text) {
    const auto at = text.find("sharing ratio ");
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find(')', at) - at);
  };
  auto gen = runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "--target",
                                     (out / "nomatmul.json").string(), "-o", o.string(), "--force"});
  auto shown = runTool(CTXKIT_CTXINSPECT, {(o / "tiny_prefill_ctx.onnx").string(), (o / "tiny_decode_ctx.onnx").string()});
  INFO(gen.out << shown.out << shown.err);
  REQUIRE(gen.exitCode == 0);
  CHECK(ratioIn(gen.out) == "sharing ratio 2.00");
  CHECK(ratioIn(shown.out) == ratioIn(gen.out));
}

TEST_CASE("the same inputs and options give byte-identical outputs", "[e2e]") {
  TempDir a("determinism_a"), b("determinism_b");
  for (const TempDir* d : {&a, &b})
    REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_prefill") + "," + sample("tiny_decode"), "--share", "-o", d->path().string()}).exitCode == 0);
  for (const char* f : {"tiny_prefill_ctx.onnx", "tiny_decode_ctx.onnx", "tiny_prefill_ctxkit.bin"}) {
    INFO(f);
    CHECK(ctxkit::testing::readText(a / f) == ctxkit::testing::readText(b / f));
  }
}

TEST_CASE("ctxrun with two threads and repeated runs gives the same verdict", "[e2e]") {
  TempDir out("threads");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_prefill"), "-o", out.path().string()}).exitCode == 0);
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_prefill_ctx.onnx").string(), "--threads", "2", "--iters", "5", "--inputs",
                                     sampleData("tiny_prefill"), "--expected", sampleData("tiny_prefill"), "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  auto j = nlohmann::json::parse(run.out);
  CHECK(j.contains("median_ms"));
  CHECK(j.contains("p90_ms"));
  auto usage = runTool(CTXKIT_CTXRUN, {(out / "tiny_prefill_ctx.onnx").string(), "--threads", "0"});
  CHECK(usage.exitCode == 2);
}

TEST_CASE("ctxrun --parallel-runs runs one session from several threads and checks every result", "[e2e]") {
  TempDir out("parallel");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string()}).exitCode == 0);
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--parallel-runs", "4", "--iters", "25",
                                     "--inputs", sampleData("tiny_cnn"), "--expected", sampleData("tiny_cnn"), "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  auto j = nlohmann::json::parse(run.out);
  CHECK(j["parallel"]["threads"].get<int>() == 4);
  CHECK(j["parallel"]["runs"].get<int>() == 100);
  CHECK(j["parallel"]["wrong"].get<int>() == 0);
  CHECK(j["parallel"]["runs_per_second"].get<double>() > 0);
  CHECK(runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--parallel-runs", "0"}).exitCode == 2);
}

TEST_CASE("ctxgen --dump-after and --stop-after take every pass, graph passes too, and --json lists every pass run",
          "[e2e]") {
  TempDir out("passes");
  const std::vector<std::string> graphPasses = {"inline-if", "remove-noops", "fold-subgraphs"};
  const std::vector<std::string> passes = {"fuse-qdq",          "fold-constants", "fuse-pad", "prune-conv-taps", "fold-batchnorm", "fold-affine",
                                           "widen-float16",     "fuse-matmul-add", "match-activations", "match-layer-norm",
                                           "fuse-epilogue",     "choose-kernels", "choose-layouts", "emit-program",
                                           "plan-memory"};
  for (const auto& pass : passes) {
    auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / pass).string(), "--dump-after", pass});
    INFO(pass << ": " << r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(r.out.find("tiny_cnn_ctxkit_0 (after " + pass + ")") != std::string::npos);
    // tiny_cnn has Conv -> BatchNormalization -> Relu: the BN is gone after fold-batchnorm, Relu after fuse-epilogue.
    bool beforeBn =
        pass == "fuse-qdq" || pass == "fold-constants" || pass == "fuse-pad" || pass == "prune-conv-taps";
    CHECK((r.out.find("BatchNormalization") != std::string::npos) == beforeBn);
    CHECK(fs::exists(out / pass / "tiny_cnn_ctx.onnx"));
  }
  for (const auto& pass : graphPasses) {
    // After a graph pass: the whole graph, nodes as the model has them, then lowering goes on and writes the model.
    auto r = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / pass).string(), "--dump-after", pass});
    INFO(pass << ": " << r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK(r.out.find("graph tiny_cnn (after " + pass + "): ") != std::string::npos);
    CHECK(r.out.find("= BatchNormalization(") != std::string::npos);
    CHECK(fs::exists(out / pass / "tiny_cnn_ctx.onnx"));
    // Stopped after a graph pass: the graph as it is then, no partition lowered, nothing written.
    auto stop = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / ("stop-" + pass)).string(), "--stop-after", pass});
    INFO(stop.out << stop.err);
    CHECK(stop.exitCode == 0);
    CHECK(stop.out.find("graph tiny_cnn (after " + pass + "): ") != std::string::npos);
    CHECK(stop.out.find("tiny_cnn_ctxkit_0") == std::string::npos);
    CHECK(!fs::exists(out / ("stop-" + pass)));
  }
  auto stop = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "stop").string(), "--stop-after", "fuse-epilogue"});
  INFO(stop.out << stop.err);
  CHECK(stop.exitCode == 0);
  CHECK(stop.out.find("(after fuse-epilogue)") != std::string::npos);
  CHECK(!fs::exists(out / "stop"));

  auto json = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "json").string(), "--json", "-"});
  REQUIRE(json.exitCode == 0);
  auto report = nlohmann::json::parse(json.out);
  std::vector<std::string> names;
  for (const auto& p : report["passes"]) {
    names.push_back(p["name"].get<std::string>());
    CHECK(p["ms"].get<double>() >= 0);
    CHECK(p["kind"].get<std::string>() == (names.size() <= graphPasses.size() ? "graph" : "lowering"));
    CHECK(p["counts"].is_object());
  }
  // The graph passes come first (their "changed" counts models), then the lowering passes (partitions).
  std::vector<std::string> listed = graphPasses;
  listed.insert(listed.end(), passes.begin(), passes.end());
  CHECK(names == listed);
  CHECK(report["passes"][0]["changed"].get<int>() == 0);  // inline-if: no If in tiny_cnn
  CHECK(report["passes"][0]["counts"].empty());
  CHECK(report["passes"][7]["changed"].get<int>() == 1);  // fold-batchnorm changed the one partition
  CHECK(report["passes"][7]["counts"]["batchnorms_folded"].get<int>() == 2);  // tiny_cnn has two Conv + BN

  // --tune: every Conv measured once into the cache, then found there by the next run (docs/ctxgen.md#tuning).
  const std::string cache = (out / "tune" / "cache.tsv").string();
  for (int run = 0; run < 2; ++run) {
    auto tuned = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "cpu", "-o", (out / "tuned").string(), "--force",
                                         "--tune", "--tune-cache", cache, "--json", "-"});
    REQUIRE(tuned.exitCode == 0);
    auto t = nlohmann::json::parse(tuned.out)["tune"];
    REQUIRE(t["convs"].size() == 2);
    CHECK(t["cache"].get<std::string>() == cache);
    CHECK(t["cache_hits"].get<int>() == (run == 0 ? 0 : 2));
    CHECK(t["cache_misses"].get<int>() == (run == 0 ? 2 : 0));
    CHECK(t["convs"][0]["cache_hit"].get<bool>() == (run == 1));
  }
  CHECK(fs::exists(cache));
  auto dumped = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "--target", "cpu", "--dump-after", "choose-kernels",
                                        "-o", (out / "dumped").string()});
  REQUIRE(dumped.exitCode == 0);
  CHECK(dumped.out.find(" kernel=") != std::string::npos);
  auto passNamed = [&](const std::string& name) {
    for (const auto& p : report["passes"])
      if (p["name"].get<std::string>() == name) return p;
    FAIL("no pass " << name << " in the report");
    return report["passes"][0];
  };
  CHECK(passNamed("widen-float16")["changed"].get<int>() == 0);    // no float16 value in tiny_cnn
  CHECK(passNamed("fuse-matmul-add")["changed"].get<int>() == 0);  // no MatMul in tiny_cnn
  CHECK(passNamed("fuse-epilogue")["counts"]["ops_fused"].get<int>() == 2);  // the two Relu

  // -v words each pass's change report.
  auto verbose = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "verbose").string(), "-v"});
  INFO(verbose.out << verbose.err);
  REQUIRE(verbose.exitCode == 0);
  CHECK(verbose.out.find("pass inline-if (graph, ") != std::string::npos);
  CHECK(verbose.out.find("ms): 2 batchnorms folded\n") != std::string::npos);
  CHECK(verbose.out.find("ms): no change\n") != std::string::npos);

  auto bad = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "bad").string(), "--dump-after", "fold-everything"});
  CHECK(bad.exitCode == 2);
  CHECK(bad.err.find("fold-batchnorm") != std::string::npos);
  CHECK(bad.err.find("remove-noops") != std::string::npos);
}

TEST_CASE("ctxrun --set gives an input one value everywhere, and names the inputs when it matches none", "[e2e]") {
  TempDir out("set_input");
  auto r = runTool(CTXKIT_CTXRUN, {sample("tiny_cnn"), "--set", "image=0.5", "--save-inputs", (out / "in").string()});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  auto image = ir::loadNpy(out / "in" / "input_0.npy");
  REQUIRE(image);
  REQUIRE(image->elementCount() > 0);
  for (uint64_t i = 0; i < image->elementCount(); ++i) REQUIRE(image->dataAs<float>()[i] == 0.5f);
  auto unknown = runTool(CTXKIT_CTXRUN, {sample("tiny_cnn"), "--set", "sr=16000"});
  CHECK(unknown.exitCode == 2);
  CHECK(unknown.err.find("the model has no input 'sr' (its inputs: image)") != std::string::npos);
  auto notNumber = runTool(CTXKIT_CTXRUN, {sample("tiny_cnn"), "--set", "image=fast"});
  CHECK(notNumber.exitCode == 2);
  CHECK(notNumber.err.find("expected NAME=NUMBER") != std::string::npos);
}

void checkQdqSample(const std::string& stem, size_t int8Count, const std::vector<std::string>& integerOps);

TEST_CASE("QDQ models compile to integer programs whose .bin holds their weights at 8-bit size", "[e2e]") {
  struct Case {
    std::string stem;
    size_t int8Weights;
    std::vector<std::string> integerOps;
  };
  for (const Case& c : {Case{"tiny_qdq_cnn", 3, {"QLinearConv", "QLinearMatMul"}},
                        Case{"tiny_qdq_prefill", 6, {"QLinearMatMul"}}}) {
    INFO(c.stem);
    checkQdqSample(c.stem, c.int8Weights, c.integerOps);
  }
}

void checkQdqSample(const std::string& stem, size_t int8Count, const std::vector<std::string>& integerOps) {
  TempDir out("qdq_" + stem);
  auto gen = runTool(CTXKIT_CTXGEN, {sample(stem), "-o", out.path().string(), "--dump"});
  INFO(gen.out << gen.err);
  REQUIRE(gen.exitCode == 0);
  for (const auto& op : integerOps) CHECK(gen.out.find(op) != std::string::npos);
  // Independent expectation: the int8 weights of the source model, each stored once at one byte per element; no
  // float32 copy of any of them.
  auto source = onnx_io::loadModel(sample(stem));
  REQUIRE(source);
  std::set<std::string> int8Weights;
  for (const auto& i : source->graph.initializers)
    if (i.tensor.type() == ir::ElemType::Int8 && i.tensor.elementCount() > 1)
      int8Weights.insert(std::string(reinterpret_cast<const char*>(i.tensor.data()), i.tensor.byteSize()));
  REQUIRE(int8Weights.size() == int8Count);
  auto view = format::ContainerView::openFile(out / (stem + "_ctxkit.bin"));
  REQUIRE(view);
  size_t found = 0;
  for (size_t i = 0; i < view->weights().size(); ++i) {
    const format::WeightInfo& w = view->weights()[i];
    if (w.type == ir::ElemType::Int8) {
      auto bytes = view->weightBytes(i);
      found += int8Weights.count(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    // float32 only for scales, biases and normalization parameters: vectors, never a weight matrix
    CHECK((w.type != ir::ElemType::Float || w.shape.size() <= 1));
  }
  CHECK(found == int8Count);
  // The integer program computes what the reference computed on the dequantized values, exactly.
  const std::string data = (fs::path(CTXKIT_SAMPLES_DIR) / stem / "test_data_set_0").string();
  auto run = runTool(CTXKIT_CTXRUN, {(out / (stem + "_ctx.onnx")).string(), "--inputs", data, "--expected", data,
                                     "--atol", "0", "--rtol", "0"});
  INFO(run.out << run.err);
  CHECK(run.exitCode == 0);
}

TEST_CASE("ctxgen --json carries its schema version and is written on failure too, exit code unchanged", "[e2e]") {
  TempDir out("json_failure");
  auto ok = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "ok").string(), "--json", "-"});
  INFO(ok.err);
  REQUIRE(ok.exitCode == 0);
  auto good = nlohmann::json::parse(ok.out);
  CHECK(good["schema_version"] == 1);
  CHECK(good["ok"] == true);

  // A compile error: the same exit code with or without --json, the report says why.
  const std::string missing = (out / "missing.onnx").string();
  auto plain = runTool(CTXKIT_CTXGEN, {missing, "-o", (out / "a").string()});
  auto failed = runTool(CTXKIT_CTXGEN, {missing, "-o", (out / "a").string(), "--json", "-"});
  INFO(failed.out << failed.err);
  CHECK(plain.exitCode == 1);
  CHECK(failed.exitCode == plain.exitCode);
  auto bad = nlohmann::json::parse(failed.out);
  CHECK(bad["schema_version"] == 1);
  CHECK(bad["ok"] == false);
  CHECK(bad["error"].get<std::string>().find("missing.onnx") != std::string::npos);
  CHECK(failed.err.find(bad["error"].get<std::string>()) != std::string::npos);

  // A usage error (exit 2) writes the report file too.
  const fs::path reportFile = out / "report.json";
  auto usage = runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", (out / "b").string(), "--json", reportFile.string(), "-C",
                                       "ep.no_such_key=1"});
  CHECK(usage.exitCode == 2);
  REQUIRE(fs::exists(reportFile));
  std::ifstream in(reportFile);
  auto fromFile = nlohmann::json::parse(in);
  CHECK(fromFile["ok"] == false);
  CHECK(fromFile["error"].get<std::string>().find("unknown key 'ep.no_such_key'") != std::string::npos);

  // A report path that names an input is refused, and the failure report does not overwrite that input.
  const fs::path model = out / "cnn.onnx";
  fs::copy_file(sample("tiny_cnn"), model);
  const auto before = fs::file_size(model);
  auto onInput = runTool(CTXKIT_CTXGEN, {model.string(), "-o", (out / "c").string(), "--json", model.string()});
  INFO(onInput.err);
  CHECK(onInput.exitCode != 0);
  CHECK(fs::file_size(model) == before);
  CHECK(onnx_io::loadModel(model));
}

TEST_CASE("ctxrun pre-faults at load by default: outputs are bit-identical to --no-prefault and match", "[e2e]") {
  TempDir out("prefault");
  // tiny_cnn for a small arena; tiny_prefill for fewer ops but GEMM panels read from the mapped binary.
  for (const std::string name : {"tiny_cnn", "tiny_prefill"}) {
    INFO(name);
    auto gen = runTool(CTXKIT_CTXGEN, {sample(name), "-o", out.path().string(), "-q"});
    REQUIRE(gen.exitCode == 0);
    std::map<std::string, std::string> saved;
    for (const std::string mode : {"--prefault", "--no-prefault"}) {
      const fs::path dir = out / (name + mode);
      auto run = runTool(CTXKIT_CTXRUN, {(out / (name + "_ctx.onnx")).string(), mode, "--iters", "3", "--inputs",
                                         sampleData(name), "--expected", sampleData(name), "--output-dir",
                                         dir.string(), "--json"});
      INFO(mode << run.out << run.err);
      REQUIRE(run.exitCode == 0);
      CHECK(nlohmann::json::parse(run.out)["ok"] == true);
      for (const auto& f : fs::directory_iterator(dir))
        saved[mode + "/" + f.path().filename().string()] = ctxkit::testing::readText(f.path());
    }
    REQUIRE(!saved.empty());
    for (const auto& [key, bytes] : saved)
      if (key.starts_with("--prefault/")) {
        INFO(key);
        CHECK(saved["--no-prefault/" + key.substr(11)] == bytes);
      }
  }
}

TEST_CASE("ctxrun --json reports load, first run and steady state consistently", "[e2e]") {
  TempDir out("phases");
  REQUIRE(runTool(CTXKIT_CTXGEN, {sample("tiny_cnn"), "-o", out.path().string(), "-q"}).exitCode == 0);
  auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--iters", "4", "--inputs",
                                     sampleData("tiny_cnn"), "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  auto j = nlohmann::json::parse(run.out);
  for (const char* key : {"load_ms", "first_run_ms", "time_to_first_result_ms", "median_ms", "p90_ms", "load_cpu_ms",
                          "first_run_cpu_ms", "median_cpu_ms", "first_run_ratio"}) {
    INFO(key);
    REQUIRE(j.contains(key));
    CHECK(j[key].get<double>() >= 0);
  }
  for (const char* key : {"load_page_faults", "first_run_page_faults", "median_page_faults"}) {
    INFO(key);
    REQUIRE(j.contains(key));
    CHECK(j[key].is_number_integer());
    CHECK(j[key].get<int64_t>() >= 0);
  }
  CHECK(j["iterations"] == 4);
  CHECK(j["time_to_first_result_ms"].get<double>() ==
        Approx(j["load_ms"].get<double>() + j["first_run_ms"].get<double>()));
  CHECK(j["first_run_ratio"].get<double>() ==
        Approx(j["first_run_ms"].get<double>() / j["median_ms"].get<double>()));
  CHECK(j["p90_ms"].get<double>() >= j["median_ms"].get<double>());
  // One run: no steady state to report.
  auto once = runTool(CTXKIT_CTXRUN, {(out / "tiny_cnn_ctx.onnx").string(), "--inputs", sampleData("tiny_cnn"), "--json"});
  REQUIRE(once.exitCode == 0);
  auto k = nlohmann::json::parse(once.out);
  CHECK(k.contains("first_run_ms"));
  CHECK(!k.contains("median_ms"));
  CHECK(!k.contains("first_run_ratio"));
}

TEST_CASE("a float16 model: cpu computes in float32 between ops and keeps the float16 weights, npu-sim rounds every op",
          "[e2e]") {
  TempDir dir("float16");
  const fs::path model = dir / "tiny_prefill_fp16.onnx";
  auto made = runTool(CTXKIT_MAKE_FP16, {sample("tiny_prefill"), model.string()});
  INFO(made.err);
  REQUIRE(made.exitCode == 0);
  std::map<std::string, std::vector<std::byte>> outputs;
  for (const std::string target : {"cpu", "npu-sim"}) {
    INFO(target);
    // Weightless: a weight stays in the source model exactly when its bytes are the source's (which is beside the
    // compiled model, where ctxrun and ctxinspect read it).
    const fs::path out = dir / target;
    fs::create_directories(out);
    fs::copy_file(model, out / model.filename());
    auto gen = runTool(CTXKIT_CTXGEN, {(out / model.filename()).string(), "--target", target, "-o", out.string(),
                                       "--weightless", "--json", "-"});
    INFO(gen.err);
    REQUIRE(gen.exitCode == 0);
    const auto report = nlohmann::json::parse(gen.out);
    CHECK(report["float16_compute"].get<std::string>() == (target == "cpu" ? "float32" : "float16"));
    const auto& weights = report["weights"];
    CHECK(weights["unique_count"].get<int>() > 10);
    CHECK(weights["source_bytes"].get<uint64_t>() == weights["unique_bytes"].get<uint64_t>());
    nlohmann::json widen;
    for (const auto& p : report["passes"])
      if (p["name"] == "widen-float16") widen = p;
    REQUIRE(widen.is_object());
    if (target == "cpu") {
      CHECK(widen["changed"].get<int>() == 1);
      CHECK(widen["counts"]["inputs_widened"].get<int>() == 1);   // x
      CHECK(widen["counts"]["outputs_rounded"].get<int>() == 1);  // y
      // Every weight the program keeps is a float16 one read as float32 (some are equal, or folded into an op).
      CHECK(widen["counts"]["weights_widened"].get<int>() >= weights["unique_count"].get<int>());
    } else {
      CHECK(widen["changed"].get<int>() == 0);
    }
    auto verify = runTool(CTXKIT_CTXINSPECT, {(out / "tiny_prefill_fp16_ctx.onnx").string(), "--verify", "-q"});
    INFO(verify.out << verify.err);
    CHECK(verify.exitCode == 0);
    auto run = runTool(CTXKIT_CTXRUN, {(out / "tiny_prefill_fp16_ctx.onnx").string(), "--seed", "3", "--output-dir",
                                       (out / "y").string(), "-q"});
    INFO(run.out << run.err);
    REQUIRE(run.exitCode == 0);
    auto y = ir::loadNpy(out / "y" / "output_0.npy");
    REQUIRE(y);
    CHECK(y->type() == ir::ElemType::Float16);
    const auto bytes = std::as_bytes(std::span(y->dataAs<uint16_t>(), y->elementCount()));
    outputs[target].assign(bytes.begin(), bytes.end());
  }
  // The same inputs, two precisions: the results differ (in the last float16 steps).
  CHECK(outputs["cpu"].size() == outputs["npu-sim"].size());
  CHECK(outputs["cpu"] != outputs["npu-sim"]);
}
