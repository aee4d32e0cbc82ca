// Prepared ops: attributes decoded, output types and shapes fixed and constant float16 inputs widened once, so
// that a run only checks shapes (a comparison) and computes.
#include "kernels/prepared.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "kernels/op_entry.h"

#include <optional>

namespace ctxkit::kernels {

using namespace detail;

namespace {

struct InputSlot {
  bool present = false;
  ElemType type = ElemType::Undefined;
  ir::Shape shape;
};

std::string describeSlot(bool present, ElemType type, std::span<const int64_t> shape) {
  return present ? fmt::format("{} {}", ir::elemTypeName(type), shapeStr(shape)) : std::string("absent");
}

// op(B) packed into new panels of `width` columns (cpu::packPanels), in a tensor buffer: a large one (a detector's
// 51 MB box-head weight) is backed by huge pages where the system allows (ir/tensor.cpp), so that packing it faults
// once per 2 MiB instead of once per 4 KiB.
std::shared_ptr<const float[]> packedPanels(const float* b, bool transB, size_t ldb, size_t k, size_t n, size_t width) {
  const size_t count = cpu::panelElements(k, n, width);
  std::shared_ptr<const void> owner;
  float* out = nullptr;
  if (auto made = ir::Tensor::allocate(ElemType::Float, {static_cast<int64_t>(count)})) {
    out = made->mutableDataAs<float>();
    owner = made->owner();
  } else {  // beyond the tensor memory limit: the panels are not a tensor, and the op needs them
    std::shared_ptr<float[]> own(std::make_unique_for_overwrite<float[]>(count));
    out = own.get();
    owner = std::move(own);
  }
  cpu::packPanels(transB, b, ldb, k, n, width, cpu::kPanelDepth, out);
  return std::shared_ptr<const float[]>(owner, out);
}

// A plain constant B (op(B) K x N) in panels at this CPU's natural width: from `store` (packed once there), else
// packed for the caller alone. The one place prepared ops and packPanelsAhead choose the panels' layout, so that
// what is packed ahead is what preparing finds.
std::shared_ptr<const float[]> naturalPanels(PanelStore* store, const float* b, bool transB, size_t k, size_t n) {
  const size_t width = cpu::sgemmNaturalPanelWidth(), ldb = transB ? k : n;
  return store ? store->panels(b, transB, ldb, k, n, width) : packedPanels(b, transB, ldb, k, n, width);
}

// Whether a MatMul or Gemm (kind, transB) runs on B in panels, and op(B)'s K x N: a constant 2-D float32 B.
struct GemmB {
  bool transB = false;
  size_t k = 0, n = 0;
};
std::optional<GemmB> gemmPanelsB(ir::OpKind kind, const ops::OpAttrs& typed, const ValueDesc& b) {
  if (kind != ir::OpKind::MatMul && kind != ir::OpKind::Gemm) return std::nullopt;
  if (!b.present || !b.value || b.shape.size() != 2 || b.type != ElemType::Float) return std::nullopt;
  const bool transB = kind == ir::OpKind::Gemm && std::get<ops::GemmAttrs>(typed).transB;
  const auto k = static_cast<size_t>(transB ? b.shape[1] : b.shape[0]);
  const auto n = static_cast<size_t>(transB ? b.shape[0] : b.shape[1]);
  if (k == 0 || n == 0) return std::nullopt;
  return GemmB{transB, k, n};
}

// Any op of the table, with its entry looked up and its attributes decoded once.
class TablePreparedOp final : public PreparedOp {
public:
  // Keeps copies of the context's attributes and name (and `typed`, decoded).
  TablePreparedOp(const OpEntry* entry, const OpContext& ctx, ops::OpAttrs typed)
      : entry_(entry), kind_(ctx.kind), opset_(ctx.opset), ownAttrs_(ctx.attrs), ownName_(ctx.nodeName),
        ownTyped_(std::move(typed)), attrs_(&ownAttrs_), name_(ownName_), typed_(&ownTyped_), kernel_(ctx.kernel) {}
  // Borrows them: ctx.attrs, *ctx.typed and the name's characters outlive the op.
  TablePreparedOp(const OpEntry* entry, const OpContext& ctx)
      : entry_(entry), kind_(ctx.kind), opset_(ctx.opset), attrs_(&ctx.attrs), name_(ctx.nodeName), typed_(ctx.typed),
        kernel_(ctx.kernel) {}

  // `known`: outputs already inferred for these inputs (prepareProgramOp), or null to infer them here.
  // `store`: where panels packed here are shared (OpContext::panelStore), or null.
  Status init(std::span<const ValueDesc> inputs, size_t outputCount, std::span<const cpu::WeightLayout> layouts,
              const std::span<const OutputDesc>* known, PanelStore* store) {
    store_ = store;
    OpContext ctx = context(nullptr);
    if (known) {
      outputs_.assign(known->begin(), known->end());
    } else {
      CTX_ASSIGN_OR_RETURN(outputs_, inferOutputs(ctx, inputs, outputCount));
    }
    // A packed weight is bound as its stored 1-D tensor: runs check that shape.
    inputs_.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ValueDesc& in = inputs[i];
      bool packed = i < layouts.size() && !layouts[i].plain() && in.value;
      inputs_.push_back(InputSlot{in.present, in.type, packed ? in.value->shape() : in.shape});
    }
    CTX_RETURN_IF_ERROR(preparePanels(ctx, inputs, layouts));
    store_ = nullptr;  // only preparing reads it: the op may outlive the store
    // A plan that needs an input known only at run time (not a constant here) is worked out per run instead.
    if (entry_->plan)
      if (auto plan = entry_->plan(ctx, inputs)) plan_ = std::move(plan).value();
    // A Conv's per-thread scratch is sized now (with its plan), for the pool to reserve on every thread at load.
    if (kind_ == ir::OpKind::Conv && inputs.size() >= 2)
      CTX_RETURN_IF_ERROR(noteConvScratch(context(nullptr), inputs[0].shape, inputs[1].shape));
    for (const ValueDesc& in : inputs) viaFloat_ = viaFloat_ || (in.present && isHalf(in.type));
    viaFloat_ = viaFloat_ && entry_->halfViaFloat;
    if (!viaFloat_) return Status::ok();
    widened_.resize(inputs.size());
    // Constant half inputs (weights) are widened here, once, instead of on every run.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].present || !inputs[i].value || !isHalf(inputs[i].type)) continue;
      const ir::Tensor& t = *inputs[i].value;
      CTX_ASSIGN_OR_RETURN(ir::Tensor wide, ir::Tensor::allocate(ElemType::Float, t.shape()));
      CTX_RETURN_IF_ERROR(cpu::convertElements(t.type(), t.data(), ElemType::Float, wide.mutableData(),
                                               static_cast<size_t>(wide.elementCount())));
      widened_[i] = std::move(wide);
    }
    return Status::ok();
  }

  Status run(RunIns inputs, RunOuts outputs, ThreadPool* pool) const override {
    OpContext ctx = context(pool);
    if (inputs.size() != inputs_.size())
      return nodeError(ctx, ErrorCode::InvalidArgument, "{} inputs given but the op was prepared for {}", inputs.size(),
                       inputs_.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const InputSlot& s = inputs_[i];
      const ir::Tensor* t = inputs[i];
      if ((t != nullptr) != s.present || (t && (t->type() != s.type || t->shape() != s.shape)))
        return nodeError(ctx, ErrorCode::InvalidArgument, "input {} is {} but the op was prepared for {}", i,
                         t ? describeSlot(true, t->type(), t->shape()) : std::string("absent"),
                         describeSlot(s.present, s.type, s.shape));
    }
    if (outputs.size() != outputs_.size())
      return nodeError(ctx, ErrorCode::InvalidArgument, "{} outputs given but the op was prepared for {}",
                       outputs.size(), outputs_.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const ir::Tensor* out = outputs[i];
      if (!out) continue;
      if (out->type() != outputs_[i].type || out->shape() != outputs_[i].shape)
        return nodeError(ctx, ErrorCode::InvalidArgument, "output {} is {} but the op computes {}", i,
                         describeSlot(true, out->type(), out->shape()),
                         describeSlot(true, outputs_[i].type, outputs_[i].shape));
    }
    if (!viaFloat_) return runEntry(*entry_, ctx, inputs, outputs, false);
    std::vector<const ir::Tensor*> ins(inputs.begin(), inputs.end());
    for (size_t i = 0; i < ins.size(); ++i)
      if (widened_[i]) ins[i] = &*widened_[i];
    return runEntry(*entry_, ctx, ins, outputs, true);
  }

private:
  OpContext context(ThreadPool* pool) const {
    return OpContext{kind_,       opset_,  *attrs_, name_, pool, typed_, panels_.data ? &panels_ : nullptr,
                     plan_.get(), nullptr, kernel_};
  }

  // MatMul and Gemm with a constant float32 B run on B in GEMM panels: read in place when stored so (a weight
  // of a compiled program), else packed here once at this CPU's natural panel width. A weight in a layout the op
  // does not read is refused.
  Status preparePanels(const OpContext& ctx, std::span<const ValueDesc> inputs,
                       std::span<const cpu::WeightLayout> layouts) {
    auto layoutOf = [&](size_t i) { return i < layouts.size() ? layouts[i] : cpu::WeightLayout{}; };
    const bool gemmLike = kind_ == ir::OpKind::MatMul || kind_ == ir::OpKind::Gemm;
    const bool conv = kind_ == ir::OpKind::Conv;
    const bool transB = conv || (kind_ == ir::OpKind::Gemm && std::get<ops::GemmAttrs>(*typed_).transB);
    if (!layouts.empty() && layouts.size() != inputs.size())
      return nodeError(ctx, ErrorCode::Internal, "{} layouts for {} inputs", layouts.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ValueDesc& in = inputs[i];
      const cpu::WeightLayout layout = layoutOf(i);
      if (layout.plain()) continue;
      const auto wanted = transB ? cpu::WeightLayoutKind::GemmPanelsTransposed : cpu::WeightLayoutKind::GemmPanels;
      const bool rankOk =
          conv ? in.shape.size() >= 3 && std::get<ops::ConvAttrs>(*typed_).group == 1 : in.shape.size() == 2;
      if (!(gemmLike || conv) || i != 1 || layout.kind != wanted || !in.value || in.type != ElemType::Float ||
          inputs[0].type != ElemType::Float || !rankOk)
        return nodeError(ctx, ErrorCode::InvalidGraph, "input {} is stored in layout {}, which this op does not read",
                         i, cpu::layoutName(layout));
    }
    if (conv) return prepareConvPanels(ctx, inputs, layoutOf(1));
    if (inputs.size() < 2 || inputs[0].type != ElemType::Float) return Status::ok();
    const std::optional<GemmB> b = gemmPanelsB(kind_, *typed_, inputs[1]);
    if (!b) return Status::ok();
    return usePanels(ctx, inputs[1], layoutOf(1), b->transB, b->k, b->n);
  }

  // B (input 1, op(B) K x N) in panels: the stored ones read in place, or a plain B packed once per store (per op
  // without one), into memory that packing overwrites whole, so never cleared first.
  Status usePanels(const OpContext& ctx, const ValueDesc& b, const cpu::WeightLayout& layout, bool transB, size_t k,
                   size_t n) {
    if (!layout.plain()) {
      const size_t width = layout.width, depth = layout.depth;
      if (!cpu::isPanelWidth(width) || depth == 0 ||
          b.value->byteSize() != cpu::panelElements(k, n, width) * sizeof(float))
        return nodeError(ctx, ErrorCode::InvalidGraph, "input 1 in layout {} has {} bytes, which does not fit {}",
                         cpu::layoutName(layout), b.value->byteSize(), describeSlot(true, b.type, b.shape));
      panels_ = cpu::PanelsB{b.value->dataAs<float>(), k, n, width, depth, {}};
      // Narrower panels than this CPU's kernel leave vector lanes idle: recompiling helps. Wider ones run on a kernel
      // of their own width with as many accumulators (AVX2 reads 32-wide panels 3 rows at a time) at the same speed.
      if (width < cpu::sgemmNaturalPanelWidth())
        suboptimal_ = fmt::format("node '{}' reads weights packed in {}-wide panels; this CPU's GEMM kernel is {} wide",
                                  name_, width, cpu::sgemmNaturalPanelWidth());
      return Status::ok();
    }
    // B's rows are its last dimension (the product of all but the first, for a Conv weight) apart.
    owned_ = naturalPanels(store_, b.value->dataAs<float>(), transB, k, n);
    panels_ = cpu::PanelsB{owned_.get(), k, n, cpu::sgemmNaturalPanelWidth(), cpu::kPanelDepth, {}};
    return Status::ok();
  }

  const OpEntry* entry_;
  ir::OpKind kind_;
  int64_t opset_;
  ir::Attributes ownAttrs_;  // copies, unless borrowed (then empty)
  std::string ownName_;
  ops::OpAttrs ownTyped_;
  const ir::Attributes* attrs_;  // for families whose kernels still read ONNX attributes (ops::OnnxAttrs)
  std::string_view name_;
  const ops::OpAttrs* typed_;
  cpu::KernelChoice kernel_;  // a compiled program's recorded Conv algorithm (OpContext::kernel)
  std::vector<InputSlot> inputs_;
  std::vector<std::optional<ir::Tensor>> widened_;  // float32 copies of constant float16/bfloat16 inputs (viaFloat_)
  bool viaFloat_ = false;
  // A Conv that convOnPanels picks multiplies the unfolded input by the constant weight as
  // B: the weight's transpose (K = C x kernel taps, N = output channels) in panels, stored so by the compiler (then
  // used whatever the output size: the bytes are only readable so) or packed here once.
  // A recorded algorithm decides instead of convOnPanels: panels exactly when it is Panels.
  Status prepareConvPanels(const OpContext& ctx, std::span<const ValueDesc> inputs, const cpu::WeightLayout& layout) {
    if (kernel_.recorded()) {
      const bool panels = kernel_.algorithm == cpu::ConvAlgorithm::Panels;
      if (!panels && !layout.plain())
        return nodeError(ctx, ErrorCode::InvalidGraph, "the recorded kernel {} cannot read a weight in layout {}",
                         cpu::convAlgorithmName(kernel_.algorithm), cpu::layoutName(layout));
      if (panels && (inputs.size() < 2 || !inputs[1].value || inputs[0].type != ElemType::Float ||
                     inputs[1].type != ElemType::Float || std::get<ops::ConvAttrs>(*typed_).group != 1 ||
                     inputs[1].shape.size() < 3))
        return nodeError(ctx, ErrorCode::InvalidGraph,
                         "the recorded kernel panels needs a constant float32 weight and group 1");
      if (!panels) return Status::ok();
    }
    if (inputs.size() < 2 || !inputs[1].value || inputs[0].type != ElemType::Float ||
        inputs[1].type != ElemType::Float || std::get<ops::ConvAttrs>(*typed_).group != 1 || outputs_.empty() ||
        outputs_[0].shape.size() < 3 || inputs[1].shape.size() < 3)
      return Status::ok();
    if (layout.plain() && !kernel_.recorded() &&
        !convOnPanels(std::get<ops::ConvAttrs>(*typed_), inputs[0].shape, inputs[1].shape))
      return Status::ok();
    const ValueDesc& w = inputs[1];
    const auto m = static_cast<size_t>(w.shape[0]);
    const auto k = static_cast<size_t>(dimProduct(w.shape, 1, w.shape.size()));
    if (m == 0 || k == 0) {
      if (!layout.plain())
        return nodeError(ctx, ErrorCode::InvalidGraph, "an empty weight {} is stored in layout {}",
                         describeSlot(true, w.type, w.shape), cpu::layoutName(layout));
      return Status::ok();
    }
    CTX_RETURN_IF_ERROR(usePanels(ctx, w, layout, true, k, m));
    weightShape_ = w.shape;  // the packed weight is bound as its stored 1-D tensor: the kernel plans with this
    panels_.weightShape = weightShape_;
    return Status::ok();
  }

  cpu::PanelsB panels_;                   // B of MatMul/Gemm in panels (data null when not used)
  std::shared_ptr<const void> plan_;      // the entry's plan for these inputs (OpContext::plan), or null
  std::shared_ptr<const float[]> owned_;  // B packed at prepare (or shared from the store), when not stored packed
  PanelStore* store_ = nullptr;           // while preparing: OpContext::panelStore
  ir::Shape weightShape_;                 // a Conv weight's logical shape (cpu::PanelsB::weightShape)
};

}  // namespace

std::shared_ptr<const float[]> PanelStore::panels(const float* b, bool transB, size_t ldb, size_t k, size_t n,
                                                  size_t width) {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_)
    if (e.b == b && e.transB == transB && e.ldb == ldb && e.k == k && e.n == n && e.width == width) return e.panels;
  ++packs_;
  Entry entry{b, transB, ldb, k, n, width, packedPanels(b, transB, ldb, k, n, width)};
  if (entries_.size() < kMaxEntries) {
    entries_.push_back(std::move(entry));
    return entries_.back().panels;
  }
  entries_[next_] = std::move(entry);
  const size_t at = next_;
  next_ = (next_ + 1) % kMaxEntries;
  return entries_[at].panels;
}

size_t PanelStore::packs() const {
  std::lock_guard lock(mutex_);
  return packs_;
}

bool packPanelsAhead(const OpContext& ctx, const ValueDesc& b, PanelStore& store) {
  auto pack = [&](const OpContext& typed) -> Expected<bool> {
    const std::optional<GemmB> gemm = gemmPanelsB(typed.kind, *typed.typed, b);
    if (!gemm) return false;
    naturalPanels(&store, b.value->dataAs<float>(), gemm->transB, gemm->k, gemm->n);
    return true;
  };
  // A node built in memory has its attributes decoded here (as prepare() would); one that fails to decode is not
  // packed ahead (preparing it reports the error).
  Expected<bool> packed = ctx.typed ? pack(ctx) : withTypedAttrs(ctx, pack);
  return packed && *packed;
}

Expected<std::unique_ptr<PreparedOp>> prepare(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                              size_t outputCount, std::span<const cpu::WeightLayout> layouts) {
  const OpEntry* entry = findEntry(ctx.kind);
  if (!entry) return noKernel(ctx);
  // Nodes carry the attributes decoded at import (nodeContext); the op keeps a copy, so runs never decode.
  using Made = Expected<std::unique_ptr<TablePreparedOp>>;
  auto make = [&](const OpContext& typed) -> Made {
    return std::make_unique<TablePreparedOp>(entry, typed, *typed.typed);
  };
  Made op = ctx.typed ? make(ctx) : withTypedAttrs(ctx, make);
  if (!op) return op.takeError();
  CTX_RETURN_IF_ERROR((*op)->init(inputs, outputCount, layouts, nullptr, ctx.panelStore));
  return std::unique_ptr<PreparedOp>(std::move(op).value());
}

Expected<std::unique_ptr<PreparedOp>> prepareProgramOp(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                                       size_t outputCount, std::span<const cpu::WeightLayout> layouts,
                                                       const std::span<const OutputDesc>* inferred) {
  const OpEntry* entry = findEntry(ctx.kind);
  if (!entry) return noKernel(ctx);
  if (!ctx.typed) return nodeError(ctx, ErrorCode::Internal, "a program op without typed attributes");
  if (inferred && inferred->size() != outputCount)
    return nodeError(ctx, ErrorCode::Internal, "{} outputs known for {}", inferred->size(), outputCount);
  auto op = std::make_unique<TablePreparedOp>(entry, ctx);
  CTX_RETURN_IF_ERROR(op->init(inputs, outputCount, layouts, inferred, ctx.panelStore));
  return std::unique_ptr<PreparedOp>(std::move(op));
}

}  // namespace ctxkit::kernels
