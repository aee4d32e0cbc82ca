// Models with If, Loop and Scan built in tests (no outside material), with their feeds and the outputs worked out by
// hand from the ONNX operator definitions: the runtime tests check them, the allocation report runs them.
#pragma once

#include "graph_builder.h"
#include "ir/graph.h"

#include <memory>
#include <string>
#include <vector>

namespace ctxkit::testing::control_flow {

using ir::ElemType;

inline ir::ValueInfo value(const std::string& name, ElemType type, std::vector<int64_t> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  v.shape.emplace();
  for (int64_t d : dims) v.shape->push_back(ir::Dim::known(d));
  return v;
}

// A value whose shape changes from one iteration to the next.
inline ir::ValueInfo unshaped(const std::string& name, ElemType type) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  return v;
}

inline ir::Node op(const std::string& type, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  return node(type, std::move(inputs), std::move(outputs));
}

inline ir::Node withGraph(ir::Node n, const std::string& attr, std::shared_ptr<ir::Graph> g) {
  n.attrs.set(ir::Attribute::makeGraph(attr, std::move(g)));
  return n;
}

inline ir::Initializer floats(const std::string& name, ir::Shape shape, std::vector<float> v) {
  return {name, ir::Tensor::fromVector(ElemType::Float, std::move(shape), v), std::nullopt};
}
inline ir::Initializer int64s(const std::string& name, ir::Shape shape, std::vector<int64_t> v) {
  return {name, ir::Tensor::fromVector(ElemType::Int64, std::move(shape), v), std::nullopt};
}
inline ir::Initializer boolInit(const std::string& name, bool b) {
  return {name, ir::Tensor::fromVector(ElemType::Bool, {}, std::vector<uint8_t>{b}), std::nullopt};
}

inline ir::Tensor floatTensor(ir::Shape shape, std::vector<float> v) {
  return ir::Tensor::fromVector(ElemType::Float, std::move(shape), v);
}
inline ir::Tensor boolScalar(bool b) { return ir::Tensor::fromVector(ElemType::Bool, {}, std::vector<uint8_t>{b}); }
inline ir::Tensor int64Scalar(int64_t v) {
  return ir::Tensor::fromVector(ElemType::Int64, {}, std::vector<int64_t>{v});
}

inline ir::Model modelOf(ir::Graph g) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  m.producerName = "ctxkit-tests";
  m.graph = std::move(g);
  return m;
}

// y = 2 * (cond ? x*x + 1 : x*x - x)
inline ir::Model ifModel() {
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
inline ir::Model loopModel() {
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
  g.initializers.push_back(int64s("trips", {}, {3}));
  g.initializers.push_back(boolInit("go", true));
  g.nodes.push_back(op("Abs", {"v0"}, {"start"}));
  g.nodes.push_back(withGraph(op("Loop", {"trips", "go", "start"}, {"v_final", "all"}), "body", body));
  g.nodes.push_back(op("Neg", {"v_final"}, {"neg"}));
  g.nodes.push_back(op("Relu", {"neg"}, {"r"}));
  g.outputs = {value("r", ElemType::Float, {2}), value("all", ElemType::Float, {3, 2})};
  return modelOf(std::move(g));
}

// Running sums over the rows of xs*2: the final sum and every partial one.
inline ir::Model scanModel() {
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
  ir::Node scan = withGraph(op("Scan", {"s0", "doubled"}, {"s_final", "partials"}), "body", body);
  scan.attrs.set(ir::Attribute::makeInt("num_scan_inputs", 1));
  g.nodes.push_back(std::move(scan));
  g.outputs = {value("s_final", ElemType::Float, {2}), value("partials", ElemType::Float, {3, 2})};
  return modelOf(std::move(g));
}

// A loop-carried value that grows: v = Concat(v, x) `trips` times, with the iteration number as a float scan output
// (and with `scanGrowing`, v too: the scan outputs of one Loop must all have one shape, so that is an error).
inline ir::Model loopGrowModel(bool scanGrowing = false, int64_t trips = 3) {
  auto body = std::make_shared<ir::Graph>();
  body->name = "grow_body";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  unshaped("v_in", ElemType::Float)};
  ir::Node concat = op("Concat", {"v_in", "x"}, {"v_out"});
  concat.attrs.set(ir::Attribute::makeInt("axis", 0));
  body->nodes.push_back(std::move(concat));
  ir::Node cast = op("Cast", {"i"}, {"i_f"});
  cast.attrs.set(ir::Attribute::makeInt("to", 1));
  body->nodes.push_back(std::move(cast));
  body->outputs = {value("c_in", ElemType::Bool, {}), unshaped("v_out", ElemType::Float),
                   value("i_f", ElemType::Float, {})};
  if (scanGrowing) body->outputs.push_back(unshaped("v_out", ElemType::Float));
  ir::Graph g;
  g.name = "loop_grow";
  g.inputs = {value("x", ElemType::Float, {2}), value("v0", ElemType::Float, {1})};
  g.initializers.push_back(int64s("trips", {}, {trips}));
  g.nodes.push_back(withGraph(op("Loop", {"trips", "", "v0"}, {"v_final", "iters"}), "body", body));
  g.outputs = {value("v_final", ElemType::Float, {1 + 2 * trips}), value("iters", ElemType::Float, {trips})};
  if (scanGrowing) {
    g.nodes.back().outputs.push_back("vs");
    g.outputs.push_back(unshaped("vs", ElemType::Float));
  }
  return modelOf(std::move(g));
}

// No trip count: runs while i < limit (fed), v += 1 each time, v as a scan output; `go` false runs it zero times.
inline ir::Model loopCondModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "cond_body";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  value("v_in", ElemType::Float, {2})};
  body->initializers.push_back(floats("one", {2}, {1, 1}));
  body->nodes.push_back(op("Less", {"i", "limit"}, {"c_out"}));
  body->nodes.push_back(op("Add", {"v_in", "one"}, {"v_out"}));
  body->outputs = {value("c_out", ElemType::Bool, {}), value("v_out", ElemType::Float, {2}),
                   value("v_out", ElemType::Float, {2})};
  ir::Graph g;
  g.name = "loop_cond";
  g.inputs = {value("go", ElemType::Bool, {}), value("limit", ElemType::Int64, {}),
              value("v0", ElemType::Float, {2})};
  g.nodes.push_back(withGraph(op("Loop", {"", "go", "v0"}, {"v_final", "each"}), "body", body));
  g.outputs = {value("v_final", ElemType::Float, {2}), unshaped("each", ElemType::Float)};
  return modelOf(std::move(g));
}

// Loop-carried values passed through swapped (a, b -> b, a), two carried outputs and a scan output of one value
// (s = 2a + b): hand-on by copy, by buffer swap and of one value twice.
inline ir::Model loopSwapModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "swap_body";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  value("a_in", ElemType::Float, {1}), value("b_in", ElemType::Float, {1}),
                  value("c0_in", ElemType::Float, {1}), value("d0_in", ElemType::Float, {1})};
  body->initializers.push_back(floats("two", {1}, {2}));
  body->nodes.push_back(op("Mul", {"a_in", "two"}, {"a2"}));
  body->nodes.push_back(op("Add", {"a2", "b_in"}, {"s"}));
  body->outputs = {value("c_in", ElemType::Bool, {}), value("b_in", ElemType::Float, {1}),
                   value("a_in", ElemType::Float, {1}), value("s", ElemType::Float, {1}),
                   value("s", ElemType::Float, {1}), value("s", ElemType::Float, {1})};
  ir::Graph g;
  g.name = "loop_swap";
  g.inputs = {value("a0", ElemType::Float, {1}), value("b0", ElemType::Float, {1})};
  g.initializers.push_back(int64s("trips", {}, {3}));
  g.initializers.push_back(floats("zero", {1}, {0}));
  g.nodes.push_back(
      withGraph(op("Loop", {"trips", "", "a0", "b0", "zero", "zero"}, {"a", "b", "c", "d", "ss"}), "body", body));
  g.outputs = {value("a", ElemType::Float, {1}), value("b", ElemType::Float, {1}), value("c", ElemType::Float, {1}),
               value("d", ElemType::Float, {1}), value("ss", ElemType::Float, {3, 1})};
  return modelOf(std::move(g));
}

// An If whose then branch holds a Loop (v = v * x twice, x read from the top level two graphs up) and whose else
// branch negates x.
inline ir::Model ifLoopModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "if_loop_body";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  value("v_in", ElemType::Float, {2})};
  body->nodes.push_back(op("Mul", {"v_in", "x"}, {"v_out"}));
  body->outputs = {value("c_in", ElemType::Bool, {}), value("v_out", ElemType::Float, {2})};
  auto thenG = std::make_shared<ir::Graph>();
  thenG->name = "then";
  thenG->initializers.push_back(int64s("trips", {}, {2}));
  thenG->initializers.push_back(floats("v0", {2}, {1, 1}));
  thenG->nodes.push_back(withGraph(op("Loop", {"trips", "", "v0"}, {"t_out"}), "body", body));
  thenG->outputs = {value("t_out", ElemType::Float, {2})};
  auto elseG = std::make_shared<ir::Graph>();
  elseG->name = "else";
  elseG->nodes.push_back(op("Neg", {"x"}, {"e_out"}));
  elseG->outputs = {value("e_out", ElemType::Float, {2})};
  ir::Graph g;
  g.name = "if_loop";
  g.inputs = {value("cond", ElemType::Bool, {}), value("x", ElemType::Float, {2})};
  ir::Node branch = withGraph(op("If", {"cond"}, {"y"}), "then_branch", thenG);
  branch.attrs.set(ir::Attribute::makeGraph("else_branch", elseG));
  g.nodes.push_back(std::move(branch));
  g.outputs = {value("y", ElemType::Float, {2})};
  return modelOf(std::move(g));
}

// A Loop whose body scans the rows of xs (read from the outer graph) into a running sum carried across iterations,
// the Scan's partial sums as the Loop's scan output.
inline ir::Model loopScanModel() {
  auto scanBody = std::make_shared<ir::Graph>();
  scanBody->name = "inner_scan";
  scanBody->inputs = {value("s_in", ElemType::Float, {2}), value("row", ElemType::Float, {2})};
  scanBody->nodes.push_back(op("Add", {"s_in", "row"}, {"s_out"}));
  scanBody->nodes.push_back(op("Identity", {"s_out"}, {"partial"}));
  scanBody->outputs = {value("s_out", ElemType::Float, {2}), value("partial", ElemType::Float, {2})};
  auto body = std::make_shared<ir::Graph>();
  body->name = "outer_loop";
  body->inputs = {value("i", ElemType::Int64, {}), value("c_in", ElemType::Bool, {}),
                  value("v_in", ElemType::Float, {2})};
  ir::Node scan = withGraph(op("Scan", {"v_in", "xs"}, {"v_out", "partials"}), "body", scanBody);
  scan.attrs.set(ir::Attribute::makeInt("num_scan_inputs", 1));
  body->nodes.push_back(std::move(scan));
  body->outputs = {value("c_in", ElemType::Bool, {}), value("v_out", ElemType::Float, {2}),
                   value("partials", ElemType::Float, {3, 2})};
  ir::Graph g;
  g.name = "loop_scan";
  g.inputs = {value("xs", ElemType::Float, {3, 2}), value("v0", ElemType::Float, {2})};
  g.initializers.push_back(int64s("trips", {}, {2}));
  g.nodes.push_back(withGraph(op("Loop", {"trips", "", "v0"}, {"v_final", "all"}), "body", body));
  g.outputs = {value("v_final", ElemType::Float, {2}), value("all", ElemType::Float, {2, 3, 2})};
  return modelOf(std::move(g));
}

// Scan along axis 1 in reverse, its output stacked along axis 1 in reverse too: the running sums of each row of xs
// from the right. (The Identity matters to ORT: ORT 1.30's CPU EP returns wrong values for a Scan body giving one
// value as both its state and its scan output.)
inline ir::Model scanAxesModel() {
  auto body = std::make_shared<ir::Graph>();
  body->name = "axes_body";
  body->inputs = {value("s_in", ElemType::Float, {2}), value("col", ElemType::Float, {2})};
  body->nodes.push_back(op("Add", {"s_in", "col"}, {"s_out"}));
  body->nodes.push_back(op("Identity", {"s_out"}, {"sum"}));
  body->outputs = {value("s_out", ElemType::Float, {2}), value("sum", ElemType::Float, {2})};
  ir::Graph g;
  g.name = "scan_axes";
  g.inputs = {value("s0", ElemType::Float, {2}), value("xs", ElemType::Float, {2, 3})};
  ir::Node scan = withGraph(op("Scan", {"s0", "xs"}, {"s_final", "sums"}), "body", body);
  scan.attrs.set(ir::Attribute::makeInt("num_scan_inputs", 1));
  scan.attrs.set(ir::Attribute::makeInts("scan_input_axes", {1}));
  scan.attrs.set(ir::Attribute::makeInts("scan_input_directions", {1}));
  scan.attrs.set(ir::Attribute::makeInts("scan_output_axes", {1}));
  scan.attrs.set(ir::Attribute::makeInts("scan_output_directions", {1}));
  g.nodes.push_back(std::move(scan));
  g.outputs = {value("s_final", ElemType::Float, {2}), value("sums", ElemType::Float, {2, 3})};
  return modelOf(std::move(g));
}

struct Case {
  std::string name;
  ir::Model model;
  std::vector<ir::Tensor> feeds;
  std::vector<std::vector<float>> expected;  // per output, its values (float32)
};

inline std::vector<Case> cases() {
  std::vector<Case> c;
  // x = [1, -2, 3]: x*x = [1, 4, 9]; then: 2*(x*x+1); else: 2*(x*x-x).
  c.push_back({"if_true", ifModel(), {boolScalar(true), floatTensor({3}, {1, -2, 3})}, {{4, 10, 20}}});
  c.push_back({"if_false", ifModel(), {boolScalar(false), floatTensor({3}, {1, -2, 3})}, {{0, 12, 12}}});
  // |v0| = [10, 20], x = [1, -2]: v = [11, 18], [12, 16], [13, 14]; r = relu(-v) = 0; all = -v per iteration.
  c.push_back({"loop", loopModel(), {floatTensor({2}, {1, -2}), floatTensor({2}, {-10, 20})},
               {{0, 0}, {-11, -18, -12, -16, -13, -14}}});
  // rows*2 = [2, 4], [6, 8], [-2, 0]; s0 = [1, 1]: partials [3, 5], [9, 13], [7, 13].
  c.push_back({"scan", scanModel(), {floatTensor({2}, {1, 1}), floatTensor({3, 2}, {1, 2, 3, 4, -1, 0})},
               {{7, 13}, {3, 5, 9, 13, 7, 13}}});
  // [5] then x = [2, 3] appended three times; iterations 0, 1, 2.
  c.push_back({"loop_grow", loopGrowModel(), {floatTensor({2}, {2, 3}), floatTensor({1}, {5})},
               {{5, 2, 3, 2, 3, 2, 3}, {0, 1, 2}}});
  // Eleven times (the carried value's buffers are outgrown in a different order than with three).
  {
    std::vector<float> v{5}, iters;
    for (int k = 0; k < 11; ++k) {
      v.insert(v.end(), {2, 3});
      iters.push_back(static_cast<float>(k));
    }
    c.push_back({"loop_grow_long", loopGrowModel(false, 11), {floatTensor({2}, {2, 3}), floatTensor({1}, {5})},
                 {v, iters}});
  }
  // limit 2: i = 0, 1, 2 run (the condition i < limit is false after the third); v0 + 1, + 2, + 3.
  c.push_back({"loop_cond", loopCondModel(), {boolScalar(true), int64Scalar(2), floatTensor({2}, {1, -1})},
               {{4, 2}, {2, 0, 3, 1, 4, 2}}});
  // The condition false at once: no iteration, v0 back and an empty scan output.
  c.push_back({"loop_cond_false", loopCondModel(), {boolScalar(false), int64Scalar(2), floatTensor({2}, {1, -1})},
               {{1, -1}, {}}});
  // limit -1: one iteration (i = 0 is not < -1).
  c.push_back({"loop_cond_once", loopCondModel(), {boolScalar(true), int64Scalar(-1), floatTensor({2}, {1, -1})},
               {{2, 0}, {2, 0}}});
  // a, b = 1, 10: s = 12, (a, b) = (10, 1); s = 21, (1, 10); s = 12, (10, 1).
  c.push_back({"loop_swap", loopSwapModel(), {floatTensor({1}, {1}), floatTensor({1}, {10})},
               {{10}, {1}, {12}, {12}, {12, 21, 12}}});
  // then: [1, 1] * x * x; else: -x.
  c.push_back({"if_loop_true", ifLoopModel(), {boolScalar(true), floatTensor({2}, {3, -2})}, {{9, 4}}});
  c.push_back({"if_loop_false", ifLoopModel(), {boolScalar(false), floatTensor({2}, {3, -2})}, {{-3, 2}}});
  // rows [1, 2], [3, 4], [5, 6] (sum [9, 12]); v0 = [0, 1]: first pass partials [1, 3], [4, 7], [9, 13]; second
  // pass from [9, 13]: [10, 15], [13, 19], [18, 25].
  c.push_back({"loop_scan", loopScanModel(), {floatTensor({3, 2}, {1, 2, 3, 4, 5, 6}), floatTensor({2}, {0, 1})},
               {{18, 25}, {1, 3, 4, 7, 9, 13, 10, 15, 13, 19, 18, 25}}});
  // xs = [[1, 2, 3], [4, 5, 6]] scanned by column from the right, s0 = [0, 0]: sums [3, 6], [5, 11], [6, 15]
  // placed from the right: [[6, 5, 3], [15, 11, 6]].
  c.push_back({"scan_axes", scanAxesModel(), {floatTensor({2}, {0, 0}), floatTensor({2, 3}, {1, 2, 3, 4, 5, 6})},
               {{6, 15}, {6, 5, 3, 15, 11, 6}}});
  return c;
}

}  // namespace ctxkit::testing::control_flow
