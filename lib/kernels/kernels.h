// The op table: for each op kind, its shape rule and its CPU kernel. Used by the runtime to execute
// compiled programs and fallback nodes, and by the compiler for static shapes and constant folding.
#pragma once

#include "cpu/kernel_choice.h"
#include "cpu/thread_pool.h"
#include "cpu/weight_layout.h"
#include "ir/attribute.h"
#include "ir/graph.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"
#include "ops/op_schema.h"
#include "support/status.h"

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::cpu {
struct PanelsB;  // cpu/gemm.h
}  // namespace ctxkit::cpu

namespace ctxkit::kernels {

using cpu::ThreadPool;

// A pool whose threads reserve the kernels' scratch and the GEMM's packing buffers as they start and as the
// buffers grow (threadScratchHooks), so that a steady-state run allocates nothing. Sessions make their pools here.
std::unique_ptr<ThreadPool> makeThreadPool(int threads);

// GEMM panels of constant weights, shared by every op prepared with this store: a caller keeping one per node (the
// fallback interpreter's cache, a compiled program's dynamic op) has a constant B packed once for the node, not once
// per input signature the node meets (a detector's box head sees a new row count in each image). The weights it
// packed from must outlive the store (their addresses identify them); prepared ops hold their own panels, so they
// may outlive it. Thread-safe.
class PanelStore {
public:
  // op(B) (B is K x N, or N x K when transB; rows ldb apart) in panels of `width` columns: packed on the first call
  // for this weight and layout, the same panels afterwards.
  std::shared_ptr<const float[]> panels(const float* b, bool transB, size_t ldb, size_t k, size_t n, size_t width);
  // Weights packed so far: one per weight however many signatures read it (for tests).
  size_t packs() const;

private:
  struct Entry {
    const float* b;
    bool transB;
    size_t ldb, k, n, width;
    std::shared_ptr<const float[]> panels;
  };
  // A node reads one constant B; a few are kept in case its weight input is replaced (the oldest goes first).
  static constexpr size_t kMaxEntries = 4;
  mutable std::mutex mutex_;  // held while packing, so that concurrent first runs pack once
  std::vector<Entry> entries_;
  size_t next_ = 0;  // the entry replaced next once all are taken
  size_t packs_ = 0;
};

// What a kernel knows about the node it runs.
struct OpContext {
  ir::OpKind kind;
  int64_t opset;  // the model's opset for the op's domain
  const ir::Attributes& attrs;
  std::string_view nodeName;   // for error messages
  ThreadPool* pool = nullptr;  // null: run serially
  // The op's typed attributes: the node's, decoded at import (nodeContext), or a program op's. When null (a context
  // built by hand) entry points decode `attrs` per call, and count it (ops::lateDecodes).
  const ops::OpAttrs* typed = nullptr;
  // MatMul and Gemm prepared with a constant float32 B: B in GEMM panels (stored packed, or packed at prepare).
  const cpu::PanelsB* panelsB = nullptr;
  // What the op's plan hook worked out once when it was prepared (kernels/op_entry.h), or null: plan per run.
  const void* plan = nullptr;
  // The node's attributes failed to decode at import: entry points report this error (typed is null).
  const Error* decodeError = nullptr;
  // A compiled program's recorded Conv algorithm (program::Op::kernel), which Conv runs instead of its heuristic.
  cpu::KernelChoice kernel = {};
  // prepare(): where the panels it packs a plain constant B into are shared (the node's store), or null: its own.
  PanelStore* panelStore = nullptr;
};

// The context of graph node `node`: its attributes as decoded at import (ops::decodeNode), or their decoder error.
// `node` must outlive the context.
OpContext nodeContext(const ir::Node& node, ThreadPool* pool = nullptr);

// A value as shape inference sees it: type, concrete shape, and its contents when known (constant).
struct ValueDesc {
  ir::ElemType type = ir::ElemType::Undefined;
  ir::Shape shape;
  const ir::Tensor* value = nullptr;  // non-null when the value is known
  bool present = true;                // false for an omitted optional input ("")
};

struct OutputDesc {
  ir::ElemType type = ir::ElemType::Undefined;
  ir::Shape shape;
};

// True when the op table has a kernel for `kind`.
bool hasKernel(ir::OpKind kind);

// Element types a kernel accepts for its main (data) input; the partitioner's cpu target uses it.
bool supportsType(ir::OpKind kind, ir::ElemType type);

// Whether a float32 Conv with a constant weight of shape `weight` over input `x` runs as a GEMM on the weight in
// panels (B = its [M, C x taps] transposed): group 1, and neither the direct path, a pointwise GEMM on the input
// planes nor bands of output rows that skip taps in the padding is taken. The compiler stores such weights in
// GemmPanelsTransposed; a prepared op packs a plain one once.
bool convOnPanels(const ops::ConvAttrs& attrs, std::span<const int64_t> x, std::span<const int64_t> weight);

// The algorithm Conv runs a float32 Conv of these shapes with when none is recorded (its heuristic: panels as
// convOnPanels says when the weight is constant, then depthwise-small-map, grouped-blocks, direct, gemm), or Heuristic
// when the shapes are not a Conv's. codegen's choose-kernels pass records it; ctxgen --tune may record another of
// convAlgorithms(), all of which compute the same sums.
cpu::ConvAlgorithm convHeuristic(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                 std::span<const int64_t> weight, bool constantWeight);
// The algorithms that can run a float32 Conv of these shapes (Panels only with a constant weight), heuristic's first.
std::vector<cpu::ConvAlgorithm> convAlgorithms(const ops::ConvAttrs& attrs, std::span<const int64_t> x,
                                               std::span<const int64_t> weight, bool constantWeight);

// Output types and shapes from input types and shapes. Ops whose output shape depends on an input's
// contents (Reshape's shape, Slice's starts, ...) need that input's `value`; without it they fail with
// ErrorCode::Unsupported naming the input. Errors name the node and say what was expected.
Expected<std::vector<OutputDesc>> inferOutputs(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                               size_t outputCount);

// Executes the op. `outputs` are allocated by the caller with the types and shapes `inferOutputs` gave;
// inputs may be read-only views (mapped weights). Omitted optional inputs are null pointers.
Status run(const OpContext& ctx, std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs);

// An op prepared once for fixed input types and shapes: attributes decoded, output types and shapes fixed,
// constant float16 inputs widened. `run` only computes; it is const and may run on several threads at once.
class PreparedOp {
public:
  virtual ~PreparedOp() = default;
  const std::vector<OutputDesc>& outputs() const { return outputs_; }
  // Why the op runs slower than it could on this CPU (a stored weight layout for another CPU), or empty.
  const std::string& suboptimal() const { return suboptimal_; }
  // Inputs must have the types and shapes the op was prepared for (checked: a cheap comparison).
  virtual Status run(std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs,
                     ThreadPool* pool) const = 0;

protected:
  std::vector<OutputDesc> outputs_;
  std::string suboptimal_;
};

// Prepares an op for inputs of these types and shapes; inputs with a `value` are constants (weights) that the
// prepared op may keep or convert. `layouts` (empty, or one per input) says how a constant's bytes are arranged:
// a packed weight's `value` is its stored 1-D tensor while its ValueDesc shape stays the logical one. Fails as
// inferOutputs would, and for a packed input the op does not read.
Expected<std::unique_ptr<PreparedOp>> prepare(const OpContext& ctx, std::span<const ValueDesc> inputs,
                                              size_t outputCount, std::span<const cpu::WeightLayout> layouts = {});

// Packs into `store` the panels prepare() would pack for a MatMul or Gemm (ctx) whose B, input 1, is the constant
// `b` (2-D float32), before its other input's shape is known: a fallback node met only at run time (its rows depend on
// computed values) then finds them packed at load. True when it packed (or found) them; false for any other op or B.
bool packPanelsAhead(const OpContext& ctx, const ValueDesc& b, PanelStore& store);

// Convenience for interpreters and constant folding: infer, allocate and run.
Expected<std::vector<ir::Tensor>> evaluate(const OpContext& ctx, std::span<const ir::Tensor* const> inputs,
                                           size_t outputCount);

// Where evaluateInto puts output `index` once its type and shape are known: a tensor of that type and shape (the
// caller's storage, kept and reused between evaluations).
class OutputSink {
public:
  virtual Expected<ir::Tensor*> bind(size_t index, ir::ElemType type, std::span<const int64_t> shape) = 0;

protected:
  ~OutputSink() = default;
};

// What one node's evaluations keep between calls (owned by the caller, one per node and concurrent run), so that
// evaluating again with inputs of the same sizes allocates nothing: the input descriptions, and the temporaries of
// ops with an evaluate hook (sized to the largest evaluation so far).
struct EvalState {
  struct Scratch {
    virtual ~Scratch() = default;
  };
  std::vector<ValueDesc> descs;
  std::unique_ptr<Scratch> scratch;
};

// As evaluate(), for a node whose output shapes depend on its input values: each output bound through `sink` once
// the op knows it. Ops with an evaluate hook (NonMaxSuppression, NonZero) work out values and shapes in one pass;
// the others run their shape rule on the values and then their kernel.
Status evaluateInto(const OpContext& ctx, std::span<const ir::Tensor* const> inputs, size_t outputCount,
                    OutputSink& sink, EvalState& state);

}  // namespace ctxkit::kernels
