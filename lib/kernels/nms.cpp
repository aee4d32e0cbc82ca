// NonMaxSuppression: per batch and class, the boxes kept by greedy selection in descending score order, dropping
// every box whose IoU with a kept one exceeds the threshold. The output's length depends on the values, so at
// compile time all inputs must be constants; otherwise the node runs on the fallback interpreter.
#include "cpu/simd.h"
#include "kernels/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
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
    in.maxPerClass = m->value->elementCount() == 0 ? 0 : std::max<int64_t>(m->value->dataAs<int64_t>()[0], 0);
  }
  if (const ValueDesc* t = optionalInput(inputs, 3)) in.iou = scalarFloat(*t->value);
  if (const ValueDesc* t = optionalInput(inputs, 4)) {
    in.scoreThreshold = true;
    in.minScore = scalarFloat(*t->value);
  }
  return in;
}

constexpr size_t kLanes = 16;

// Whether any of `count` (a multiple of kLanes) boxes given as columns suppresses box `b` of area `areaB` > 0: their
// IoU exceeds `iou`; boxes without area or overlap never suppress each other. Written with negated comparisons so
// that NaN coordinates suppress nothing, as in ONNX Runtime; blocks of fixed length so that the compiler vectorizes
// them.
CTX_SIMD_CLONES bool anySuppresses(const float* y0, const float* x0, const float* y1, const float* x1,
                                   const float* area, size_t count, const Corners& b, float areaB, float iou) {
  for (size_t at = 0; at < count; at += kLanes) {
    int any = 0;
#pragma GCC ivdep
    for (size_t k = at; k < at + kLanes; ++k) {
      const float h = std::min(y1[k], b.y1) - std::max(y0[k], b.y0);
      const float w = std::min(x1[k], b.x1) - std::max(x0[k], b.x0);
      const float inter = h * w, uni = area[k] + areaB - inter;
      any |= !(h <= 0) & !(w <= 0) & !(area[k] <= 0) & !(uni <= 0) & (inter / uni > iou);
    }
    if (any) return true;
  }
  return false;
}

// The boxes kept so far, as columns padded to whole blocks with boxes of no area (which suppress nothing).
class KeptBoxes {
public:
  void clear() {
    count_ = 0;
    for (auto* c : {&y0_, &x0_, &y1_, &x1_, &area_}) c->clear();
  }
  size_t size() const { return count_; }
  void add(const Corners& b) {
    if (count_ == y0_.size())
      for (auto* c : {&y0_, &x0_, &y1_, &x1_, &area_}) c->resize(count_ + kLanes, 0.0f);
    y0_[count_] = b.y0, x0_[count_] = b.x0, y1_[count_] = b.y1, x1_[count_] = b.x1, area_[count_] = b.area();
    ++count_;
  }
  // Whether any kept box suppresses `b`.
  bool suppress(const Corners& b, float iou) const {
    const float areaB = b.area();
    if (!(areaB > 0)) return false;  // a box without area is never suppressed
    return anySuppresses(y0_.data(), x0_.data(), y1_.data(), x1_.data(), area_.data(), y0_.size(), b, areaB, iou);
  }

private:
  size_t count_ = 0;
  std::vector<float> y0_, x0_, y1_, x1_, area_;
};

// One node's selection temporaries, kept between evaluations (EvalState): grown, never shrunk.
struct Selection : EvalState::Scratch {
  std::vector<std::array<int64_t, 3>> out;  // the selected (batch, class, box) triples in output order
  std::vector<Corners> boxes;
  std::vector<int64_t> order;
  KeptBoxes kept;
};

// Fills `s.out` with the selected triples.
void select(const NmsInputs& in, Selection& s) {
  auto& [out, boxes, order, kept] = s;
  out.clear();
  boxes.resize(static_cast<size_t>(in.spatial));
  for (int64_t n = 0; n < in.batches; ++n) {
    for (int64_t i = 0; i < in.spatial; ++i)
      boxes[static_cast<size_t>(i)] = corners(in, in.boxes + (n * in.spatial + i) * 4);
    for (int64_t c = 0; c < in.classes; ++c) {
      const float* score = in.scores + (n * in.classes + c) * in.spatial;
      order.clear();
      for (int64_t i = 0; i < in.spatial; ++i)
        if (!in.scoreThreshold || score[i] > in.minScore) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first (NaN scores last, by index). A total order,
      // so an unstable sort (which needs no temporary buffer) gives the stable order.
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const bool nanA = std::isnan(score[a]), nanB = std::isnan(score[b]);
        if (nanA != nanB) return nanB;
        if (!nanA && score[a] != score[b]) return score[a] > score[b];
        return a < b;
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= in.maxPerClass) break;
        const Corners& box = boxes[static_cast<size_t>(i)];
        if (kept.suppress(box, in.iou)) continue;
        kept.add(box);
        out.push_back({n, c, i});
      }
    }
  }
}

}  // namespace

InferResult inferNonMaxSuppression(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_ASSIGN_OR_RETURN(NmsInputs in, readInputs(ctx, inputs));
  Selection s;
  select(in, s);
  return single(ElemType::Int64, {static_cast<int64_t>(s.out.size()), 3});
}

namespace {
void writeSelection(const Selection& s, ir::Tensor& y) {
  int64_t* out = y.mutableDataAs<int64_t>();
  for (const auto& triple : s.out) out = std::copy(triple.begin(), triple.end(), out);
}
}  // namespace

Status runNonMaxSuppression(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, true);
  CTX_ASSIGN_OR_RETURN(NmsInputs in, readInputs(ctx, descs));
  Selection s;
  select(in, s);
  const std::array<int64_t, 2> selected{static_cast<int64_t>(s.out.size()), 3};
  if (!ir::sameShape(outputs[0]->shape(), selected))
    return nodeError(ctx, ErrorCode::Internal, "output has shape {} but {} boxes were selected",
                     shapeStr(outputs[0]->shape()), s.out.size());
  writeSelection(s, *outputs[0]);
  return Status::ok();
}

Status evaluateNonMaxSuppression(const OpContext& ctx, RunIns inputs, OutputSink& sink, EvalState& state) {
  describeInputsInto(inputs, true, state.descs);
  CTX_ASSIGN_OR_RETURN(NmsInputs in, readInputs(ctx, state.descs));
  if (!dynamic_cast<Selection*>(state.scratch.get())) state.scratch = std::make_unique<Selection>();
  auto& s = static_cast<Selection&>(*state.scratch);
  select(in, s);
  const std::array<int64_t, 2> shape{static_cast<int64_t>(s.out.size()), 3};
  CTX_ASSIGN_OR_RETURN(ir::Tensor * y, sink.bind(0, ElemType::Int64, shape));
  writeSelection(s, *y);
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
