// Writes a small detector head whose shapes depend on values, for the ONNX Runtime oracle (detector_head.sh): scores
// and boxes are prepared by static nodes (compiled), then NonMaxSuppression (at most 4 boxes of each of 3 classes:
// 12 rows), a Gather of the selected boxes, a two-layer box head (16 KiB of weights, left on the fallback path) and box
// decoding; NonZero of the scores above 0.7 (at most 3 x 48), and TopK of the flattened scores with k = that count
// (a computed k: at most 48). Three input sets beside it select none, some and the most rows each op can give.
// With --rows: the row-independent ops a bounded program runs behind a root, each on rows NonZero selects (at most
// 16) and TopK with k = that count: elementwise ops, Gather on rows, Concat along rows, MatMul and Gemm over rows,
// Softmax over a static axis, RoiAlign over the selected boxes (opset 17). With --rows-behind-if: the same, the rows
// reaching those ops through an If (a fallback node), as in torchvision's detectors.
// usage: make_detector_head [--rows | --rows-behind-if] OUT.onnx INPUT_DIR
//        (writes INPUT_DIR/{none,some,all}/input_*.npy)
#include "../common/graph_builder.h"
#include "ir/npy.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>
#include <filesystem>
#include <string>

using namespace ctxkit;
using namespace ctxkit::testing;

namespace {

constexpr int64_t kOpset = 13, kBoxes = 16, kClasses = 3, kPerClass = 4, kHidden = 128, kHead = 32;

template <typename T>
ir::Initializer init(const std::string& name, ir::ElemType type, ir::Shape shape, std::vector<T> v) {
  return ir::Initializer{name, ir::Tensor::fromVector(type, std::move(shape), v), std::nullopt};
}

// Deterministic weights in [-0.5, 0.5).
ir::Initializer weight(const std::string& name, ir::Shape shape, size_t seed) {
  std::vector<float> v(static_cast<size_t>(ir::elementCount(shape).value_or(0)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((i * 2654435761u + seed * 40503u) % 1000) / 1000.0f - 0.5f;
  return init(name, ir::ElemType::Float, std::move(shape), v);
}

ir::Node op(const std::string& type, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  return node(type, std::move(inputs), std::move(outputs), kOpset);
}
ir::Node gather(const std::string& data, const std::string& indices, const std::string& out, int64_t axis) {
  ir::Node n = op("Gather", {data, indices}, {out});
  n.attrs.set(ir::Attribute::makeInt("axis", axis));
  return n;
}

ir::ValueInfo dynamicOutput(const std::string& name, ir::ElemType type, std::vector<ir::Dim> shape) {
  ir::ValueInfo v;
  v.name = name;
  v.type = type;
  v.shape = std::move(shape);
  return v;
}

ir::Model detectorHead() {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", kOpset}};
  ir::Graph& g = m.graph;
  g.name = "detector_head";
  g.inputs = {floatValue("boxes", dims({1, kBoxes, 4})), floatValue("logits", dims({1, kClasses, kBoxes}))};
  g.initializers = {
      init("bscale", ir::ElemType::Float, {4}, std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}),
      init("max_out", ir::ElemType::Int64, {1}, std::vector<int64_t>{kPerClass}),
      init("iou", ir::ElemType::Float, {1}, std::vector<float>{0.5f}),
      init("score_thr", ir::ElemType::Float, {1}, std::vector<float>{0.6f}),
      init("col2", ir::ElemType::Int64, {}, std::vector<int64_t>{2}),
      init("rows_shape", ir::ElemType::Int64, {2}, std::vector<int64_t>{kBoxes, 4}),
      weight("w1", {4, kHidden}, 1),
      weight("b1", {kHidden}, 2),
      weight("w2", {kHidden, kHead}, 3),
      weight("b2", {kHead}, 4),
      init("s0", ir::ElemType::Int64, {1}, std::vector<int64_t>{0}),
      init("s4", ir::ElemType::Int64, {1}, std::vector<int64_t>{4}),
      init("s1", ir::ElemType::Int64, {1}, std::vector<int64_t>{1}),
      init("s2", ir::ElemType::Int64, {1}, std::vector<int64_t>{2}),
      init("tenth", ir::ElemType::Float, {}, std::vector<float>{0.1f}),
      init("thr2", ir::ElemType::Float, {}, std::vector<float>{0.7f}),
      init("flat_shape", ir::ElemType::Int64, {1}, std::vector<int64_t>{-1}),
  };
  g.nodes = {
      op("Sigmoid", {"logits"}, {"scores"}),
      op("Mul", {"boxes", "bscale"}, {"sboxes"}),
      op("NonMaxSuppression", {"sboxes", "scores", "max_out", "iou", "score_thr"}, {"selected"}),
      gather("selected", "col2", "box_index", 1),
      op("Reshape", {"sboxes", "rows_shape"}, {"rows"}),
      gather("rows", "box_index", "picked", 0),
      op("MatMul", {"picked", "w1"}, {"h1"}),
      op("Add", {"h1", "b1"}, {"h1b"}),
      op("Relu", {"h1b"}, {"h2"}),
      op("MatMul", {"h2", "w2"}, {"h3"}),
      op("Add", {"h3", "b2"}, {"head"}),
      op("Slice", {"head", "s0", "s4", "s1"}, {"deltas"}),
      op("Mul", {"deltas", "tenth"}, {"scaled"}),
      op("Add", {"picked", "scaled"}, {"decoded"}),
      op("Greater", {"scores", "thr2"}, {"mask"}),
      op("NonZero", {"mask"}, {"nz"}),
      op("Transpose", {"nz"}, {"above"}),
      op("Shape", {"nz"}, {"nz_shape"}),
      op("Slice", {"nz_shape", "s1", "s2"}, {"k"}),
      op("Reshape", {"scores", "flat_shape"}, {"flat"}),
      op("TopK", {"flat", "k"}, {"topv", "topi"}),
  };
  g.nodes[16].attrs.set(ir::Attribute::makeInts("perm", {1, 0}));
  const ir::Dim n = ir::Dim::named("selected");
  g.outputs = {dynamicOutput("selected", ir::ElemType::Int64, {n, ir::Dim::known(3)}),
               dynamicOutput("head", ir::ElemType::Float, {n, ir::Dim::known(kHead)}),
               dynamicOutput("decoded", ir::ElemType::Float, {n, ir::Dim::known(4)}),
               dynamicOutput("above", ir::ElemType::Int64, {ir::Dim::named("above"), ir::Dim::known(3)}),
               dynamicOutput("topv", ir::ElemType::Float, {ir::Dim::named("k")}),
               dynamicOutput("topi", ir::ElemType::Int64, {ir::Dim::named("k")})};
  return m;
}

// boxes: box i at (y, x) = (10 i, 0), 5 high and wide when apart (no two overlap), else 8 + (i % 5) high and wide at
// 3 i (neighbours overlap). logits: `base` + 0.01 i for element i (distinct: no ties in TopK), plus a spread of
// +-3 when `spread`.
Status writeInputs(const std::filesystem::path& dir, bool apart, float base, bool spread) {
  std::filesystem::create_directories(dir);
  std::vector<float> boxes(static_cast<size_t>(kBoxes * 4)), logits(static_cast<size_t>(kClasses * kBoxes));
  for (int64_t i = 0; i < kBoxes; ++i) {
    const float y = apart ? 10.0f * static_cast<float>(i) : 3.0f * static_cast<float>(i);
    const float size = apart ? 5.0f : 8.0f + static_cast<float>(i % 5);
    const auto b = static_cast<size_t>(i * 4);
    boxes[b] = y;
    boxes[b + 1] = 0.0f;
    boxes[b + 2] = y + size;
    boxes[b + 3] = size;
  }
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = base + 0.01f * static_cast<float>(i) +
                (spread ? static_cast<float>((i * 7919) % 61) / 10.0f - 3.0f : 0.0f);
  CTX_RETURN_IF_ERROR(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {1, kBoxes, 4}, boxes),
                                  dir / "input_0.npy"));
  return ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {1, kClasses, kBoxes}, logits), dir / "input_1.npy");
}

constexpr int64_t kRows = 16, kFeat = 8, kImage = 12;

// scores [16] > 0.5 -> NonZero -> Squeeze -> rows [<=16]; k = rows' count -> TopK(scores, k) (a computed k). Behind
// them: Gather(feats [16, 8], rows) and the row-independent ops on it, RoiAlign of the image on the selected boxes.
// `behindIf`: the rows reach those ops through an If (torchvision's batched NMS: `if boxes.numel() == 0` an empty
// index tensor, else the rows), control flow that stays on the fallback path, so they read a bounded value a fallback
// node makes.
ir::Model rowOps(bool behindIf) {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 17}};
  ir::Graph& g = m.graph;
  g.name = "bounded_rows";
  g.inputs = {floatValue("scores", dims({kRows})), floatValue("feats", dims({kRows, kFeat})),
              floatValue("boxes", dims({kRows, 4})), floatValue("image", dims({1, 2, kImage, kImage}))};
  g.initializers = {
      init("half", ir::ElemType::Float, {}, std::vector<float>{0.5f}),
      init("axes0", ir::ElemType::Int64, {1}, std::vector<int64_t>{0}),
      init("zero", ir::ElemType::Int64, {}, std::vector<int64_t>{0}),
      weight("scale", {kFeat}, 5),
      weight("shift", {kFeat}, 6),
      weight("w", {kFeat, 5}, 7),
      weight("wt", {6, kFeat}, 8),
      weight("c", {6}, 9),
      init("two", ir::ElemType::Float, {}, std::vector<float>{2.0f}),
  };
  auto n17 = [](const std::string& type, std::vector<std::string> in, std::vector<std::string> out) {
    return node(type, std::move(in), std::move(out), 17);
  };
  ir::Node gather = n17("Gather", {"feats", "rows"}, {"picked"});
  gather.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node gatherBoxes = n17("Gather", {"boxes", "rows"}, {"picked_boxes"});
  gatherBoxes.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node gemm = n17("Gemm", {"picked", "wt", "c"}, {"gemm"});
  gemm.attrs.set(ir::Attribute::makeInt("transB", 1));
  ir::Node concat = n17("Concat", {"picked", "act"}, {"concat"});
  concat.attrs.set(ir::Attribute::makeInt("axis", 0));
  ir::Node softmax = n17("Softmax", {"matmul"}, {"softmax"});
  softmax.attrs.set(ir::Attribute::makeInt("axis", -1));
  ir::Node roi = n17("RoiAlign", {"image", "picked_boxes", "batch"}, {"roi"});
  roi.attrs.set(ir::Attribute::makeInt("output_height", 2));
  roi.attrs.set(ir::Attribute::makeInt("output_width", 3));
  roi.attrs.set(ir::Attribute::makeInt("sampling_ratio", 2));
  roi.attrs.set(ir::Attribute::makeString("coordinate_transformation_mode", "half_pixel"));
  g.nodes = {
      n17("Greater", {"scores", "half"}, {"keep"}),
      n17("NonZero", {"keep"}, {"nz"}),
      n17("Squeeze", {"nz", "axes0"}, {"rows"}),
      n17("Shape", {"rows"}, {"k"}),
      n17("TopK", {"scores", "k"}, {"top", "top_index"}),
      n17("Mul", {"top", "two"}, {"top2"}),
      gather,
      n17("Mul", {"picked", "scale"}, {"scaled"}),
      n17("Add", {"scaled", "shift"}, {"shifted"}),
      n17("Tanh", {"shifted"}, {"act"}),
      n17("MatMul", {"picked", "w"}, {"matmul"}),
      gemm,
      concat,
      softmax,
      gatherBoxes,
      n17("Mul", {"rows", "zero"}, {"batch"}),
      roi,
  };
  if (behindIf) {
    for (ir::Node& n : g.nodes)
      if (n.opType != "Shape")  // (TopK's k still counts the rows before the If)
        for (std::string& in : n.inputs)
          if (in == "rows") in = "sel";
    auto branch = [](const char* name, ir::Node body, bool empty) {
      auto b = std::make_shared<ir::Graph>();
      b->name = name;
      if (empty)
        b->initializers.push_back(init("none", ir::ElemType::Int64, {0}, std::vector<int64_t>{}));
      b->nodes.push_back(std::move(body));
      b->outputs.push_back(dynamicOutput(b->nodes.back().outputs[0], ir::ElemType::Int64, {ir::Dim::named("n")}));
      return b;
    };
    ir::Node branchIf = node("If", {"no_rows"}, {"sel"}, 17);
    branchIf.attrs.set(ir::Attribute::makeGraph("then_branch", branch("empty", node("Identity", {"none"}, {"e"}, 17), true)));
    branchIf.attrs.set(ir::Attribute::makeGraph("else_branch", branch("kept", node("Identity", {"rows"}, {"r"}, 17), false)));
    g.initializers.push_back(init("nothing", ir::ElemType::Int64, {}, std::vector<int64_t>{0}));
    g.nodes.insert(g.nodes.begin() + 3, {n17("Size", {"rows"}, {"count"}), n17("Equal", {"count", "nothing"}, {"no_rows"}),
                                         std::move(branchIf)});
  }
  auto rowsOf = [](const std::string& name, ir::ElemType type, std::vector<ir::Dim> rest) {
    std::vector<ir::Dim> shape{ir::Dim::named(name + "_rows")};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return dynamicOutput(name, type, std::move(shape));
  };
  g.outputs = {rowsOf("act", ir::ElemType::Float, {ir::Dim::known(kFeat)}),
               rowsOf("gemm", ir::ElemType::Float, {ir::Dim::known(6)}),
               rowsOf("concat", ir::ElemType::Float, {ir::Dim::known(kFeat)}),
               rowsOf("softmax", ir::ElemType::Float, {ir::Dim::known(5)}),
               rowsOf("roi", ir::ElemType::Float, {ir::Dim::known(2), ir::Dim::known(2), ir::Dim::known(3)}),
               rowsOf("top2", ir::ElemType::Float, {}),
               rowsOf("top_index", ir::ElemType::Int64, {})};
  return m;
}

// Scores above 0.5 where `above(i)` (distinct values: no ties in TopK), features, boxes inside the 12 x 12 image
// (varied sizes), and the image.
template <typename Above> Status writeRowInputs(const std::filesystem::path& dir, Above above) {
  std::filesystem::create_directories(dir);
  std::vector<float> scores(kRows), feats(kRows * kFeat), boxes(kRows * 4), image(2 * kImage * kImage);
  for (int64_t i = 0; i < kRows; ++i) {
    scores[static_cast<size_t>(i)] = (above(i) ? 0.6f : 0.1f) + 0.013f * static_cast<float>((i * 7) % kRows);
    const float x = static_cast<float>(i % 6), y = static_cast<float>((i * 5) % 7);
    boxes[static_cast<size_t>(i * 4)] = x + 0.25f;
    boxes[static_cast<size_t>(i * 4 + 1)] = y;
    boxes[static_cast<size_t>(i * 4 + 2)] = x + 2.5f + static_cast<float>(i % 4);
    boxes[static_cast<size_t>(i * 4 + 3)] = y + 1.75f + static_cast<float>(i % 5);
  }
  for (size_t e = 0; e < feats.size(); ++e) feats[e] = static_cast<float>((e * 37) % 23) / 11.0f - 1.0f;
  for (size_t e = 0; e < image.size(); ++e) image[e] = static_cast<float>((e * 53) % 31) / 7.0f - 2.0f;
  CTX_RETURN_IF_ERROR(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {kRows}, scores), dir / "input_0.npy"));
  CTX_RETURN_IF_ERROR(
      ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {kRows, kFeat}, feats), dir / "input_1.npy"));
  CTX_RETURN_IF_ERROR(ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {kRows, 4}, boxes), dir / "input_2.npy"));
  return ir::saveNpy(ir::Tensor::fromVector(ir::ElemType::Float, {1, 2, kImage, kImage}, image), dir / "input_3.npy");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 4 ? argv[1] : "";
  const bool rows = mode == "--rows" || mode == "--rows-behind-if";
  if (argc != 3 && !rows) {
    std::fprintf(stderr, "usage: make_detector_head [--rows | --rows-behind-if] OUT.onnx INPUT_DIR\n");
    return 2;
  }
  const std::filesystem::path inputs(argv[rows ? 3 : 2]);
  Status st = onnx_io::saveModel(rows ? rowOps(mode == "--rows-behind-if") : detectorHead(), argv[rows ? 2 : 1]);
  if (rows) {
    // No score above 0.5, every other one, and all 16 (the bound).
    if (st) st = writeRowInputs(inputs / "none", [](int64_t) { return false; });
    if (st) st = writeRowInputs(inputs / "some", [](int64_t i) { return i % 3 != 1; });
    if (st) st = writeRowInputs(inputs / "all", [](int64_t) { return true; });
  } else {
    if (st) st = writeInputs(inputs / "none", true, -5.0f, false);  // every score below both thresholds
    if (st) st = writeInputs(inputs / "some", false, -2.0f, true);  // overlapping boxes, a few scores above both
    if (st) st = writeInputs(inputs / "all", true, 5.0f, false);    // the bounds: 12 boxes, 48 scores above 0.7
  }
  if (!st) {
    std::fprintf(stderr, "make_detector_head: %s\n", st.error().message().c_str());
    return 1;
  }
  return 0;
}
