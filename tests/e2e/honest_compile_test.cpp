// End-to-end: an op, element type or attribute value the runtime cannot execute is a ctxgen error naming op,
// opset, node and type, never a _ctx.onnx that fails at load (docs/ctxgen.md#errors), on both built-in targets.
#include "onnx_io/onnx_io.h"
#include "tool_runner.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using ctxkit::testing::runTool;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

ir::ValueInfo value(const std::string& name, ir::ElemType type) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  v.shape = std::vector<ir::Dim>{ir::Dim::known(2), ir::Dim::known(3)};
  return v;
}

// x -> Relu -> mid -> <op under test> -> y, with the op under test named "suspect".
fs::path writeModel(const TempDir& dir, const std::string& stem, ir::Node suspect, ir::ElemType type,
                    std::vector<ir::OpsetImport> extraOpsets = {}) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {ir::OpsetImport{"", 17}};
  for (auto& o : extraOpsets) m.opsets.push_back(o);
  m.graph.name = stem;
  m.graph.inputs = {value("x", type)};
  m.graph.outputs = {value("y", type)};
  ir::Node relu;
  relu.name = "first";
  relu.opType = "Relu";
  relu.kind = ir::opKindFromName("", "Relu");
  relu.opset = 17;
  relu.inputs = {"x"};
  relu.outputs = {"mid"};
  suspect.name = "suspect";
  suspect.inputs = {"mid"};
  suspect.outputs = {"y"};
  m.graph.nodes = {relu, suspect};
  fs::path p = dir / (stem + ".onnx");
  REQUIRE(onnx_io::saveModel(m, p));
  return p;
}

ir::Node op(const std::string& domain, const std::string& type, int64_t opset) {
  ir::Node n;
  n.opType = type;
  n.domain = domain;
  n.kind = ir::opKindFromName(domain, type);
  n.opset = opset;
  return n;
}

// ctxgen fails (exit 1) naming every piece, and writes no output under a final name; --dry-run fails the same way
// (it must fail exactly when a real compile would).
void requireRefused(const TempDir& dir, const fs::path& model, const std::string& target,
                    const std::vector<std::string>& mentions) {
  for (bool dryRun : {true, false}) {
    std::vector<std::string> args{model.string(), "--target", target, "-o", (dir / "out").string()};
    if (dryRun) args.push_back("--dry-run");
    auto r = runTool(CTXKIT_CTXGEN, args);
    INFO(target << (dryRun ? " --dry-run: " : ": ") << r.out << r.err);
    CHECK(r.exitCode == 1);
    for (const auto& m : mentions) CHECK(r.err.find(m) != std::string::npos);
    CHECK(r.err.find(model.filename().string()) != std::string::npos);
  }
  const fs::path stem = model.stem();
  CHECK(!fs::exists(dir / "out" / (stem.string() + "_ctx.onnx")));
  CHECK(!fs::exists(dir / "out" / (stem.string() + "_ctxkit.bin")));
}

}  // namespace

TEST_CASE("an op the runtime has no kernel for is a compile error naming op, opset, node and type", "[e2e][honest]") {
  TempDir dir("honest_op");
  fs::path custom = writeModel(dir, "custom", op("com.example", "Frobnicate", 1), ir::ElemType::Float,
                               {ir::OpsetImport{"com.example", 1}});
  fs::path unknownOnnx = writeModel(dir, "strnorm", op("", "StringNormalizer", 17), ir::ElemType::Float);
  for (const char* target : {"npu-sim", "cpu"}) {
    requireRefused(dir, custom, target, {"'suspect'", "Frobnicate", "opset 1", "float32", "no kernel"});
    requireRefused(dir, unknownOnnx, target, {"'suspect'", "StringNormalizer", "opset 17", "float32", "no kernel"});
  }
}

TEST_CASE("an element type the op's kernel refuses is a compile error naming the type", "[e2e][honest]") {
  TempDir dir("honest_type");
  // Sin is defined for floating-point types only; the model says int32 (the ONNX checker is not asked).
  fs::path m = writeModel(dir, "sin_int", op("", "Sin", 17), ir::ElemType::Int32);
  for (const char* target : {"npu-sim", "cpu"})
    requireRefused(dir, m, target, {"'suspect'", "Sin", "opset 17", "int32"});
}

TEST_CASE("an attribute value the op's decoder refuses is a compile error naming the attribute", "[e2e][honest]") {
  TempDir dir("honest_attr");
  ir::Node lrn = op("", "LRN", 17);
  lrn.attrs.set(ir::Attribute::makeInt("size", 0));  // LRN needs size >= 1
  fs::path m = writeModel(dir, "lrn_size0", lrn, ir::ElemType::Float);
  for (const char* target : {"npu-sim", "cpu"}) requireRefused(dir, m, target, {"'suspect'", "LRN", "opset 17", "size"});
}

TEST_CASE("the same models run once the op is executable: the refusal is about the op, not the model", "[e2e][honest]") {
  TempDir dir("honest_ok");
  fs::path m = writeModel(dir, "sin_float", op("", "Sin", 17), ir::ElemType::Float);
  for (const char* target : {"npu-sim", "cpu"}) {
    auto r = runTool(CTXKIT_CTXGEN, {m.string(), "--target", target, "-o", (dir / target).string()});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    auto run = runTool(CTXKIT_CTXRUN, {(dir / target / "sin_float_ctx.onnx").string()});
    INFO(run.out << run.err);
    CHECK(run.exitCode == 0);
  }
}
