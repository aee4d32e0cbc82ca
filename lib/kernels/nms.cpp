// NonMaxSuppression: per batch and class, the boxes kept by greedy selection in descending score order, dropping
// every box whose IoU with a kept one exceeds the threshold. The output's length depends on the values, so at
// compile time all inputs must be constants; otherwise the node runs on the fallback interpreter.
#include "kernels/ops.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace ctxkit::kernels::detail {

namespace {

struct NmsInputs {
  const float* boxes = nullptr;   // [batches, spatial, 4]
  const float* scores = nullptr;  // [batches, classes, spatial]
  int64_t batches = 0, classes = 0, spatial = 0;
  int64_t maxPerClass = 0;  // 0 selects nothing
  float iou = 0;
  bool scoreThreshold = false;
  float minScore = 0;
  bool centerPoint = false;  // [x_center, y_center, width, height] instead of two corners [y1, x1, y2, x2]
};

struct Corners {
  float y0, x0, y1, x1;  // y0 <= y1, x0 <= x1
  float area() const { return (y1 - y0) * (x1 - x0); }
};

Corners corners(const NmsInputs& in, const float* b) {
  if (in.centerPoint) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether IoU(a, b) exceeds the threshold; boxes without area or overlap never suppress each other.
bool suppresses(const NmsInputs& in, const Corners& a, const Corners& b) {
  const float h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0), w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  if (h <= 0 || w <= 0) return false;
  const float inter = h * w, areaA = a.area(), areaB = b.area();
  const float uni = areaA + areaB - inter;
  if (areaA <= 0 || areaB <= 0 || uni <= 0) return false;
  return inter / uni > in.iou;
}

float scalarFloat(const ir::Tensor& t) { return t.elementCount() > 0 ? t.dataAs<float>()[0] : 0.0f; }

// Inputs: boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold (the last three optional).
Expected<NmsInputs> readInputs(const OpContext& ctx, InDescs inputs) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 5));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, typeBit(ElemType::Float)));
  CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, 1));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 0, 3));
  CTX_RETURN_IF_ERROR(checkRank(ctx, inputs, 1, 3));
  const ir::Shape &b = inputs[0].shape, &s = inputs[1].shape;
  if (b[2] != 4 || s[0] != b[0] || s[2] != b[1])
    return invalid(ctx, "boxes have shape {} and scores {} but expected [B, N, 4] and [B, C, N]", shapeStr(b),
                   shapeStr(s));
  NmsInputs in;
  in.batches = b[0];
  in.spatial = b[1];
  in.classes = s[1];
  in.centerPoint = attrsOf<ops::NmsAttrs>(ctx).centerPointBox;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present) continue;
    if (!inputs[i].value)
      return unsupported(ctx, "input {} must be known: NonMaxSuppression's output shape depends on its values", i);
    if (i >= 2 && dimProduct(inputs[i].shape) > 1)
      return invalid(ctx, "input {} has shape {} but expected a scalar", i, shapeStr(inputs[i].shape));
  }
  for (size_t i = 3; i < inputs.size(); ++i)
    if (inputs[i].present) CTX_RETURN_IF_ERROR(checkType(ctx, inputs, i, typeBit(ElemType::Float)));
  in.boxes = inputs[0].value->dataAs<float>();
  in.scores = inputs[1].value->dataAs<float>();
  if (const ValueDesc* m = optionalInput(inputs, 2)) {
    CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 2, typeBit(ElemType::Int64)));
    std::vector<int64_t> v = tensorInts(*m->value);
    in.maxPerClass = v.empty() ? 0 : std::max<int64_t>(v[0], 0);
  }
  if (const ValueDesc* t = optionalInput(inputs, 3)) in.iou = scalarFloat(*t->value);
  if (const ValueDesc* t = optionalInput(inputs, 4)) {
    in.scoreThreshold = true;
    in.minScore = scalarFloat(*t->value);
  }
  return in;
}

// The selected (batch, class, box) triples in output order.
std::vector<std::array<int64_t, 3>> select(const NmsInputs& in) {
  std::vector<std::array<int64_t, 3>> out;
  std::vector<Corners> boxes(static_cast<size_t>(in.spatial));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t n = 0; n < in.batches; ++n) {
    for (int64_t i = 0; i < in.spatial; ++i)
      boxes[static_cast<size_t>(i)] = corners(in, in.boxes + (n * in.spatial + i) * 4);
    for (int64_t c = 0; c < in.classes; ++c) {
      const float* score = in.scores + (n * in.classes + c) * in.spatial;
      order.clear();
      for (int64_t i = 0; i < in.spatial; ++i)
        if (!in.scoreThreshold || score[i] > in.minScore) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= in.maxPerClass) break;
        const Corners& box = boxes[static_cast<size_t>(i)];
        bool drop = std::any_of(kept.begin(), kept.end(),
                                [&](int64_t k) { return suppresses(in, boxes[static_cast<size_t>(k)], box); });
        if (drop) continue;
        kept.push_back(i);
        out.push_back({n, c, i});
      }
    }
  }
  return out;
}

}  // namespace

InferResult inferNonMaxSuppression(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(NmsInputs in, readInputs(ctx, inputs));
  return single(ElemType::Int64, {static_cast<int64_t>(select(in).size()), 3});
}

Status runNonMaxSuppression(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(NmsInputs in, readInputs(ctx, descs));
  int64_t* y = outputs[0]->mutableDataAs<int64_t>();
  for (const auto& triple : select(in)) y = std::copy(triple.begin(), triple.end(), y);
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
