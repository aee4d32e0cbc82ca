// Binding and executing compiled programs.
#include "runtime/compiled_program.h"

#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "kernels/prepared.h"
#include "runtime/prefault.h"
#include "runtime/profile.h"
#include "runtime/weak_store.h"
#include "support/checked.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <shared_mutex>

namespace ctxkit::runtime {

using program::TensorKind;

namespace {

std::string descText(ir::ElemType type, std::span<const int64_t> shape) {
  return fmt::format("{} {}", ir::elemTypeName(type), ir::shapeToString(shape));
}

// The two stores below key an object by the addresses of the objects it was made from. An address alone could name
// an object freed since and another made in its place; a live entry cannot: what it holds keeps those objects alive
// (a program its container and source model, a remembered container itself), so while it lives nothing else can
// have their addresses.

// Programs whose every recorded output the kernels inferred themselves at an earlier load in this process: by
// container and the program's bytes within it. The container's bytes and weights do not change while it lives.
struct InferredKey {
  const format::ContainerView* container;
  const std::byte* data;
  size_t size;
  bool operator==(const InferredKey&) const = default;
};
struct InferredKeyHash {
  size_t operator()(const InferredKey& k) const {
    return std::hash<const void*>{}(k.container) ^ (std::hash<const void*>{}(k.data) * 31) ^ k.size;
  }
};

// Programs loaded from shared containers and still held by a session, by container, graph index, source model
// (weightless containers) and the options that change what is made.
struct LoadedKey {
  const format::ContainerView* container;
  size_t graph = 0;
  bool prefault = false;
  const void* source = nullptr;
  bool sourceVerified = false;
  bool operator==(const LoadedKey&) const = default;
};
struct LoadedKeyHash {
  size_t operator()(const LoadedKey& k) const {
    return std::hash<const void*>{}(k.container) ^ (k.graph * 0x9e3779b97f4a7c15ull) ^
           (std::hash<const void*>{}(k.source) << 1) ^ (size_t{k.prefault} << 62) ^ (size_t{k.sourceVerified} << 61);
  }
};

struct ProgramStores {
  std::mutex mutex;
  WeakStore<InferredKey, const format::ContainerView, InferredKeyHash> inferred;  // under mutex
  WeakStore<LoadedKey, const CompiledProgram, LoadedKeyHash> loaded;              // under mutex
};

ProgramStores& programStores() {
  static ProgramStores stores;
  return stores;
}

bool wasInferred(const std::shared_ptr<const format::ContainerView>& container, std::span<const std::byte> bytes) {
  ProgramStores& s = programStores();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.inferred.find(InferredKey{container.get(), bytes.data(), bytes.size()}) == container;
}

void rememberInferred(const std::shared_ptr<const format::ContainerView>& container, std::span<const std::byte> bytes) {
  ProgramStores& s = programStores();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.inferred.put(InferredKey{container.get(), bytes.data(), bytes.size()}, container);
}

std::shared_ptr<const CompiledProgram> findLoaded(const LoadedKey& key) {
  ProgramStores& s = programStores();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.loaded.find(key);
}

// Returns the program to use: one that another thread added meanwhile, or `program`.
std::shared_ptr<const CompiledProgram> addLoaded(const LoadedKey& key, std::shared_ptr<const CompiledProgram> program) {
  ProgramStores& s = programStores();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto live = s.loaded.find(key)) return live;
  s.loaded.put(key, program);
  return program;
}

// Runs a load-time op (program::isLoadTimeOp) once: its inputs are weights and load-time tensors already in `held`,
// its outputs are allocated here, packed into their recorded layout, and kept in `held` for every run.
Status runAtLoad(const program::Program& prog, const program::Op& op, const kernels::PreparedOp& prepared,
                 std::vector<ir::Tensor>& held) {
  std::vector<const ir::Tensor*> ins;
  for (int32_t in : op.inputs) ins.push_back(in < 0 ? nullptr : &held[in]);
  std::vector<ir::Tensor> results;
  results.reserve(op.outputs.size());
  for (int32_t out : op.outputs) {
    const program::TensorDesc& d = prog.tensors[out];
    CTX_ASSIGN_OR_RETURN(auto t, ir::Tensor::allocate(d.type, program::toShape(d.shape)));
    results.push_back(std::move(t));
  }
  std::vector<ir::Tensor*> outs;
  for (auto& r : results) outs.push_back(&r);
  CTX_RETURN_IF_ERROR(prepared.run(ins, outs, nullptr));
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    const program::TensorDesc& d = prog.tensors[op.outputs[o]];
    if (!d.layout.plain()) {
      CTX_ASSIGN_OR_RETURN(results[o],
                           cpu::packWeight(d.layout, results[o]).addContext(fmt::format("tensor '{}'", d.name)));
      if (results[o].byteSize() != d.size)
        return makeError(ErrorCode::InvalidGraph, "tensor '{}' records {} bytes in layout {} but packs to {}", d.name,
                         d.size, cpu::layoutName(d.layout), results[o].byteSize());
    }
    held[op.outputs[o]] = std::move(results[o]);
  }
  return Status::ok();
}

// When each load-time tensor that no run reads can be freed (the float64 steps of a weight a weightless context
// rescales at load, docs/weight-sharing.md#derived-weights): after the last load-time op reading it, so that a
// program holds one recipe's steps at a time. SIZE_MAX: kept (a run reads it, or nothing does).
std::vector<size_t> loadTimeReleases(const program::Program& prog) {
  std::vector<size_t> at(prog.tensors.size(), SIZE_MAX);
  std::vector<bool> kept(prog.tensors.size(), false);
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const bool atLoad = program::isLoadTimeOp(prog, prog.ops[i]);
    for (int32_t in : prog.ops[i].inputs) {
      if (in < 0) continue;
      if (atLoad) at[static_cast<size_t>(in)] = i;
      else kept[static_cast<size_t>(in)] = true;
    }
  }
  for (int32_t out : prog.outputs) kept[static_cast<size_t>(out)] = true;
  for (const program::TensorDesc& d : prog.tensors)
    if (d.kind == TensorKind::View && d.index < kept.size()) kept[d.index] = true;
  for (size_t t = 0; t < prog.tensors.size(); ++t)
    if (prog.tensors[t].kind != TensorKind::LoadTime || kept[t]) at[t] = SIZE_MAX;
  return at;
}

}  // namespace

// The ops prepared so far for the input shapes a dynamic op met (null: not preparable from shapes, its output
// shapes depend on values, so it is evaluated), as fallback nodes keep theirs; a few are kept, and a signature
// met once they are taken replaces the least recently used. Their plain constant weights are packed into panels once,
// in `panels`, shared by the ops of every signature.
struct CompiledProgram::DynamicOp {
  struct Entry {
    std::vector<ir::Shape> shapes;  // per input; empty for an omitted one
    std::shared_ptr<const kernels::PreparedOp> op;
  };
  static constexpr size_t kMaxEntries = 16;
  mutable std::shared_mutex mutex;
  mutable std::vector<Entry> entries;  // under mutex
  // Per entry, the tick of its last use (written under the shared lock too: atomics).
  mutable std::array<std::atomic<uint64_t>, kMaxEntries> used{};
  mutable std::atomic<uint64_t> clock{0};
  mutable kernels::PanelStore panels;
  bool packedInput = false;  // reads a weight stored in panels (set at load)
};

CompiledProgram::~CompiledProgram() = default;

size_t CompiledProgram::panelPacks() const {
  size_t n = 0;
  for (const auto& d : dynamic_)
    if (d) n += d->panels.packs();
  return n;
}

namespace {

bool sameShapes(const std::vector<ir::Shape>& shapes, std::span<const ir::Tensor* const> ins) {
  if (shapes.size() != ins.size()) return false;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] ? !ir::sameShape(ins[i]->shape(), shapes[i]) : !shapes[i].empty()) return false;
  return true;
}

}  // namespace

// Hands a frame to one run and takes it back into the pool afterwards, also on error paths.
class CompiledProgram::FrameLease {
public:
  FrameLease(const CompiledProgram& owner, std::unique_ptr<Frame> frame) : owner_(owner), frame_(std::move(frame)) {}
  ~FrameLease() {
    // Drop references to caller memory and to the outputs (and views of them) before the frame is reused.
    const auto& tensors = owner_.program_.tensors;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (tensors[t].kind == TensorKind::Input || tensors[t].kind == TensorKind::Output ||
          tensors[t].kind == TensorKind::View)
        frame_->bound[t].unbind();
    std::lock_guard<std::mutex> lock(owner_.framesMutex_);
    owner_.freeFrames_.push_back(std::move(frame_));
  }
  FrameLease(const FrameLease&) = delete;
  FrameLease& operator=(const FrameLease&) = delete;
  Frame& operator*() const { return *frame_; }

private:
  const CompiledProgram& owner_;
  std::unique_ptr<Frame> frame_;
};

Expected<std::unique_ptr<CompiledProgram::Frame>> CompiledProgram::makeFrame() const {
  auto frame = std::make_unique<Frame>();
  if (program_.arenaSize > 0) {
    auto size = toSize(alignUp(program_.arenaSize, 64));
    if (!size) return makeError(ErrorCode::InvalidGraph, "arena size {} does not fit this host", program_.arenaSize);
    void* p = allocateArena(*size);
    if (!p) return makeError(ErrorCode::IoError, "cannot allocate an arena of {} bytes", program_.arenaSize);
    frame->arena = std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { freeArena(q); });
    if (prefault_) prefaultWritable(p, *size);
  }
  frame->bound = weights_;
  size_t maxIns = 0, maxOuts = 0;
  for (const program::Op& op : program_.ops) {
    maxIns = std::max(maxIns, op.inputs.size());
    maxOuts = std::max(maxOuts, op.outputs.size());
  }
  frame->ins.reserve(maxIns);
  frame->outs.reserve(maxOuts);
  const bool bounded = program::hasBoundedTensors(program_);
  if (bounded) {
    frame->slots.resize(program_.tensors.size());
    frame->evals.resize(program_.ops.size());
    frame->valued.resize(program_.ops.size());
    frame->valuedNext.resize(program_.ops.size(), 0);
  }
  for (size_t t = 0; t < program_.tensors.size(); ++t) {
    const program::TensorDesc& d = program_.tensors[t];
    if (d.kind == TensorKind::Arena) {
      CTX_ASSIGN_OR_RETURN(frame->bound[t], ir::Tensor::mutableView(d.type, program::toShape(d.shape),
                                                                    frame->arena.get() + d.offset, d.size));
      if (program::isBounded(d)) frame->slots[t] = frame->bound[t];
    } else if (d.kind == TensorKind::Output && prefault_ && program::isBounded(d)) {
      // A bounded output's buffer (the bound's bytes, zeroed: resident), made now rather than by the first run.
      CTX_ASSIGN_OR_RETURN(frame->slots[t], ir::Tensor::allocate(d.type, program::toShape(d.shape))
                                                .addContext(fmt::format("graph '{}': output '{}'", name_, d.name)));
    }
  }
  return frame;
}

size_t programStoreProbes() {
  ProgramStores& s = programStores();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.inferred.probes() + s.loaded.probes();
}

size_t CompiledProgram::frameCount() const {
  std::lock_guard<std::mutex> lock(framesMutex_);
  return framesMade_;
}

Expected<std::unique_ptr<CompiledProgram>>
CompiledProgram::create(program::Program prog, std::shared_ptr<const format::ContainerView> container, std::string name,
                        const ProgramOptions& options) {
  if (auto valid = program::validate(prog, container->weights().size()); !valid)
    return valid.takeError().addContext(fmt::format("graph '{}' in '{}'", name, container->displayName()));
  return prepare(std::move(prog), std::move(container), std::move(name), options);
}

Expected<std::unique_ptr<CompiledProgram>>
CompiledProgram::prepare(program::Program prog, std::shared_ptr<const format::ContainerView> container,
                         std::string name, const ProgramOptions& options) {
  const SourceWeightResolver& resolve = options.resolve;
  std::unique_ptr<CompiledProgram> cp(new CompiledProgram());
  cp->name_ = std::move(name);
  auto fail = [&](Error e) {
    return e.addContext(fmt::format("graph '{}' in '{}'", cp->name_, container->displayName()));
  };

  // Checked before it is rounded up (which could wrap) or allocated.
  if (auto within = ir::checkMemoryLimit(prog.arenaSize, "the program's arena"); !within)
    return fail(within.takeError());
  if (!toSize(alignUp(prog.arenaSize, 64)))
    return fail(makeError(ErrorCode::InvalidGraph, "arena size {} does not fit this host", prog.arenaSize));
  cp->weights_.resize(prog.tensors.size());
  for (size_t t = 0; t < prog.tensors.size(); ++t) {
    const program::TensorDesc& d = prog.tensors[t];
    if (d.kind == TensorKind::Weight) {
      const format::WeightInfo& w = container->weights()[d.index];
      // A packed weight is stored as a 1-D tensor of its layout's elements (docs/format/program.md); a weightless
      // container stores every weight plain and it is packed here. A float16-widened weight is stored as float16 in
      // its own shape and widened here.
      const bool widen = d.layout.kind == cpu::WeightLayoutKind::Float16Widened;
      const bool packHere = container->weightless() && !d.layout.plain() && !widen;
      ir::Shape stored = program::toShape(d.shape);
      if (!d.layout.plain() && !packHere && !widen) stored = {static_cast<int64_t>(d.size / ir::elemSize(d.type))};
      const ir::ElemType storedType = widen ? ir::ElemType::Float16 : d.type;
      if (w.type != storedType || !ir::sameShape(w.shape, stored))
        return fail(makeError(ErrorCode::InvalidGraph,
                              "tensor '{}' expects weight {} as {}{} but the weight table has {}", d.name, d.index,
                              descText(storedType, stored), widen ? " (layout float16-widened)" : "",
                              descText(w.type, w.shape)));
      if (!w.inSource()) {
        CTX_ASSIGN_OR_RETURN(cp->weights_[t], container->weightTensor(d.index));
        // The weight's pages of the mapped binary, mapped now rather than faulted in by the first run.
        if (options.prefault && !widen && !packHere)
          prefaultReadable(cp->weights_[t].data(), cp->weights_[t].byteSize());
      } else if (resolve) {
        CTX_ASSIGN_OR_RETURN(cp->weights_[t], resolve(d.index).addContext(fmt::format("tensor '{}'", d.name)));
      } else {
        return fail(makeError(ErrorCode::InvalidArgument,
                              "tensor '{}': weight {} lives in the source model '{}' and no source model was given",
                              d.name, d.index, w.sources.front().model));
      }
      if (widen) {
        const ir::Tensor& half = cp->weights_[t];
        CTX_ASSIGN_OR_RETURN(ir::Tensor wide, ir::Tensor::allocate(ir::ElemType::Float, half.shape()));
        CTX_RETURN_IF_ERROR(cpu::convertElements(ir::ElemType::Float16, half.data(), ir::ElemType::Float,
                                                 wide.mutableData(), static_cast<size_t>(wide.elementCount())));
        cp->weights_[t] = std::move(wide);
      }
      if (packHere) {
        CTX_ASSIGN_OR_RETURN(cp->weights_[t],
                             cpu::packWeight(d.layout, cp->weights_[t]).addContext(fmt::format("tensor '{}'", d.name)));
        if (cp->weights_[t].byteSize() != d.size)
          return fail(makeError(ErrorCode::InvalidGraph, "tensor '{}' records {} bytes in layout {} but packs to {}",
                                d.name, d.size, cpu::layoutName(d.layout), cp->weights_[t].byteSize()));
      }
    }
  }
  // Each op is prepared once; the kernels must agree with every recorded shape before anything runs. The
  // descriptions are reused from op to op (their shapes keep their capacity).
  cp->prepared_.reserve(prog.ops.size());
  // A program this process's kernels already agreed with (the same bytes of the same container) takes its recorded
  // outputs as they are; weights resolved from source models may differ from load to load.
  const bool remember = !options.programBytes.empty() && !container->weightless();
  const bool inferred = remember && wasInferred(container, options.programBytes);
  std::vector<kernels::ValueDesc> descs;
  std::vector<cpu::WeightLayout> layouts;
  const std::vector<size_t> releases = loadTimeReleases(prog);
  std::vector<kernels::OutputDesc> recorded;
  cp->dynamic_.resize(prog.ops.size());
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const program::Op& op = prog.ops[i];
    // An op reading or writing a bounded tensor has its shapes only when it runs: prepared then, per signature.
    auto touchesBounded = [&](std::span<const int32_t> list) {
      return std::any_of(list.begin(), list.end(),
                         [&](int32_t t) { return t >= 0 && program::isBounded(prog.tensors[t]); });
    };
    if (touchesBounded(op.inputs) || touchesBounded(op.outputs)) {
      cp->dynamic_[i] = std::make_unique<DynamicOp>();
      // A weight widened from float16 at load is a plain float32 tensor; the panel layouts only an op prepared for
      // its shapes reads.
      for (int32_t in : op.inputs)
        if (in >= 0 && !prog.tensors[in].layout.plain() &&
            prog.tensors[in].layout.kind != cpu::WeightLayoutKind::Float16Widened)
          cp->dynamic_[i]->packedInput = true;
      cp->prepared_.push_back(nullptr);
      continue;
    }
    if (descs.size() < op.inputs.size()) descs.resize(op.inputs.size());
    layouts.assign(op.inputs.size(), cpu::WeightLayout{});
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      kernels::ValueDesc& v = descs[k];
      const int32_t in = op.inputs[k];
      v.present = in >= 0;
      v.value = nullptr;
      if (in < 0) {
        v.type = ir::ElemType::Undefined;
        v.shape.clear();
        continue;
      }
      const auto& d = prog.tensors[in];
      v.type = d.type;
      v.shape.assign(d.shape.begin(), d.shape.end());
      if (d.kind == TensorKind::Weight || d.kind == TensorKind::LoadTime) {  // (a load-time one is computed by now)
        v.value = &cp->weights_[in];
        // A widened weight is a plain float32 tensor once loaded.
        if (d.layout.kind != cpu::WeightLayoutKind::Float16Widened) layouts[k] = d.layout;
      }
    }
    static const ir::Attributes kNoAttrs;  // a program op has typed attributes only
    kernels::OpContext ctx{op.kind, op.opset, kNoAttrs, op.name, nullptr, &op.typed};
    ctx.kernel = op.kernel;
    const auto ins = std::span(descs).first(op.inputs.size());
    if (inferred) {
      recorded.resize(op.outputs.size());
      for (size_t o = 0; o < op.outputs.size(); ++o) {
        const auto& d = prog.tensors[op.outputs[o]];
        recorded[o].type = d.type;
        recorded[o].shape.assign(d.shape.begin(), d.shape.end());
      }
    }
    const std::span<const kernels::OutputDesc> known(recorded);
    // The op borrows its attributes and name from prog.ops[i], which program_ keeps at the same address.
    auto prepared = kernels::prepareProgramOp(ctx, ins, op.outputs.size(), layouts, inferred ? &known : nullptr);
    if (!prepared) return fail(prepared.takeError().addContext(fmt::format("op {}", i)));
    if (!(*prepared)->suboptimal().empty() && cp->suboptimal_.empty()) cp->suboptimal_ = (*prepared)->suboptimal();
    const auto& outs = (*prepared)->outputs();
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const auto& d = prog.tensors[op.outputs[o]];
      if (outs[o].type != d.type || !ir::sameShape(outs[o].shape, d.shape))
        return fail(makeError(ErrorCode::InvalidGraph, "op {} ('{}') output {} is recorded as {} but computes {}", i,
                              op.name, o, descText(d.type, d.shape), descText(outs[o].type, outs[o].shape)));
    }
    if (program::isLoadTimeOp(prog, op)) {
      // Runs once, now; its results are held like weights (packed in their layout) and the op is not run again.
      if (auto ran = runAtLoad(prog, op, **prepared, cp->weights_); !ran)
        return fail(ran.takeError().addContext(fmt::format("op {} ('{}') at load", i, op.name)));
      for (int32_t in : op.inputs)
        if (in >= 0 && releases[static_cast<size_t>(in)] == i) cp->weights_[static_cast<size_t>(in)] = ir::Tensor();
      cp->prepared_.push_back(nullptr);
      continue;
    }
    cp->prepared_.push_back(std::move(prepared.value()));
  }
  if (remember && !inferred) rememberInferred(container, options.programBytes);
  cp->program_ = std::move(prog);  // the ops' vector moves whole: the prepared ops' borrowed attributes stay put
  cp->container_ = std::move(container);
  cp->source_ = options.source;
  cp->prefault_ = options.prefault;
  // One frame up front: the arena is allocated at load, and any layout error shows here, not in a run.
  CTX_ASSIGN_OR_RETURN(auto first, cp->makeFrame().addContext(fmt::format("graph '{}'", cp->name_)));
  cp->freeFrames_.push_back(std::move(first));
  cp->framesMade_ = 1;
  return cp;
}

Expected<std::shared_ptr<const CompiledProgram>>
CompiledProgram::load(std::shared_ptr<const format::ContainerView> container, size_t graphIndex, ProgramOptions options,
                      bool share, bool* reused) {
  share = share && (!container->weightless() || options.source);
  if (reused) *reused = false;
  const LoadedKey key{container.get(), graphIndex, options.prefault, options.source.get(), options.sourceVerified};
  if (share)
    if (auto live = findLoaded(key)) {
      if (reused) *reused = true;
      return live;
    }
  const format::GraphInfo& graph = container->graphs()[graphIndex];
  options.programBytes = container->programBytes(graphIndex);
  CTX_ASSIGN_OR_RETURN(auto prog,
                       program::deserialize(options.programBytes, container->weights().size(),
                                            fmt::format("graph '{}' in '{}'", graph.name, container->displayName())));
  // deserialize() validated it. Load-time tensors exist from format 1.5 on, in containers that declare them
  // (docs/format/container-v1.md, §10).
  if (program::hasLoadTimeTensors(prog) && !container->loadTimeTensors())
    return makeError(ErrorCode::InvalidGraph,
                     "graph '{}' in '{}' holds load-time tensors but the container does not declare them (flag bit 3)",
                     graph.name, container->displayName());
  CTX_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledProgram> created,
                       prepare(std::move(prog), container, graph.name, options));
  if (!share) return created;
  return addLoaded(key, std::move(created));
}

Expected<std::vector<ir::Tensor>> CompiledProgram::run(std::span<const ir::Tensor* const> inputs,
                                                       kernels::ThreadPool* pool) const {
  std::vector<ir::Tensor> outputs(program_.outputs.size());
  std::vector<ir::Tensor*> outs(program_.outputs.size(), nullptr);
  for (size_t i = 0; i < program_.outputs.size(); ++i) {
    const program::TensorDesc& d = program_.tensors[program_.outputs[i]];
    if (program::isBounded(d)) continue;  // made at the run's extent
    CTX_ASSIGN_OR_RETURN(outputs[i], ir::Tensor::allocate(d.type, program::toShape(d.shape)));
    outs[i] = &outputs[i];
  }
  CTX_RETURN_IF_ERROR(runInto(inputs, outs, pool, &outputs));
  return outputs;
}

ProfiledOp CompiledProgram::describeOp(size_t k) const {
  const program::Op& op = program_.ops[k];
  std::string shape;
  if (!op.outputs.empty() && op.outputs[0] >= 0)
    shape = fmt::format("[{}]", fmt::join(program_.tensors[op.outputs[0]].shape, ","));
  return ProfiledOp{name_, k, std::string(op.name), std::string(ir::opKindName(op.kind)), std::move(shape)};
}

Expected<ir::Tensor*> CompiledProgram::bindComputed(size_t k, size_t o, Frame& frame, ir::ElemType type,
                                                    std::span<const int64_t> shape) const {
  const program::Op& op = program_.ops[k];
  const auto t = static_cast<size_t>(op.outputs[o]);
  const program::TensorDesc& d = program_.tensors[t];
  // Within the bounds (and equal to the exact dimensions) the tensor fits its slot; anything else would write past
  // it. Sound analysis never gets here; a program read from a file is not trusted to be sound.
  if (type != d.type || !program::fitsShape(d, shape))
    return makeError(ErrorCode::InvalidGraph,
                     "graph '{}': op {} ('{}', {}) output {} ('{}') computes {} but is recorded as {} {}{}", name_, k,
                     op.name, ir::opKindName(op.kind), o, d.name, descText(type, shape), ir::elemTypeName(d.type),
                     program::shapeText(d), program::isBounded(d) ? " (\"<=\": at most)" : "");
  ir::Tensor& bound = frame.bound[t];
  if (!program::isBounded(d)) return &bound;
  if (d.kind == TensorKind::Arena) {
    CTX_RETURN_IF_ERROR(bound.rebindAsPrefix(frame.slots[t], type, shape));
  } else {
    // An output: at the run's extent, in a buffer of the bound's bytes the frame keeps for the next run unless someone
    // still holds the one it has (a caller keeping an earlier run's output): a steady run allocates nothing.
    ir::Tensor& slot = frame.slots[t];
    if (slot.empty() || slot.owner().use_count() > 1) {
      CTX_ASSIGN_OR_RETURN(slot, ir::Tensor::allocate(d.type, program::toShape(d.shape)));
      outputSlotsMade_.fetch_add(1, std::memory_order_relaxed);
    }
    CTX_RETURN_IF_ERROR(bound.rebindAsPrefix(slot, type, shape));
  }
  return &bound;
}

namespace {

constexpr size_t kValuePrepared = 16;
constexpr uint64_t kValueInputElements = 64;

// Whether `ins` have the shapes `v` was prepared for and the values it copied.
bool sameValues(const std::vector<ir::Shape>& shapes, const std::vector<ir::Tensor>& copies,
                std::span<const ir::Tensor* const> ins) {
  if (shapes.size() != ins.size()) return false;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) {
      if (!shapes[i].empty() || !copies[i].empty()) return false;
      continue;
    }
    if (!ir::sameShape(ins[i]->shape(), shapes[i])) return false;
    const ir::Tensor& copy = copies[i];
    if (copy.empty()) continue;
    if (ins[i]->type() != copy.type() || ins[i]->byteSize() != copy.byteSize() ||
        (copy.byteSize() > 0 && std::memcmp(ins[i]->data(), copy.data(), copy.byteSize()) != 0))
      return false;
  }
  return true;
}

}  // namespace

const CompiledProgram::Frame::ValuePrepared&
CompiledProgram::preparedWithValues(size_t k, Frame& frame, std::span<const ir::Tensor* const> ins) const {
  std::vector<Frame::ValuePrepared>& kept = frame.valued[k];
  for (const Frame::ValuePrepared& v : kept)
    if (sameValues(v.shapes, v.copies, ins)) return v;
  Frame::ValuePrepared* v = nullptr;
  if (kept.size() < kValuePrepared) {
    v = &kept.emplace_back();
  } else {
    v = &kept[frame.valuedNext[k]];
    frame.valuedNext[k] = (frame.valuedNext[k] + 1) % kValuePrepared;
  }
  const program::Op& op = program_.ops[k];
  v->op.reset();  // it may point into the copies
  v->shapes.assign(ins.size(), ir::Shape());
  v->copies.assign(ins.size(), ir::Tensor());
  std::vector<kernels::ValueDesc> descs(ins.size());
  std::vector<cpu::WeightLayout> layouts(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    kernels::ValueDesc& d = descs[i];
    d.present = ins[i] != nullptr;
    if (!ins[i]) continue;
    const program::TensorDesc& t = program_.tensors[op.inputs[i]];
    d.type = t.type;
    d.shape = v->shapes[i] = ins[i]->shape();
    if (t.kind == TensorKind::Weight || t.kind == TensorKind::LoadTime) {
      d.value = ins[i];
      d.shape = program::toShape(t.shape);
      if (t.layout.kind != cpu::WeightLayoutKind::Float16Widened) layouts[i] = t.layout;
      continue;
    }
    if (ins[i]->type() == ir::ElemType::String || ins[i]->elementCount() > kValueInputElements) continue;
    auto copy = ir::Tensor::copyOf(ins[i]->type(), ins[i]->shape(), ins[i]->bytes());
    if (!copy) continue;
    v->copies[i] = std::move(copy).value();
    d.value = &v->copies[i];
  }
  static const ir::Attributes kNoAttrs;  // a program op has typed attributes only
  kernels::OpContext ctx{op.kind, op.opset, kNoAttrs, op.name, nullptr, &op.typed};
  ctx.kernel = op.kernel;
  ctx.panelStore = &dynamic_[k]->panels;  // a constant weight packed once for every signature
  if (auto made = kernels::prepareProgramOp(ctx, descs, op.outputs.size(), layouts, nullptr))
    v->op = std::move(made).value();
  return *v;
}

Status CompiledProgram::runDynamic(size_t k, Frame& frame, kernels::ThreadPool* pool) const {
  const program::Op& op = program_.ops[k];
  const DynamicOp& dynamic = *dynamic_[k];
  std::vector<const ir::Tensor*>& ins = frame.ins;
  std::vector<ir::Tensor*>& outs = frame.outs;
  ins.clear();
  outs.clear();
  for (int32_t i : op.inputs) {
    ins.push_back(i < 0 ? nullptr : &frame.bound[i]);
    // A bounded output is bound only once its op has run: a program reading one before that is not a sound one.
    if (i >= 0 && frame.bound[i].empty())
      return makeError(ErrorCode::InvalidGraph,
                       "graph '{}': op {} ('{}', {}) reads tensor {} ('{}') before any op writes it", name_, k, op.name,
                       ir::opKindName(op.kind), i, program_.tensors[i].name);
  }
  std::shared_ptr<const kernels::PreparedOp> prepared;
  bool known = false;
  {
    std::shared_lock lock(dynamic.mutex);
    for (size_t e = 0; e < dynamic.entries.size() && !known; ++e)
      if (sameShapes(dynamic.entries[e].shapes, ins)) {
        prepared = dynamic.entries[e].op;
        known = true;
        dynamic.used[e].store(++dynamic.clock, std::memory_order_relaxed);
      }
  }
  static const ir::Attributes kNoAttrs;  // a program op has typed attributes only
  if (!known) {
    // Prepared from the shapes this run has, with the weights' values (as at load); values computed by the run are
    // not looked at, so an op whose output shapes depend on them is not preparable and is evaluated below.
    std::vector<kernels::ValueDesc> descs(op.inputs.size());
    std::vector<cpu::WeightLayout> layouts(op.inputs.size());
    std::vector<ir::Shape> shapes(op.inputs.size());
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      kernels::ValueDesc& v = descs[i];
      v.present = ins[i] != nullptr;
      if (!ins[i]) continue;
      const program::TensorDesc& d = program_.tensors[op.inputs[i]];
      v.type = d.type;
      shapes[i] = ins[i]->shape();
      v.shape = ins[i]->shape();
      if (d.kind == TensorKind::Weight || d.kind == TensorKind::LoadTime) {
        v.value = ins[i];
        v.shape = program::toShape(d.shape);  // a packed weight's logical shape
        if (d.layout.kind != cpu::WeightLayoutKind::Float16Widened) layouts[i] = d.layout;
      }
    }
    kernels::OpContext ctx{op.kind, op.opset, kNoAttrs, op.name, nullptr, &op.typed};
    ctx.kernel = op.kernel;
    ctx.panelStore = &dynamic.panels;  // the program's weights live as long as it does
    if (auto made = kernels::prepareProgramOp(ctx, descs, op.outputs.size(), layouts, nullptr))
      prepared = std::shared_ptr<const kernels::PreparedOp>(std::move(made).value());
    std::unique_lock lock(dynamic.mutex);
    size_t at = dynamic.entries.size();
    if (at < DynamicOp::kMaxEntries) {
      dynamic.entries.push_back({std::move(shapes), prepared});
    } else {
      at = 0;  // the least recently used goes
      for (size_t e = 1; e < DynamicOp::kMaxEntries; ++e)
        if (dynamic.used[e].load(std::memory_order_relaxed) < dynamic.used[at].load(std::memory_order_relaxed)) at = e;
      dynamic.entries[at] = {std::move(shapes), prepared};
    }
    dynamic.used[at].store(++dynamic.clock, std::memory_order_relaxed);
  }
  if (prepared) {
    const auto& described = prepared->outputs();
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      CTX_ASSIGN_OR_RETURN(ir::Tensor * out, bindComputed(k, o, frame, described[o].type, described[o].shape));
      outs.push_back(out);
    }
    return prepared->run(ins, outs, pool);
  }
  // Prepared with the values of its small computed inputs (a TopK's k, a Reshape's shape), kept while they stay.
  if (const Frame::ValuePrepared& v = preparedWithValues(k, frame, ins); v.op) {
    const auto& described = v.op->outputs();
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      CTX_ASSIGN_OR_RETURN(ir::Tensor * out, bindComputed(k, o, frame, described[o].type, described[o].shape));
      outs.push_back(out);
    }
    return v.op->run(ins, outs, pool);
  }
  if (dynamic.packedInput)
    return makeError(ErrorCode::InvalidGraph,
                     "graph '{}': op {} ('{}', {}) reads a packed weight but cannot be prepared for the shapes of "
                     "this run",
                     name_, k, op.name, ir::opKindName(op.kind));
  // Output shapes that depend on values (the roots: NonZero, NonMaxSuppression, TopK with a computed k; a Reshape to a
  // computed shape): each output bound once the op knows its shape.
  struct Sink final : kernels::OutputSink {
    const CompiledProgram& program;
    size_t op;
    Frame& frame;
    Sink(const CompiledProgram& p, size_t k, Frame& f) : program(p), op(k), frame(f) {}
    Expected<ir::Tensor*> bind(size_t index, ir::ElemType type, std::span<const int64_t> shape) override {
      if (index >= program.program_.ops[op].outputs.size())
        return makeError(ErrorCode::Internal, "graph '{}': op {} has no output {}", program.name_, op, index);
      return program.bindComputed(op, index, frame, type, shape);
    }
  } sink(*this, k, frame);
  kernels::OpContext ctx{op.kind, op.opset, kNoAttrs, op.name, pool, &op.typed};
  ctx.kernel = op.kernel;
  // Evaluated outputs are bound only as the op reaches them: clear what an earlier run bound.
  for (int32_t out : op.outputs)
    if (program::isBounded(program_.tensors[out]) && program_.tensors[out].kind == TensorKind::Output)
      frame.bound[out].unbind();
  return kernels::evaluateInto(ctx, ins, op.outputs.size(), sink, frame.evals[k]);
}

Status CompiledProgram::runInto(std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs,
                                kernels::ThreadPool* pool, std::vector<ir::Tensor>* bounded) const {
  const auto& tensors = program_.tensors;
  if (inputs.size() != program_.inputs.size())
    return makeError(ErrorCode::InvalidArgument, "graph '{}' takes {} inputs but {} were given", name_,
                     program_.inputs.size(), inputs.size());
  if (outputs.size() != program_.outputs.size())
    return makeError(ErrorCode::InvalidArgument, "graph '{}' makes {} outputs but {} were given", name_,
                     program_.outputs.size(), outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& d = tensors[program_.inputs[i]];
    if (!inputs[i] || inputs[i]->type() != d.type || !program::fitsShape(d, inputs[i]->shape()))
      return makeError(ErrorCode::InvalidArgument, "graph '{}' input {} ('{}') was compiled for {} {}{} but got {}",
                       name_, i, d.name, ir::elemTypeName(d.type), program::shapeText(d),
                       program::isBounded(d) ? " (\"<=\": at most)" : "",
                       inputs[i] ? descText(inputs[i]->type(), inputs[i]->shape()) : std::string("nothing"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& d = tensors[program_.outputs[i]];
    if (outputs[i] && program::isBounded(d))
      return makeError(ErrorCode::InvalidArgument,
                       "graph '{}' output {} ('{}') has a bounded shape {}: it is made at the run's extent, not given",
                       name_, i, d.name, program::shapeText(d));
    if (outputs[i] && (outputs[i]->type() != d.type || !ir::sameShape(outputs[i]->shape(), d.shape)))
      return makeError(ErrorCode::InvalidArgument, "graph '{}' output {} ('{}') is {} but the buffer given is {}",
                       name_, i, d.name, descText(d.type, d.shape), descText(outputs[i]->type(), outputs[i]->shape()));
  }
  std::unique_ptr<Frame> frame;
  {
    std::lock_guard<std::mutex> lock(framesMutex_);
    if (!freeFrames_.empty()) {
      frame = std::move(freeFrames_.back());
      freeFrames_.pop_back();
    }
  }
  if (!frame) {
    CTX_ASSIGN_OR_RETURN(frame, makeFrame().addContext(fmt::format("graph '{}'", name_)));
    std::lock_guard<std::mutex> lock(framesMutex_);
    ++framesMade_;
  }
  FrameLease lease(*this, std::move(frame));
  kernels::ThreadPool::RunScope running(pool);  // workers stay awake between the ops
  std::vector<ir::Tensor>& bound = (*lease).bound;
  // The caller's entries for bounded outputs are replaced by this run's: let go of the last run's first, so that its
  // buffers can be reused (bindComputed).
  if (bounded)
    for (size_t i = 0; i < outputs.size() && i < bounded->size(); ++i)
      if (program::isBounded(tensors[program_.outputs[i]])) (*bounded)[i].unbind();
  for (size_t i = 0; i < inputs.size(); ++i) bound[program_.inputs[i]] = *inputs[i];
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int32_t t = program_.outputs[i];
    if (outputs[i]) {
      bound[t] = *outputs[i];  // a view of the caller's buffer
    } else if (program::isBounded(tensors[t])) {
      bound[t].unbind();  // made when its op knows its shape
    } else {
      CTX_ASSIGN_OR_RETURN(bound[t], ir::Tensor::allocate(tensors[t].type, program::toShape(tensors[t].shape)));
    }
  }
  for (size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].kind == TensorKind::View)
      CTX_RETURN_IF_ERROR(bound[t].rebindAsView(bound[tensors[t].index], tensors[t].shape));
  std::vector<const ir::Tensor*>& ins = (*lease).ins;
  std::vector<ir::Tensor*>& outs = (*lease).outs;
  RunProfile* profile = activeProfile();
  for (size_t k = 0; k < program_.ops.size(); ++k) {
    if (dynamic_[k]) {
      const auto start = profile ? RunProfile::Clock::now() : RunProfile::Clock::time_point{};
      if (Status s = runDynamic(k, *lease, pool); !s) return s;
      if (profile) profile->record(this, k, RunProfile::Clock::now() - start, [&] { return describeOp(k); });
      continue;
    }
    if (!prepared_[k]) continue;  // a load-time op, run when the program was loaded
    const program::Op& op = program_.ops[k];
    ins.clear();
    outs.clear();
    for (int32_t i : op.inputs) ins.push_back(i < 0 ? nullptr : &bound[i]);
    for (int32_t o : op.outputs) outs.push_back(&bound[o]);
    const auto start = profile ? RunProfile::Clock::now() : RunProfile::Clock::time_point{};
    // The context is formatted only on failure: a run allocates nothing.
    if (Status s = prepared_[k]->run(ins, outs, pool); !s)
      return std::move(s).addContext(fmt::format("graph '{}'", name_));
    if (profile) profile->record(this, k, RunProfile::Clock::now() - start, [&] { return describeOp(k); });
  }
  if (bounded)
    for (size_t i = 0; i < outputs.size(); ++i)
      if (program::isBounded(tensors[program_.outputs[i]]) && i < bounded->size())
        (*bounded)[i] = bound[program_.outputs[i]];
  return Status::ok();
}

}  // namespace ctxkit::runtime
