// Shape variants and bindings through the real ctxgen (docs/compiler.md#variants): --variant compiles a model once per
// variant into one context binary holding every weight once (and ctxinspect says which variants use which weights);
// --dim/--shape take a STEM: prefix for one model of a group; bindings that match nothing, shapes of another rank,
// values contradicting a static dimension and options contradicting each other are usage errors; compiled models
// carry their bound static shapes. tests/oracle/ort_oracle.sh runs every variant against ONNX Runtime.
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
using ctxkit::testing::kSamples;
namespace fs = std::filesystem;

namespace {

// tiny_prefill with a symbolic sequence length (tests/oracle/make_symbolic): x and y are [1, seq, 64].
fs::path writeDynamicBlock(const fs::path& dir, const std::string& stem) {
  const fs::path path = dir / (stem + ".onnx");
  auto r = runTool(CTXKIT_MAKE_SYMBOLIC, {(kSamples / "tiny_prefill.onnx").string(), path.string()});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  return path;
}

// The weights of a context binary by identity (hash, bytes).
std::multiset<std::pair<std::string, uint64_t>> storedWeights(const fs::path& bin) {
  auto view = format::ContainerView::openFile(bin);
  REQUIRE(view);
  std::multiset<std::pair<std::string, uint64_t>> out;
  for (const auto& w : view->weights()) out.emplace(w.hash.toHex(), w.size);
  return out;
}

// A ctxgen run on `model` with each case's arguments (plus `common`) must be a usage error whose message contains the
// case's text, and must write nothing.
struct UsageCase {
  std::vector<std::string> args;
  std::string message;
};
void expectUsageErrors(const fs::path& model, const fs::path& out, const std::vector<std::string>& common,
                       const std::vector<UsageCase>& cases) {
  for (const UsageCase& c : cases) {
    std::vector<std::string> args{model.string(), "-o", out.string()};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = runTool(CTXKIT_CTXGEN, args);
    INFO(fmt::format("{}", fmt::join(c.args, " ")) << ": " << r.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
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

  // Stored bytes == one copy: each variant compiled on its own stores exactly the weights (by hash and size) that
  // the three-variant binary stores once.
  const auto together = storedWeights(out / "block_ctxkit.bin");
  uint64_t togetherBytes = 0;
  for (const auto& [hash, size] : together) togetherBytes += size;
  CHECK(togetherBytes == unique);
  for (const char* seq : {"seq=1", "seq=16", "seq=64"}) {
    const fs::path alone = dir.path() / fmt::format("alone_{}", seq + 4);
    auto one = runTool(CTXKIT_CTXGEN, {model.string(), "--variant", seq, "-o", alone.string(), "-q"});
    INFO(seq << ": " << one.err);
    REQUIRE(one.exitCode == 0);
    CHECK(storedWeights(alone / "block_ctxkit.bin") == together);
  }

  // ctxinspect names, for the weights, the graphs and compiled models (one per variant) that use them: here every
  // weight is used by all three.
  const std::vector<std::string> compiled{(out / "block_seq1_ctx.onnx").string(), (out / "block_seq16_ctx.onnx").string(),
                                          (out / "block_long_ctx.onnx").string()};
  std::vector<std::string> inspectArgs = compiled;
  inspectArgs.push_back("--json");
  auto inspected = runTool(CTXKIT_CTXINSPECT, inspectArgs);
  INFO(inspected.out << inspected.err);
  REQUIRE(inspected.exitCode == 0);
  auto listing = nlohmann::json::parse(inspected.out);
  REQUIRE(listing["context_binaries"].size() == 1);
  const auto& users = listing["context_binaries"][0]["weight_users"];
  REQUIRE(users.size() == 1);
  CHECK(users[0]["weights"].get<size_t>() == together.size());
  CHECK(users[0]["bytes"].get<uint64_t>() == unique);
  CHECK(users[0]["graphs"].size() == 3);
  CHECK(users[0]["models"] == nlohmann::json::array({"block.onnx"}));
  CHECK(users[0]["compiled_models"].get<std::vector<std::string>>() == compiled);
  auto text = runTool(CTXKIT_CTXINSPECT, compiled);
  CHECK(text.out.find(fmt::format("compiled models {}, {}, {}", compiled[0], compiled[1], compiled[2])) !=
        std::string::npos);

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

TEST_CASE("with embed mode 1 each variant's _ctx.onnx embeds only its own graph", "[e2e]") {
  TempDir dir("variants_embedded");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  const fs::path out = dir.path() / "out";
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "--embed-mode", "1", "--variant", "seq=1", "--variant", "seq=16", "-o",
                                   out.string(), "-q"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  CHECK_FALSE(fs::exists(out / "block_ctxkit.bin"));
  for (const char* name : {"seq1", "seq16"}) {
    const fs::path ctx = out / fmt::format("block_{}_ctx.onnx", name);
    auto inspected = runTool(CTXKIT_CTXINSPECT, {ctx.string(), "--json"});
    INFO(inspected.out << inspected.err);
    REQUIRE(inspected.exitCode == 0);
    auto listing = nlohmann::json::parse(inspected.out);
    REQUIRE(listing["context_binaries"].size() == 1);
    const auto& graphs = listing["context_binaries"][0]["graphs"];
    REQUIRE(graphs.size() == 1);
    CHECK(graphs[0]["name"] == fmt::format("block_{}_ctxkit_0", name));
    auto run = runTool(CTXKIT_CTXRUN, {ctx.string()});
    INFO(run.out << run.err);
    CHECK(run.exitCode == 0);
  }
}

TEST_CASE("with --share, every variant of every model shares one context binary", "[e2e]") {
  TempDir dir("variants_shared");
  const fs::path a = writeDynamicBlock(dir.path(), "first"), b = writeDynamicBlock(dir.path(), "second");
  const fs::path out = dir.path() / "out";
  auto r = runTool(CTXKIT_CTXGEN, {a.string() + "," + b.string(), "--share", "--variant", "seq=1", "--variant",
                                   "seq=4", "-o", out.string(), "--json", "-"});
  INFO(r.out << r.err);
  REQUIRE(r.exitCode == 0);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"first_seq1_ctx.onnx", "first_seq4_ctx.onnx", "second_seq1_ctx.onnx",
                                       "second_seq4_ctx.onnx", "first_ctxkit.bin"});
  // The two models are the same block: one copy of its weights serves four compiled models.
  auto report = nlohmann::json::parse(r.out);
  const auto unique = report["weights"]["unique_bytes"].get<uint64_t>();
  CHECK(report["weights"]["referenced_bytes"].get<uint64_t>() == 4 * unique);
  CHECK(storedWeights(out / "first_ctxkit.bin") == [&] {
    const fs::path alone = dir.path() / "alone";
    REQUIRE(runTool(CTXKIT_CTXGEN, {a.string(), "--dim", "seq=4", "-o", alone.string(), "-q"}).exitCode == 0);
    return storedWeights(alone / "first_ctxkit.bin");
  }());
  for (const char* name : {"first_seq1", "first_seq4", "second_seq1", "second_seq4"}) {
    auto run = runTool(CTXKIT_CTXRUN, {(out / fmt::format("{}_ctx.onnx", name)).string()});
    INFO(name << ": " << run.out << run.err);
    CHECK(run.exitCode == 0);
  }
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
  expectUsageErrors(model, dir.path() / "out", {}, {
           {{"--dim", "batch=2"}, "--dim 'batch=2': no symbolic dimension 'batch' in any model (inputs: block: x 1xseqx64)"},
           {{"--shape", "y=1x2x64"}, "no input 'y' in any model"},
           {{"--shape", "x=1x16"}, "model 'block' input 'x' is declared 1xseqx64 (rank 3) but the shape given is 1x16 (rank 2)"},
           {{"--shape", "x=2x16x64"}, "whose dimension 0 is 1, but the shape given is 2x16x64"},
           {{"--dim", "other:seq=4"}, "no symbolic dimension 'other:seq' in any model (inputs: block: x 1xseqx64); "
                                      "'other' is not the stem of a model of this run"},
           {{"--shape", "block:x=1x4"}, "--shape 'block:x=1x4': model 'block' input 'x' is declared 1xseqx64 (rank 3)"},
           {{"--variant", "x=1x4"}, "--variant 'x=1x4': model 'block' input 'x' is declared 1xseqx64 (rank 3)"},
           {{"--variant", "seq=1", "--variant", "seq=2", "-C", "ep.context_file_path=" + (dir.path() / "out" / "b.onnx").string()},
            "an output file path (ep.context_file_path) gives one output, but 2 variants make 2"},
           {{"--variant", "len=4"}, "--variant 'len=4': 'len' is no input or symbolic dimension of any model"},
           {{"--variant", "a:seq=1", "--variant", "a:seq=2"}, "a variant named 'a' is given twice"},
           {{"--variant", "seq"}, "item 'seq' is not NAME=VALUE"},
           {{"--dim", "seq=4", "--dim", "seq=8"},
            "--dim 'seq=8' contradicts --dim 'seq=4': both bind symbolic dimension 'seq' of model 'block'"},
           {{"--dim", "block:seq=4", "--shape", "block:x=1x8x64", "--dim", "seq=2"},
            "--shape 'block:x=1x8x64' contradicts --dim 'block:seq=4': input 'x' of model 'block' is declared 1xseqx64, "
            "and one gives 'seq' 8, the other 4"},
           {{"--dim", "seq=4", "--variant", "seq=1"},
            "--variant 'seq=1' contradicts --dim 'seq=4': both bind symbolic dimension 'seq' of model 'block' (--dim and "
            "--shape hold for every variant"}});

  // A model's own binding refines a run-wide one; agreeing repeats are fine.
  const fs::path out = dir.path() / "refined";
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", out.string(), "-q", "--dim", "seq=4", "--dim", "block:seq=8",
                                   "--dim", "seq=4"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  auto compiled = onnx_io::loadModel(out / "block_ctx.onnx");
  REQUIRE(compiled);
  CHECK(staticShape(compiled->graph.inputs[0]) == std::vector<int64_t>{1, 8, 64});
}

TEST_CASE("options that contradict each other are usage errors naming both", "[e2e]") {
  TempDir dir("contradictions");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  expectUsageErrors(model, dir.path() / "out", {"--dim", "seq=4"}, {
           {{"--embed-mode", "0", "-C", "ep.context_embed_mode=1"},
            "-C ep.context_embed_mode=1 contradicts --embed-mode 0: both set the embed mode"},
           {{"--node-name-prefix", "a_", "-C", "ep.context_node_name_prefix|b_"},
            "-C ep.context_node_name_prefix=b_ contradicts --node-name-prefix a_"},
           {{"--share", "-C", "ep.share_ep_contexts=0"}, "-C ep.share_ep_contexts=0 contradicts --share"},
           {{"-C", "ep.context_embed_mode=0", "-C", "ep.context_embed_mode|1"},
            "-C ep.context_embed_mode=1 contradicts -C ep.context_embed_mode=0"},
           {{"--external-initializers-file", "a.data", "-C", "ep.context_model_external_initializers_file_name=b.data"},
            "contradicts --external-initializers-file a.data"},
           {{"-C", "ep.context_file_path=" + (dir.path() / "elsewhere" / "x_ctx.onnx").string()},
            "contradicts -o " + (dir.path() / "out").string() + ": both set the output folder"},
           {{"-C", "ep.context_embed_mode"}, "expected KEY=VALUE or \"KEY|VALUE KEY|VALUE\""}});

  // Agreeing spellings are fine, and ONNX Runtime's "KEY|VALUE KEY|VALUE" form sets several keys.
  const fs::path out = dir.path() / "agree";
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", out.string(), "--dim", "seq=4", "--embed-mode", "1", "-C",
                                   "ep.context_embed_mode|1 ep.context_node_name_prefix|p_", "-q"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  auto compiled = onnx_io::loadModel(out / "block_ctx.onnx");
  REQUIRE(compiled);
  CHECK_FALSE(fs::exists(out / "block_ctxkit.bin"));
  bool found = false;
  for (const auto& n : compiled->graph.nodes)
    if (n.opType == "EPContext") {
      found = true;
      CHECK(n.name == "p_block_ctxkit_0");
      CHECK(n.attrs.getInt("embed_mode", -1) == 1);
    }
  CHECK(found);
}

TEST_CASE("ONNX Runtime's sharing and weightless keys are known to -C: refused clearly or accepted", "[e2e]") {
  TempDir dir("ort_keys");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  expectUsageErrors(model, dir.path() / "out", {"--dim", "seq=4"}, {
           {{"-C", "ep.context_source_model_path=" + model.string()},
            "-C ep.context_source_model_path: not supported by ctxgen: it reads every model from the file named"},
           {{"-C", "ep.enable_weightless|yes"}, "-C ep.enable_weightless: expected 0 or 1, got 'yes'"},
           {{"-C", "ep.stop_share_ep_contexts=yes"}, "-C ep.stop_share_ep_contexts: expected 0 or 1, got 'yes'"},
           {{"-C", "ep.no_such_key=1"}, "-C: unknown key 'ep.no_such_key'; known: ep.context_enable"}});

  // Keys that mean nothing for one ctxgen run are accepted, in both spellings, beside keys that do act.
  const fs::path out = dir.path() / "accepted";
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", out.string(), "--dim", "seq=4", "-q", "-C",
                                   "ep.share_ep_contexts|1 ep.stop_share_ep_contexts|1 ep.enable_weightless|0", "-C",
                                   "ep.enable_weightless_ep_context_nodes=0"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  CHECK(r.err.find("unknown key") == std::string::npos);
  CHECK(fs::exists(out / "block_ctx.onnx"));
  CHECK(fs::exists(out / "block_ctxkit.bin"));
}

TEST_CASE("a model left with an unbound symbolic dimension says why nothing compiled, and can be made to fail", "[e2e]") {
  TempDir dir("unbound_symbol");
  const fs::path model = writeDynamicBlock(dir.path(), "block");
  const std::string blocker = "dimension 'seq' of 'x' is not bound (use --dim seq=N)";
  // Without -v the run says that nothing compiled and the reason most nodes give.
  auto r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", (dir / "plain").string()});
  INFO(r.out << r.err);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.err, Catch::Contains("warning") && Catch::Contains("no node compiled") && Catch::Contains(blocker));
  // ORT's compile flag: the same as an error.
  r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", (dir / "strict").string(), "--error-if-no-nodes-compiled"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("--error-if-no-nodes-compiled") && Catch::Contains(blocker));
  CHECK_FALSE(fs::exists(dir / "strict" / "block_ctx.onnx"));
  // --dim and a variant that agree on the symbol combine: the variant compiles every node.
  r = runTool(CTXKIT_CTXGEN, {model.string(), "-o", (dir / "both").string(), "--dim", "seq=4", "--variant",
                              "s4:seq=4", "--error-if-no-nodes-compiled"});
  CHECK(r.exitCode == 0);
  CHECK(fs::exists(dir / "both" / "block_s4_ctx.onnx"));
  CHECK(r.err.find("no node compiled") == std::string::npos);
}
