// Loader rules (docs/bad-input.md#loader-rules) that reach past the container's own tables, through the real tools:
// external paths (rule 11, including symbolic links), program weight references (13), strings as data (14) and nesting
// depth of ONNX subgraphs (15).
#include "rules_util.h"

#include <nlohmann/json.hpp>

#include <set>

using namespace ctxkit;
using namespace ctxkit::format::testing;
using namespace ctxkit::loader_rules;

namespace {

// root/deploy holds a copy of the pristine deployment; root/elsewhere is a folder beside it.
struct TwoFolders {
  TempDir root{"loader_rule_paths"};
  fs::path deploy = root / "deploy";
  fs::path elsewhere = root / "elsewhere";
  TwoFolders() {
    fs::create_directories(deploy);
    fs::create_directories(elsewhere);
    for (const auto& e : fs::directory_iterator(pristineDeployment())) fs::copy(e.path(), deploy / e.path().filename());
    // A valid copy outside: a loader that followed the path would succeed, so only confinement refuses it.
    fs::copy(deploy / kBinName, elsewhere / kBinName);
  }
  fs::path model() const { return deploy / kPrefillModel; }
  void pointContextAt(const std::string& where) const {
    editContextNodes(model(), [&](ir::Node& n) {
      if (n.attrs.has("ep_cache_context")) n.attrs.set(ir::Attribute::makeString("ep_cache_context", where));
    });
  }
  void expectRefused(const std::vector<std::string>& fragments) const {
    expectToolRejects(CTXKIT_CTXRUN, {model().string()}, fragments);
    expectToolRejects(CTXKIT_CTXINSPECT, {model().string(), "--verify"}, fragments);
  }
};

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());  // keeps every protobuf length prefix valid
  size_t count = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()), ++count)
    s.replace(at, from.size(), to);
  REQUIRE(count > 0);
}

// --- hand-encoded protobuf, so that nesting the writer would refuse can still be put in a file ---
std::string varint(uint64_t v) {
  std::string out;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    out += static_cast<char>(v ? byte | 0x80 : byte);
  } while (v);
  return out;
}
std::string tag(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
std::string lengthField(int field, const std::string& payload) { return tag(field, 2) + varint(payload.size()) + payload; }
std::string intField(int field, uint64_t v) { return tag(field, 0) + varint(v); }

// A model whose graph holds an If whose then_branch holds an If ... `levels` subgraphs deep. Built from the
// inside out as sizes only, then written outside in, so a very deep file costs linear time.
std::string nestedIfModel(int levels) {
  const std::string leaf = lengthField(2, "leaf");  // GraphProto.name
  std::vector<std::string> heads(static_cast<size_t>(levels) + 1);
  uint64_t inner = leaf.size();
  for (int d = levels; d >= 0; --d) {
    // AttributeProto{name, type = GRAPH (5), g}; NodeProto{op_type, input, output, attribute};
    // GraphProto{name, node}. The nested message is each one's last field.
    std::string attr = lengthField(1, "then_branch") + intField(20, 5) + tag(6, 2) + varint(inner);
    const uint64_t attrSize = attr.size() + inner;
    std::string node = lengthField(4, "If") + lengthField(1, "c") + lengthField(2, "y") + tag(5, 2) + varint(attrSize);
    const uint64_t nodeSize = node.size() + attrSize;
    std::string graph = lengthField(2, fmt::format("g{}", d)) + tag(1, 2) + varint(nodeSize);
    inner = graph.size() + nodeSize;
    heads[static_cast<size_t>(d)] = graph + node + attr;
  }
  // ModelProto{ir_version = 8, opset_import {version = 17}, graph}
  std::string model = intField(1, 8) + lengthField(8, intField(2, 17)) + tag(7, 2) + varint(inner);
  for (const auto& h : heads) model += h;
  return model + leaf;
}

void writeText(const fs::path& p, const std::string& s) {
  writeBytes(p, std::as_bytes(std::span(s.data(), s.size())));
}

// Characters a shell, printf or fmt would act on; none is a control character, so the string is valid.
const std::string kHostile = "{}{0}{:>99999}%s%n%x$(touch PWNED)`touch PWNED`;|&<>'\"*?\\ $HOME ${IFS} !!";

}  // namespace

TEST_CASE("rule 11: a context path that leaves the model folder is refused", "[loader_rules][rule11]") {
  SECTION("relative path with ..") {
    TwoFolders f;
    f.pointContextAt("../elsewhere/" + kBinName);
    f.expectRefused({"../elsewhere/" + kBinName, "escapes the model folder"});
  }
  SECTION("absolute path") {
    TwoFolders f;
    const std::string abs = (f.elsewhere / kBinName).string();
    f.pointContextAt(abs);
    f.expectRefused({fmt::format("path '{}' is absolute; expected a path relative to", abs)});
  }
}

TEST_CASE("rule 11: a symlinked .bin or subfolder that points out of the folder is refused", "[loader_rules][rule11][symlink]") {
  SECTION("the .bin itself is a symlink to a copy outside") {
    TwoFolders f;
    fs::remove(f.deploy / kBinName);
    fs::create_symlink("../elsewhere/" + kBinName, f.deploy / kBinName);
    f.expectRefused({fmt::format("path '{}' escapes the model folder", kBinName), "through a symbolic link",
                     (f.elsewhere / kBinName).string()});
  }
  SECTION("a subfolder is a symlink to a folder outside") {
    TwoFolders f;
    fs::create_directory_symlink(f.elsewhere, f.deploy / "sub");
    f.pointContextAt("sub/" + kBinName);
    f.expectRefused({fmt::format("path 'sub/{}' escapes the model folder", kBinName), "through a symbolic link"});
  }
  SECTION("symlinks that stay inside the folder are fine") {
    TwoFolders f;
    fs::create_directories(f.deploy / "real_sub");
    fs::rename(f.deploy / kBinName, f.deploy / "real_sub" / kBinName);
    fs::create_directory_symlink("real_sub", f.deploy / "sub");
    fs::create_symlink("sub/" + kBinName, f.deploy / "alias.bin");
    f.pointContextAt("alias.bin");
    expectToolAccepts(CTXKIT_CTXRUN, {f.model().string()});
    expectToolAccepts(CTXKIT_CTXINSPECT, {f.model().string(), "--verify"});
  }
}

TEST_CASE("rule 11: external data that leaves the model folder is refused", "[loader_rules][rule11]") {
  TempDir root("loader_rule_external");
  const fs::path deploy = root / "deploy";
  fs::create_directories(deploy);
  auto source = onnx_io::loadModel(sampleModel("tiny_cnn"));
  REQUIRE(source.isOk());
  const fs::path model = deploy / "cnn.onnx";

  SECTION("a plain external data file is read") {
    REQUIRE(onnx_io::saveModelWithExternalData(*source, model, "cnn.data", 0).isOk());
    expectToolAccepts(CTXKIT_CTXRUN, {model.string()});
  }
  SECTION("the external data file is a symlink to a file outside") {
    REQUIRE(onnx_io::saveModelWithExternalData(*source, model, "cnn.data", 0).isOk());
    fs::rename(deploy / "cnn.data", root / "cnn.data");
    fs::create_symlink("../cnn.data", deploy / "cnn.data");
    const std::vector<std::string> fragments = {"path 'cnn.data' escapes the model folder", "through a symbolic link"};
    expectToolRejects(CTXKIT_CTXRUN, {model.string()}, fragments);
    expectToolRejects(CTXKIT_CTXINSPECT, {model.string(), "--verify"}, fragments);
    expectToolRejects(CTXKIT_CTXGEN, {model.string(), "-o", (root / "out").string()}, fragments);
  }
  SECTION("the external data location climbs out with ..") {
    // The writer refuses such a location, so the file is patched: same length, valid protobuf.
    REQUIRE(onnx_io::saveModelWithExternalData(*source, model, "___cnn.data", 0).isOk());
    fs::rename(deploy / "___cnn.data", root / "cnn.data");
    std::string bytes = testing::readText(model);
    replaceAll(bytes, "___cnn.data", "../cnn.data");
    writeText(model, bytes);
    const std::vector<std::string> fragments = {"path '../cnn.data' escapes the model folder"};
    expectToolRejects(CTXKIT_CTXRUN, {model.string()}, fragments);
    expectToolRejects(CTXKIT_CTXINSPECT, {model.string(), "--verify"}, fragments);
  }
}

TEST_CASE("rule 12: the tools refuse a rank that an assert-only check would let index past dims", "[loader_rules][rule12]") {
  // The tools under test are whatever this build type produced; the reader rules must not depend on it.
  // tests/loader_rules/ndebug_rules_test.cpp recompiles the reader with NDEBUG forced, whatever the build type.
  Crafted c;
  c.editWeight(0, [](auto& w) { w.rank = 200; });  // an assert-only check would index dims[199] in a release build
  c.expectRejected({"weight 0 has rank 200; expected at most 8"});
}

TEST_CASE("rule 13: every weight reference of every program resolves before anything runs", "[loader_rules][rule13]") {
  Crafted c;
  const size_t target = lastGraphOf(c.bytes, "tiny_prefill.onnx");
  const uint64_t weightCount = getHeader(c.bytes).weightCount;
  bool changed = false;
  c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
    if (g.index != target) return;
    auto p = program::deserialize(g.program, weightCount, "program");
    REQUIRE(p.isOk());
    for (auto& t : p->tensors)
      if (t.kind == program::TensorKind::Weight && !changed) {
        t.index = static_cast<uint32_t>(weightCount);
        changed = true;
      }
    g.program = program::serialize(*p);
  });
  REQUIRE(changed);
  const std::string fragment = fmt::format("weight index {} but the weight table has {} entries", weightCount, weightCount);
  c.writeBin();
  expectToolRejects(CTXKIT_CTXINSPECT, {c.model().string(), "--verify"}, {kBinName, fragment});
  const fs::path outputs = c.dir() / "outputs";
  expectToolRejects(CTXKIT_CTXRUN, {c.model().string(), "--output-dir", outputs.string()}, {kBinName, fragment});
  // Refused at load: nothing ran, so nothing was written.
  CHECK((!fs::exists(outputs) || fs::is_empty(outputs)));
}

TEST_CASE("rule 13: a float16-widened weight resolves to a float16 weight of its shape", "[loader_rules][rule13]") {
  // The samples compile for npu-sim: their weights are float32, so a program tensor claiming layout float16-widened
  // points at a weight of the wrong type and is refused at load, naming both.
  Crafted c;
  const size_t target = lastGraphOf(c.bytes, "tiny_prefill.onnx");
  const uint64_t weightCount = getHeader(c.bytes).weightCount;
  std::string name;
  c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
    if (g.index != target) return;
    auto p = program::deserialize(g.program, weightCount, "program");
    REQUIRE(p.isOk());
    for (auto& t : p->tensors)
      if (t.kind == program::TensorKind::Weight && t.type == ir::ElemType::Float && t.layout.plain() && name.empty()) {
        t.layout = {cpu::WeightLayoutKind::Float16Widened, 0, 0};
        name = t.name;
      }
    g.program = program::serialize(*p);
  });
  REQUIRE(!name.empty());
  c.writeBin();
  const std::string fragment = fmt::format("tensor '{}' expects weight", name);
  expectToolRejects(CTXKIT_CTXRUN, {c.model().string()}, {kBinName, fragment, "(layout float16-widened)"});
  expectToolRejects(CTXKIT_CTXINSPECT, {c.model().string(), "--verify"}, {kBinName, fragment});
}

TEST_CASE("rule 14: metadata strings are data, never evaluated", "[loader_rules][rule14]") {
  const fs::path cwd = fs::current_path();
  SECTION("a hostile name in a rejected file comes back verbatim in the message") {
    Crafted c;
    c.bytes = rebuild(c.bytes, [](GraphEdit& g) {
      if (g.index <= 1) g.name = kHostile + (g.index == 0 ? "A" : "B");
    });
    c.editGraph(1, [&](auto& g) { g.name = getGraph(c.bytes, 0).name; });
    c.expectRejected({fmt::format("graph name '{}A' appears twice (graphs 0 and 1)", kHostile)});
  }
  SECTION("hostile names in a valid file are listed verbatim and the deployment runs") {
    Crafted c;
    std::map<std::string, std::string> renamed;
    c.bytes = rebuild(c.bytes, [&](GraphEdit& g) {
      std::string fresh = fmt::format("{}#{}", kHostile, g.index);
      renamed[g.name] = fresh;
      g.name = fresh;
      g.source = kHostile + ".onnx";
    });
    c.writeBin();
    for (const auto& m : {kPrefillModel, kDecodeModel})
      editContextNodes(c.model(m), [&](ir::Node& n) {
        std::string old = n.attrs.getString("partition_name");
        REQUIRE(renamed.count(old));
        n.attrs.set(ir::Attribute::makeString("partition_name", renamed[old]));
        // The graphs' source model, renamed too: a node runs only graphs compiled from its own model.
        n.attrs.set(ir::Attribute::makeString("onnx_model_filename", kHostile + ".onnx"));
      });
    auto r = runTool(CTXKIT_CTXINSPECT, {c.model().string(), c.model(kDecodeModel).string(), "--verify", "--json"});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    auto report = nlohmann::json::parse(r.out);
    std::set<std::string> listed, expected;
    for (const auto& [old, fresh] : renamed) expected.insert(fresh);
    for (const auto& ctx : report.at("context_binaries"))
      for (const auto& g : ctx.at("graphs")) {
        listed.insert(g.at("name").get<std::string>());
        CHECK(g.at("source_model").get<std::string>() == kHostile + ".onnx");
      }
    CHECK(listed == expected);
    expectToolAccepts(CTXKIT_CTXRUN, {c.model().string()});
    CHECK_FALSE(fs::exists(c.dir() / "PWNED"));
  }
  CHECK_FALSE(fs::exists(cwd / "PWNED"));
}

TEST_CASE("rule 15: ONNX subgraph nesting is bounded", "[loader_rules][rule15]") {
  TempDir dir("loader_rule_nesting");
  SECTION("70 nested If subgraphs are refused with the limit named") {
    const fs::path model = dir / "deep.onnx";
    writeText(model, nestedIfModel(70));
    const std::vector<std::string> fragments = {"deep.onnx", "subgraphs are nested more than 64 levels deep"};
    expectToolRejects(CTXKIT_CTXRUN, {model.string()}, fragments);
    expectToolRejects(CTXKIT_CTXINSPECT, {model.string()}, fragments);
    expectToolRejects(CTXKIT_CTXGEN, {model.string(), "-o", (dir / "out").string()}, fragments);
  }
  SECTION("a shallower model gets past the depth check (the limit is where it says)") {
    const fs::path model = dir / "shallow.onnx";
    writeText(model, nestedIfModel(60));
    auto r = runTool(CTXKIT_CTXRUN, {model.string()});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 1);  // the sketch graph is not runnable, but not for its depth
    CHECK_THAT(r.err, !Catch::Contains("nested more than"));
  }
  SECTION("100000 nested subgraphs (a stack-overflow bomb) are refused cleanly") {
    const fs::path model = dir / "bomb.onnx";
    writeText(model, nestedIfModel(100000));
    const std::vector<std::string> fragments = {"bomb.onnx"};
    expectToolRejects(CTXKIT_CTXRUN, {model.string()}, fragments);
    expectToolRejects(CTXKIT_CTXINSPECT, {model.string()}, fragments);
  }
}

TEST_CASE("rule 13: a weight rescaled at load whose recipe would read or write out of bounds is refused",
          "[loader_rules][rule13]") {
  // A weightless tiny_cnn: stage 2's folded Conv weight is computed at load by Cast, Mul (by a stored scale) and Cast
  // (docs/weight-sharing.md#derived-weights). A crafted .bin changes that recipe; every change is refused at load,
  // naming the file, before any op runs.
  TempDir temp("loader_rule_recipe");
  const fs::path dir = temp.path();
  fs::copy_file(sampleModel("tiny_cnn"), dir / "tiny_cnn.onnx");
  auto compiled =
      runTool(CTXKIT_CTXGEN, {(dir / "tiny_cnn.onnx").string(), "--weightless", "--target", "cpu", "-o", dir.string(), "-q"});
  REQUIRE(compiled.exitCode == 0);
  const fs::path bin = dir / "tiny_cnn_ctxkit.bin", model = dir / "tiny_cnn_ctx.onnx";
  const std::vector<std::byte> real = readAll(bin);
  const uint64_t weightCount = getHeader(real).weightCount;
  expectToolAccepts(CTXKIT_CTXRUN, {model.string()});
  // The recipe: the load-time ops, widen (Cast), scale (Mul), narrow (Cast), in this order.
  using Edit = std::function<void(program::Program&, program::Op& widen, program::Op& scale, program::Op& narrow)>;
  auto craft = [&](const Edit& edit) {
    bool found = false;
    auto bytes = rebuild(real, [&](GraphEdit& g) {
      auto p = program::deserialize(g.program, weightCount, "program");
      REQUIRE(p.isOk());
      std::vector<size_t> recipe;
      for (size_t i = 0; i < p->ops.size(); ++i)
        if (program::isLoadTimeOp(*p, p->ops[i])) recipe.push_back(i);
      if (recipe.size() != 3) return;
      REQUIRE(p->ops[recipe[0]].kind == ir::OpKind::Cast);
      REQUIRE(p->ops[recipe[1]].kind == ir::OpKind::Mul);
      REQUIRE(p->ops[recipe[2]].kind == ir::OpKind::Cast);
      edit(*p, p->ops[recipe[0]], p->ops[recipe[1]], p->ops[recipe[2]]);
      g.program = program::serialize(*p);
      found = true;
    });
    REQUIRE(found);
    writeBytes(bin, bytes);
    format::testing::rebind(model, bytes, bin.filename().string());
  };
  auto refused = [&](const std::vector<std::string>& fragments) {
    std::vector<std::string> all = fragments;
    all.push_back(bin.filename().string());
    expectToolRejects(CTXKIT_CTXRUN, {model.string()}, all);
    expectToolRejects(CTXKIT_CTXINSPECT, {model.string(), "--verify"}, all);
  };

  // The rescaled weight recorded twice as large as the recipe computes: a Conv would read past it.
  craft([](program::Program& p, program::Op&, program::Op&, program::Op& narrow) {
    auto& t = p.tensors[static_cast<size_t>(narrow.outputs[0])];
    t.shape[0] *= 2;
    t.size *= 2;
  });
  refused({"is recorded as float32 32x8x3x3 but computes float32 16x8x3x3"});

  // A float64 step whose dimensions overflow the size arithmetic.
  craft([](program::Program& p, program::Op&, program::Op& scale, program::Op&) {
    auto& t = p.tensors[static_cast<size_t>(scale.outputs[0])];
    t.shape.assign({int64_t{1} << 40, int64_t{1} << 40, 3, 3});
  });
  refused({"bytes recorded but shape 1099511627776x1099511627776x3x3 of float64"});

  // The scale read from a weight that is not a per-channel scale (the folded bias, 16 floats): it does not broadcast.
  craft([](program::Program& p, program::Op&, program::Op& scale, program::Op&) {
    for (size_t t = 0; t < p.tensors.size(); ++t)
      if (p.tensors[t].kind == program::TensorKind::Weight && p.tensors[t].shape.size() == 1 &&
          p.tensors[t].shape[0] == 16)
        scale.inputs[1] = static_cast<int32_t>(t);
  });
  refused({"op "});

  // The recipe reading the run's input instead of a weight.
  craft([](program::Program& p, program::Op& widen, program::Op&, program::Op&) { widen.inputs[0] = p.inputs[0]; });
  refused({"a load-time op reads tensor"});
}
