// widen-float16: for a target that computes float16 in float32 (partitioner::Float16Compute::Float32, the cpu target),
// the partition's float16 values become float32 between ops, as ONNX Runtime's CPU EP computes them:
//  - an op reading a float16 value computes in float32: it reads the value's float32 version, and its float16
//    results become float32 (their type as the op's kernel infers it for float32 inputs);
//  - a float16 constant is read as float32: the passes see its exact widening, and emit-program stores the float16
//    tensor (weight layout float16-widened: the .bin keeps the source's bytes, widened once when loaded);
//  - a float16 value that enters the partition (or that an op makes as float16: an explicit Cast to float16, a fill
//    of float16 type) is widened by a Cast to float32 before its first float32 reader;
//  - a float16 value that leaves the partition (a graph output, a value read outside) is rounded by a Cast to
//    float16 after its producer; the partition's own readers read the float32 value;
//  - an explicit Cast (or CastLike) to float16 still rounds: its result is float16, widened again for its readers;
//    a Cast from float16 to float32 reads the float32 version, and goes when its result stays in the partition;
//  - Shape and Size read the value as it is; an op whose kernel does not take the float32 version (BitCast reads bits)
//    reads a float16 version, rounded by a Cast to float16 if needed.
#include "codegen/passes/passes.h"
#include "cpu/convert.h"
#include "kernels/kernels.h"

#include <memory>

namespace ctxkit::codegen {

namespace {

using ir::ElemType;

Expected<ir::Tensor> widened(const ir::Tensor& half) {
  CTX_ASSIGN_OR_RETURN(ir::Tensor wide, ir::Tensor::allocate(ElemType::Float, half.shape()));
  CTX_RETURN_IF_ERROR(cpu::convertElements(ElemType::Float16, half.data(), ElemType::Float, wide.mutableData(),
                                           static_cast<size_t>(wide.elementCount())));
  return wide;
}

LOp castOp(const std::string& name, ValueId in, ValueId out, ElemType to) {
  LOp cast = madeOp(ir::OpKind::Cast, 19, name, {in}, {out});
  std::get<ops::CastAttrs>(cast.typed).to = to;
  return cast;
}

// A map from values to values, by id (kNoValue: none).
class ValueMap {
public:
  ValueId operator[](ValueId v) const { return v < to_.size() ? to_[v] : kNoValue; }
  void set(ValueId v, ValueId to) {
    if (to_.size() <= v) to_.resize(static_cast<size_t>(v) + 1, kNoValue);
    to_[v] = to;
  }

private:
  std::vector<ValueId> to_;
};

class Widener {
public:
  explicit Widener(LoweringState& state) : state_(state) {}

  Status run() {
    for (const LOp& original : state_.ops) {
      LOp op = original;
      for (auto& in : op.inputs)
        if (ValueId a = alias_[in]; a != kNoValue) in = a;
      const bool halfIn = std::any_of(op.inputs.begin(), op.inputs.end(), [&](ValueId v) { return carried(v); });
      const bool halfOut = std::any_of(op.outputs.begin(), op.outputs.end(), [&](ValueId v) { return isHalf(v); });
      if (!halfIn && !halfOut) {
        out_.push_back(std::move(op));
        continue;
      }
      switch (op.kind) {
        case ir::OpKind::Cast: CTX_RETURN_IF_ERROR(cast(std::move(op))); break;
        case ir::OpKind::CastLike: CTX_RETURN_IF_ERROR(castLike(std::move(op))); break;
        // They read the shape only.
        case ir::OpKind::Shape:
        case ir::OpKind::Size: out_.push_back(std::move(op)); break;
        // Float16 results of an op reading no float16 value (a fill of float16 type) are float16: readers widen them.
        default:
          if (!halfIn) out_.push_back(std::move(op));
          else CTX_RETURN_IF_ERROR(compute(std::move(op)));
          break;
      }
    }
    state_.ops = std::move(out_);
    state_.opsChanged();
    return Status::ok();
  }

  ir::PassChange change() const {
    return ir::PassChange{}
        .count("values_widened", valuesWidened_)
        .count("weights_widened", weightsWidened_)
        .count("inputs_widened", inputsWidened_)
        .count("outputs_rounded", outputsRounded_)
        .count("casts_removed", castsRemoved_);
  }

private:
  // A float16 value of the source graph, as analysis (or an earlier pass) typed it.
  bool isHalf(ValueId v) const { return v != kNoValue && state_.typeOf(v) == ElemType::Float16; }
  // A float16 value of the source graph, whether still float16 or already carried as float32.
  bool carried(ValueId v) const { return v != kNoValue && (wide_[v] != kNoValue || isHalf(v)); }
  // Carried as float32 under its own name (a float16 constant read as float32, a result computed in float32).
  bool retyped(ValueId v) const { return v != kNoValue && wide_[v] == v; }

  // A new value named after `base`: a name no value of the partition or the graph has.
  ValueId fresh(const std::string& base) {
    std::string name = base;
    for (int n = 1; state_.findValue(name) || state_.facts.find(name); ++n) name = fmt::format("{}_{}", base, n);
    return state_.value(name);
  }

  // The float32 version of float16 value `v`, made where it is first needed (before the op being rewritten).
  Expected<ValueId> widen(ValueId v) {
    if (ValueId w = wide_[v]; w != kNoValue) return w;
    if (const ir::Tensor* c = state_.constantOf(v)) {
      ir::Tensor half = *c;
      CTX_ASSIGN_OR_RETURN(const ir::Tensor* wide, widenedConstant(v, half));
      ValueRecord& r = state_.record(v);
      r.made = std::make_unique<ir::Tensor>(*wide);
      r.float16Storage = std::make_unique<ir::Tensor>(std::move(half));
      wide_.set(v, v);
      ++weightsWidened_;
      return v;
    }
    const ValueId w = fresh(state_.nameOf(v) + "/float32");
    if (auto shape = state_.shapeOf(v)) state_.record(w).shape = *shape;
    state_.record(w).type = ElemType::Float;
    state_.record(w).loadTime = state_.isLoadTime(v);  // (a weight folded at load is widened there too)
    out_.push_back(castOp(state_.nameOf(v) + "/cast_float32", v, w, ElemType::Float));
    wide_.set(v, w);
    ++inputsWidened_;
    return w;
  }

  // A float16 version of carried value `v`: `v` itself unless it is carried as float32 under its own name; then the
  // constant's float16 tensor, or the result rounded by a Cast to float16.
  ValueId narrow(ValueId v) {
    if (!retyped(v)) return v;
    if (ValueId n = narrow_[v]; n != kNoValue) return n;
    const ValueId n = fresh(state_.nameOf(v) + "/float16");
    narrow_.set(v, n);
    if (const auto& stored = state_.record(v).float16Storage) {
      state_.addConstant(n, *stored);
      return n;
    }
    if (auto shape = state_.shapeOf(v)) state_.record(n).shape = *shape;
    state_.record(n).type = ElemType::Float16;
    out_.push_back(castOp(state_.nameOf(v) + "/cast_float16", v, n, ElemType::Float16));
    ++outputsRounded_;
    return n;
  }

  // The float32 tensor a float16 constant is read as (made once per constant, kept at one address).
  Expected<const ir::Tensor*> widenedConstant(ValueId v, const ir::Tensor& half) {
    if (v < wideConstants_.size() && wideConstants_[v]) return wideConstants_[v].get();
    CTX_ASSIGN_OR_RETURN(ir::Tensor wide, widened(half));
    if (wideConstants_.size() <= v) wideConstants_.resize(static_cast<size_t>(v) + 1);
    wideConstants_[v] = std::make_unique<ir::Tensor>(std::move(wide));
    return wideConstants_[v].get();
  }

  // An op that computes with float16 values: on their float32 versions, its float16 results carried as float32. An op
  // whose kernel does not infer outputs for the float32 versions reads float16 versions instead.
  Status compute(LOp op) {
    if (op.kind == ir::OpKind::BitCast) return keepHalf(std::move(op));  // it reads the float16 bits
    std::vector<kernels::ValueDesc> descs;
    for (ValueId in : op.inputs) {
      kernels::ValueDesc d;
      d.present = in != kNoValue;
      if (d.present) {
        auto shape = state_.shapeOf(in);
        if (!shape) return keepHalf(std::move(op));
        d.shape = *shape;
        d.type = carried(in) ? ElemType::Float : state_.typeOf(in);
        d.value = state_.constantOf(in);
        if (d.value && d.value->type() == ElemType::Float16) {
          CTX_ASSIGN_OR_RETURN(d.value, widenedConstant(in, *d.value));
        }
      }
      descs.push_back(std::move(d));
    }
    size_t outputCount = op.outputs.size();
    while (outputCount > 0 && op.outputs[outputCount - 1] == kNoValue) --outputCount;
    kernels::OpContext ctx{op.kind, op.opset, op.onnx, op.name, nullptr, &op.typed};
    auto outs = kernels::inferOutputs(ctx, descs, outputCount);
    if (!outs) return keepHalf(std::move(op));
    // Only float16 results may change type (to float32); a value of unknown type keeps what the kernel infers.
    for (size_t o = 0; o < outputCount; ++o) {
      const ValueId v = op.outputs[o];
      if (v == kNoValue) continue;
      const ElemType was = state_.typeOf(v), now = (*outs)[o].type;
      if (was != ElemType::Undefined && was != now && !(was == ElemType::Float16 && now == ElemType::Float))
        return keepHalf(std::move(op));
    }
    for (auto& in : op.inputs) {
      if (!carried(in)) continue;
      CTX_ASSIGN_OR_RETURN(in, widen(in));
    }
    std::vector<LOp> exits;
    for (size_t o = 0; o < outputCount; ++o) {
      ValueId& v = op.outputs[o];
      if (v == kNoValue || !isHalf(v) || (*outs)[o].type != ElemType::Float) continue;
      if (state_.leaves(v)) {
        // Rounded on its way out; the partition's readers read the float32 result.
        const ValueId w = fresh(state_.nameOf(v) + "/float32");
        state_.record(w).shape = (*outs)[o].shape;
        state_.record(w).type = ElemType::Float;
        exits.push_back(castOp(state_.nameOf(v) + "/cast_float16", w, v, ElemType::Float16));
        wide_.set(v, w);
        v = w;
        ++outputsRounded_;
      } else {
        state_.record(v).type = ElemType::Float;
        wide_.set(v, v);
        ++valuesWidened_;
      }
    }
    out_.push_back(std::move(op));
    for (LOp& exit : exits) out_.push_back(std::move(exit));
    return Status::ok();
  }

  // The op as the source has it, on float16 versions of its inputs.
  Status keepHalf(LOp op) {
    for (auto& in : op.inputs)
      if (carried(in)) in = narrow(in);
    out_.push_back(std::move(op));
    return Status::ok();
  }

  Status cast(LOp op) {
    const ValueId in = op.inputs.empty() ? kNoValue : op.inputs[0];
    const ElemType to = std::get<ops::CastAttrs>(op.typed).to;
    if (to == ElemType::Float16) {
      // An explicit rounding: of the value as it is here (float32 when carried so under its name).
      out_.push_back(std::move(op));
      return Status::ok();
    }
    if (!carried(in)) {
      out_.push_back(std::move(op));
      return Status::ok();
    }
    CTX_ASSIGN_OR_RETURN(ValueId w, widen(in));
    const ValueId result = op.outputs[0];
    if (to == ElemType::Float && !state_.leaves(result)) {
      alias_.set(result, w);
      ++castsRemoved_;
      return Status::ok();
    }
    op.inputs[0] = w;
    out_.push_back(std::move(op));
    return Status::ok();
  }

  // CastLike to a float16 value rounds as Cast to float16 does; from a float16 value it reads the float32 version.
  Status castLike(LOp op) {
    if (op.inputs.size() < 2 || op.outputs.empty()) return keepHalf(std::move(op));
    if (carried(op.inputs[1])) {
      LOp c = castOp(op.name, op.inputs[0], op.outputs[0], ElemType::Float16);
      std::get<ops::CastAttrs>(c.typed).saturate = std::get<ops::CastLikeAttrs>(op.typed).saturate;
      return cast(std::move(c));
    }
    LOp c = castOp(op.name, op.inputs[0], op.outputs[0], state_.typeOf(op.inputs[1]));
    std::get<ops::CastAttrs>(c.typed).saturate = std::get<ops::CastLikeAttrs>(op.typed).saturate;
    return cast(std::move(c));
  }

  LoweringState& state_;
  std::vector<LOp> out_;
  ValueMap wide_;    // float16 value -> its float32 version (itself when retyped)
  ValueMap narrow_;  // value carried as float32 -> its rounding to float16
  ValueMap alias_;   // result of a Cast to float32 that went -> the value it copied
  std::vector<std::unique_ptr<ir::Tensor>> wideConstants_;  // by value
  size_t valuesWidened_ = 0, weightsWidened_ = 0, inputsWidened_ = 0, outputsRounded_ = 0, castsRemoved_ = 0;
};

}  // namespace

Expected<ir::PassChange> WidenFloat16::run(LoweringState& state) const {
  if (state.options.float16Compute != partitioner::Float16Compute::Float32) return ir::PassChange{};
  Widener w(state);
  CTX_RETURN_IF_ERROR(w.run());
  return w.change();
}

}  // namespace ctxkit::codegen
