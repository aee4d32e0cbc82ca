// A program from a context binary, validated and bound to its weights, ready to execute with the CPU kernels.
#pragma once

#include "format/container.h"
#include "kernels/kernels.h"
#include "program/program.h"
#include "runtime/profile.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// Weightless contexts: gives the bytes of weight `index` of the container, which live in a source model.
using SourceWeightResolver = std::function<Expected<ir::Tensor>(uint32_t index)>;

struct ProgramOptions {
  SourceWeightResolver resolve;  // weightless containers: the weights that live in a source model
  // Make each new frame's arena resident when it is made (at load for the first) and the weights read from the
  // mapped container at load, so that the first run does not pay their page faults; costs that time at load instead.
  bool prefault = true;
  // The bytes of `container` the program was deserialized from. Given, a program whose ops the kernels already
  // checked against these same bytes and weights in this process (an earlier session sharing the container) is
  // prepared without inferring every op's outputs again (kernels::prepareInferred); not for weightless containers,
  // whose weights may come from other source models.
  std::span<const std::byte> programBytes;
  // Weightless containers: the source model `resolve` takes weights from, and whether it checks their hashes.
  // CompiledProgram::load shares such a program only between sessions resolving from this same object, equally
  // checked; with no source, it is not shared.
  std::shared_ptr<const void> source;
  bool sourceVerified = false;
};

class CompiledProgram {
public:
  // A program built in memory (the plugin EP's, just lowered): checked as a program read from a file is
  // (program::validate), then prepared as load() prepares one.
  static Expected<std::unique_ptr<CompiledProgram>> create(program::Program program,
                                                           std::shared_ptr<const format::ContainerView> container,
                                                           std::string name, const ProgramOptions& options = {});

  // Graph `graphIndex` of `container`, deserialized and created. With `share` (sessions sharing context binaries),
  // a program that a live session already loaded from this same container object, with the same arena option, is
  // returned as it is instead of being decoded and prepared again: a program never changes after create() and its
  // runs are thread-safe (each takes a frame of its own), so sessions share its prepared ops, bound weights and
  // frames. A weightless container's program is shared only between sessions reading the same source model object
  // (ProgramOptions::source; the store shares those too).
  // `*reused` (when given) tells whether the program came from another session.
  static Expected<std::shared_ptr<const CompiledProgram>> load(std::shared_ptr<const format::ContainerView> container,
                                                               size_t graphIndex, ProgramOptions options, bool share,
                                                               bool* reused = nullptr);

  ~CompiledProgram();
  CompiledProgram(const CompiledProgram&) = delete;
  CompiledProgram& operator=(const CompiledProgram&) = delete;

  size_t inputCount() const { return program_.inputs.size(); }
  size_t outputCount() const { return program_.outputs.size(); }
  const program::TensorDesc& inputDesc(size_t i) const { return program_.tensors[program_.inputs[i]]; }
  const program::TensorDesc& outputDesc(size_t i) const { return program_.tensors[program_.outputs[i]]; }
  const std::string& name() const { return name_; }
  uint64_t arenaBytes() const { return program_.arenaSize; }

  // Inputs must have the program's types and shapes (an input with a bounded dimension: at most the bound there, the
  // other dimensions equal; ops reading it are prepared for the run's shapes); outputs are allocated here (an output
  // with a bounded dimension at the extent the run computes). Thread-safe: each call runs in a frame of its own (arena
  // and bound values), taken from a pool and returned afterwards.
  Expected<std::vector<ir::Tensor>> run(std::span<const ir::Tensor* const> inputs, kernels::ThreadPool* pool) const;
  // As run(), writing into the caller's output tensors (ONNX Runtime's buffers, say), which must have the
  // program's output types and shapes; a null output gets a temporary buffer. Nothing is copied afterwards. An output
  // with a bounded dimension takes no buffer (null): it is made at the run's extent, into `bounded` when given (one
  // entry per program output, replaced: the last run's are let go of first; the others are left as they are). Its
  // buffer is the frame's, reused by a later run once nothing else holds it.
  Status runInto(std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs,
                 kernels::ThreadPool* pool, std::vector<ir::Tensor>* bounded = nullptr) const;

  // Why the program runs slower than it could on this CPU (weights packed for another CPU's kernel), or empty.
  const std::string& suboptimal() const { return suboptimal_; }

  // Frames made so far (concurrent runs need one each); for tests.
  size_t frameCount() const;
  // Plain constant weights its dynamic ops packed into GEMM panels: once per op, for all their signatures (tests).
  size_t panelPacks() const;
  // Buffers for bounded outputs made by runs (a frame with prefault makes one per bounded output when it is made;
  // a run makes another only while a caller still holds the last one); for tests.
  size_t outputSlotsMadeInRuns() const { return outputSlotsMade_.load(std::memory_order_relaxed); }

  // The program as it runs (the plugin EP serializes it for a context it writes).
  const program::Program& program() const { return program_; }

private:
  // Per-run state: the arena and one bound value per program tensor (weights, arena slices, then the call's
  // inputs, outputs and views of them).
  struct Frame {
    std::shared_ptr<std::byte> arena;
    std::vector<ir::Tensor> bound;
    std::vector<const ir::Tensor*> ins;  // one op's operands, reused so that a run allocates nothing
    std::vector<ir::Tensor*> outs;
    // Bounded programs: per bounded arena tensor or output its whole slot (the bound's bytes), which bound[] views a
    // prefix of at the run's shape; per op with a value-dependent shape what its evaluations keep.
    std::vector<ir::Tensor> slots;
    std::vector<kernels::EvalState> evals;
    // Per dynamic op not preparable from shapes alone (TopK with a computed k, a Reshape or ConstantOfShape to a
    // computed shape): the ops prepared with the values of its small inputs too, for the last kValuePrepared sets of
    // shapes and values met, so that a run meeting one again allocates nothing.
    struct ValuePrepared {
      std::vector<ir::Shape> shapes;   // every input's
      std::vector<ir::Tensor> copies;  // the small inputs' values (empty for the others); the op may point into them
      std::unique_ptr<kernels::PreparedOp> op;  // null: not preparable even so (evaluated)
    };
    std::vector<std::vector<ValuePrepared>> valued;
    std::vector<size_t> valuedNext;  // per op: the entry replaced next once all are taken
  };
  class FrameLease;
  // An op reading or writing a bounded tensor (program::isBounded): prepared per input signature at run time.
  struct DynamicOp;

  CompiledProgram() = default;
  // Checks the valid program against the container (every weight reference resolves, with the recorded type and
  // shape), prepares every op once (attributes decoded, shapes checked against the recorded ones, constant inputs
  // converted), then binds weights and makes the first frame. A weightless container's weights that live in a source
  // model come from `resolve`, and weights the program wants packed are packed here.
  static Expected<std::unique_ptr<CompiledProgram>> prepare(program::Program program,
                                                            std::shared_ptr<const format::ContainerView> container,
                                                            std::string name, const ProgramOptions& options);
  Expected<std::unique_ptr<Frame>> makeFrame() const;
  ProfiledOp describeOp(size_t k) const;  // op k as a run profile names it
  // Runs dynamic op k at the shapes its inputs have in this run, binding its outputs at the shapes it computes.
  Status runDynamic(size_t k, Frame& frame, kernels::ThreadPool* pool) const;
  // Dynamic op k prepared for the shapes of `ins` and the values of the small ones, kept in the frame.
  const Frame::ValuePrepared& preparedWithValues(size_t k, Frame& frame, std::span<const ir::Tensor* const> ins) const;
  // Binds output tensor `t` of op `k` at `shape` (checked against its recorded shape and bounds).
  Expected<ir::Tensor*> bindComputed(size_t k, size_t o, Frame& frame, ir::ElemType type,
                                     std::span<const int64_t> shape) const;

  program::Program program_;
  std::shared_ptr<const format::ContainerView> container_;
  std::shared_ptr<const void> source_;  // weightless containers: kept so that the program store's key stays unique
  bool prefault_ = false;
  std::string name_;
  std::vector<ir::Tensor>
      weights_;  // one per program tensor; only weight and load-time entries (computed at load) are set
  std::vector<std::unique_ptr<kernels::PreparedOp>> prepared_;  // one per op, at load (null: a load-time op, done,
                                                                // or a dynamic op)
  std::vector<std::unique_ptr<DynamicOp>> dynamic_;             // one per op: null for ops prepared at load
  std::string suboptimal_;
  mutable std::mutex framesMutex_;
  mutable std::vector<std::unique_ptr<Frame>> freeFrames_;
  mutable size_t framesMade_ = 0;
  mutable std::atomic<size_t> outputSlotsMade_{0};
};

// Entries the process-wide program stores have looked at so far (lookups, insertions, sweeps): tests bound it to
// keep loading n programs O(n).
size_t programStoreProbes();

}  // namespace ctxkit::runtime
