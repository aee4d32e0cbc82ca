// What a Loop or Scan node keeps between its iterations and between runs on the session's frame path: the body's
// iteration inputs, loop-carried values, scan-input slices and stacked scan outputs, in buffers reused once grown.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// Values of one element type and shape, one per iteration, placed along an axis of one output tensor kept between
// runs: grown only when an output needs more bytes than any before it (a Loop's output, whose length is known only at
// the end, doubles its buffer).
class StackedOutput {
public:
  // Forgets the previous values; `length` is how many will be placed (0: unknown, each placed after the last).
  void reset(int64_t axis, int64_t length);
  // Places `slice` at `position` along the axis (of the output, rank slice.rank() + 1; negative counts from the end).
  // Every slice must have the first's type and shape.
  Status place(const ir::Tensor& slice, int64_t position);
  // The output: `count` slices (the length given to reset, or as many as were placed); `emptyType` is its type when
  // no slice was placed (shape {0}).
  Expected<const ir::Tensor*> finish(ir::ElemType emptyType);

private:
  Status reserve(uint64_t bytes, uint64_t kept);
  int64_t axis_ = 0, length_ = 0, count_ = 0;
  ir::ElemType type_ = ir::ElemType::Undefined;
  ir::Shape slice_, shape_;
  uint64_t sliceBytes_ = 0;
  ir::Tensor buffer_, value_;
  std::vector<std::string> strings_;
};

inline constexpr size_t kNoSlot = static_cast<size_t>(-1);  // no slot: an omitted input or output

// A Loop or Scan node as planned at load: its body (a block of the session's plan) and attributes checked against
// the node's inputs and outputs.
struct IterationPlan {
  size_t body = kNoSlot;               // the body's block in the session's plan; kNoSlot: not a Loop or Scan
  const ir::Graph* graph = nullptr;    // the body graph
  size_t carried = 0, scanInputs = 0;  // loop-carried values (Scan: states), scan inputs (Scan)
  std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;  // Scan: its scan inputs' and outputs' axes and directions
};

// The run frame a body runs in: the frame's values and own tensors by slot, the body's input and output slots and
// the slots its values (its subgraphs' too) take, and how to run the body once.
class BodyFrame {
public:
  std::span<const ir::Tensor*> values;
  std::span<ir::Tensor> owned;
  std::span<const size_t> inputs, outputs;
  size_t slotBegin = 0, slotEnd = 0;
  const std::vector<bool>* madeOnce = nullptr;  // by slot: a Constant's output, made once per frame (never handed on)
  virtual Status runBody() = 0;

protected:
  ~BodyFrame() = default;
};

// One Loop or Scan node's iteration state in one run frame.
struct IterationState {
  std::vector<const ir::Tensor*> ins;       // the node's inputs (the frame's input list is reused by body nodes)
  std::vector<const ir::Tensor*> current;   // this iteration's loop-carried inputs
  std::vector<const ir::Tensor*> produced;  // this iteration's body outputs
  ir::Tensor trip, cond;                    // a Loop body's iteration number and condition inputs
  std::vector<ir::Tensor> carried, next;    // loop-carried values: the current ones, the next ones being gathered
  // Per loop-carried value: the most bytes it took in any iteration of any run, and the body slot whose buffer it
  // was last handed on in by swapping (kNoSlot: copied).
  std::vector<uint64_t> peak;
  std::vector<size_t> swappedSlot;
  std::vector<ir::Tensor> slices;      // Scan: this iteration's slice of each scan input
  std::vector<StackedOutput> stacked;  // scan outputs
};

// Runs Loop node `plan` (its inputs in it.ins) in `f` while the trip count and the condition allow: the body's inputs
// set by pointer each iteration, loop-carried values handed on (handOn in iteration.cpp), scan outputs stacked into
// kept buffers; then points the node's output slots `outs` at the final values.
Status runLoop(BodyFrame& f, const IterationPlan& plan, IterationState& it, std::span<const size_t> outs);
// Runs Scan node `plan` (opset 9 on; its inputs in it.ins) in `f` once per slice of its scan inputs, likewise.
Status runScan(BodyFrame& f, const IterationPlan& plan, IterationState& it, std::span<const size_t> outs);

// `t` becomes a writable tensor of `type` and `shape` (bytes not cleared): in its own buffer when that has room
// (ir::Tensor::refit), else in a new one at least twice the size of the one it outgrew (up to the memory limit), so
// that a value growing over the iterations of a Loop (a Concat onto a carried value) reallocates a logarithmic number
// of times, and a later run of the same sizes not at all.
Status fitOrGrow(ir::Tensor& t, ir::ElemType type, std::span<const int64_t> shape);

// A condition's truth: one non-zero element.
bool isTrue(const ir::Tensor& t);
// `t` becomes a scalar of `type` holding `value` (an int64 or a bool), allocated only the first time.
Status setScalar(ir::Tensor& t, ir::ElemType type, int64_t value);
// `dst` becomes a copy of `src`, in dst's buffer when it has src's type and shape and nothing else shares it.
Status copyInto(ir::Tensor& dst, const ir::Tensor& src);
// `dst` becomes slice `index` of `src` along `axis` (src's rank one less), in dst's buffer when it fits as above.
Status sliceInto(ir::Tensor& dst, const ir::Tensor& src, size_t axis, int64_t index);

}  // namespace ctxkit::runtime
