// Session loading from a model in memory (claiming EPContext nodes, validation, compatibility) and execution:
// the runtime core, free of protobuf and onnx_io.
#include "runtime/session.h"

#include "epcontext/contract.h"
#include "format/container.h"
#include "ir/graph_check.h"
#include "kernels/kernels.h"
#include "program/program.h"
#include "runtime/compatibility.h"
#include "runtime/compiled_program.h"
#include "runtime/context_store.h"
#include "runtime/interpreter.h"
#include "runtime/iteration.h"
#include "runtime/prefault.h"
#include "runtime/profile.h"
#include "runtime/shared_model.h"
#include "runtime/source_model.h"
#include "runtime/source_pins.h"
#include "support/file_io.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace ctxkit::runtime {

namespace fs = std::filesystem;

using ir::nodeLabel;

struct Session::Impl {
  std::shared_ptr<SharedModel> shared;  // the model and its fallback ops, maybe shared with other sessions
  const ir::Model& model() const { return shared->model; }
  std::string displayName;
  SessionOptions options;
  std::vector<ir::ValueInfo> inputs;
  std::vector<ir::ValueInfo> outputs;
  std::vector<std::string> warnings;
  SessionStats stats;
  Compatibility compatibility = Compatibility::NotApplicable;
  std::vector<std::shared_ptr<const format::ContainerView>> contexts;
  std::map<fs::path, std::shared_ptr<const format::ContainerView>> contextsByPath;  // canonical path -> mapping
  std::map<size_t, std::shared_ptr<const CompiledProgram>> programs;                // node index -> program
  Scope constants;                                                                  // initializers, shared by every run
  ir::ValueTable valueTable;                                                        // the top-level graph's values
  std::vector<size_t> lastUse;          // by value id: the last node reading it (an input or a subgraph read)
  std::unique_ptr<ScopedGraph> scoped;  // the graph prepared for the Scope interpreter, when the plan cannot take it
  std::unique_ptr<kernels::ThreadPool> pool;

  // The graph with every value numbered (a slot), so that a run finds values by index and keeps what it needs
  // between runs in a frame: no name lookups, and no allocation once a frame has run with these shapes
  // (docs/runtime.md#allocations). Subgraphs (If branches, Loop and Scan bodies) are planned the same way, their
  // values in slots after the top-level graph's and their reads of enclosing graphs' values resolved to those slots at
  // load. Graphs the plan cannot take (a subgraph that is not well formed) run through the Scope interpreter.
  static constexpr size_t kNoSlot = runtime::kNoSlot;
  struct NodePlan {
    const ir::Graph* graph = nullptr;  // the graph holding the node (the model's, or a subgraph)
    size_t index = 0;                  // the node's index in `graph`
    std::vector<size_t> ins;           // kNoSlot: an omitted optional input
    std::vector<size_t> outs;          // kNoSlot: an omitted output
    const CompiledProgram* program = nullptr;
    std::vector<kernels::OutputDesc> programOutputs;  // the program's output types and shapes
    bool boundedOutputs = false;  // some program output has a bounded shape: made by the program at the run's extent
    size_t thenBlock = kNoSlot, elseBlock = kNoSlot;  // If: its branches in RunPlan::blocks
    IterationPlan iteration;                          // Loop, Scan (iteration.body: its body in RunPlan::blocks)
    const ir::Node& node() const { return graph->nodes[index]; }
  };
  // A graph's nodes (plan.nodes[begin, end)), the slots of its inputs (a Loop or Scan body's) and outputs, and the
  // slots its values and its subgraphs' take: [slotBegin, slotEnd).
  struct Block {
    size_t begin = 0, end = 0;
    std::vector<size_t> inputs, outputs;
    size_t slotBegin = 0, slotEnd = 0;
  };
  struct RunPlan {
    bool usable = false;
    size_t slots = 0;
    std::vector<std::pair<size_t, const ir::Tensor*>> constants;  // initializer slots (the branches' included)
    std::vector<size_t> inputs;                                   // per feed
    std::vector<size_t> outputs;                                  // per graph output
    std::vector<NodePlan> nodes;  // the model's nodes first (plan index = node index), then the subgraphs'
    std::vector<Block> blocks;    // blocks[0]: the model's graph
    std::vector<bool> madeOnce;   // by slot: a Constant's output, made once per frame (never handed on)
  } plan;
  // An op prepared with the values of a node's small inputs (copied here, an empty tensor for the others), or null
  // when it could not be.
  struct ValuePrepared {
    std::vector<ir::Tensor> copies;
    std::unique_ptr<kernels::PreparedOp> op;
  };
  static constexpr size_t kValuePrepared = 16;
  static constexpr size_t kSeenSignatures = 16;
  // Per-run state, one per concurrent run, reused: where each value is this run, the tensors the frame owns
  // (node outputs not written into the caller's), and each fallback node's prepared op for its last input shapes.
  struct NodeState {
    std::vector<PreparedNodeCache::Slot> signature;
    std::shared_ptr<const kernels::PreparedOp> op;  // null: not preparable for `signature` (evaluated one-shot)
    bool looked = false;                            // `op` was looked up for `signature`
    // The ops of the last kSeenSignatures signatures met (a node in a Loop body whose inputs change shape from one
    // iteration to the next meets several in each run), so that coming back to one looks nothing up.
    std::vector<std::pair<std::vector<PreparedNodeCache::Slot>, std::shared_ptr<const kernels::PreparedOp>>> seen;
    size_t seenNext = 0;  // the entry replaced next once all are taken
    // Not preparable from `signature` alone: the ops prepared with the values of the small inputs too, for the last
    // kValuePrepared sets of values met (a node in a Loop body meets one per iteration: a Slice at the iteration
    // number); the oldest is replaced when a new set comes.
    std::vector<ValuePrepared> valued;
    size_t valuedNext = 0;  // the entry replaced next once all are taken
    // Not preparable at all (evaluated every run): its outputs, views of buffers kept here and grown only when an
    // output needs more bytes, and the op's own kept temporaries.
    std::vector<ir::Tensor> evalOuts, evalBuffers;
    kernels::EvalState eval;
    std::unique_ptr<IterationState> iteration;  // Loop, Scan
  };
  // Binds a node's evaluated outputs into its NodeState's kept buffers. They are not zeroed when reused: the kernels
  // write every element of their outputs (as compiled programs' reused arenas and the frame's own tensors rely on).
  struct KeptOutputs final : kernels::OutputSink {
    NodeState& state;
    const ir::Node& node;
    size_t nodeIndex;
    KeptOutputs(NodeState& s, const ir::Node& n, size_t i) : state(s), node(n), nodeIndex(i) {}
    // "node 'x' (NonZero): output 0 ('y')" for errors.
    std::string outputLabel(size_t index) const {
      return fmt::format("{}: output {} ('{}')", nodeLabel(node, nodeIndex), index,
                         index < node.outputs.size() ? node.outputs[index] : std::string());
    }
    Expected<ir::Tensor*> bind(size_t index, ir::ElemType type, std::span<const int64_t> shape) override {
      if (index >= state.evalOuts.size()) {
        state.evalOuts.resize(index + 1);
        state.evalBuffers.resize(index + 1);
      }
      ir::Tensor& value = state.evalOuts[index];
      value.unbind();  // its reference to the buffer
      const auto count = ir::elementCount(shape);
      if (type == ir::ElemType::String) {
        if (!count)
          return makeError(ErrorCode::InvalidGraph, "{} has shape {}, whose element count is not representable",
                           outputLabel(index), ir::shapeToString(shape));
        value = ir::Tensor::strings(ir::Shape(shape.begin(), shape.end()),
                                    std::vector<std::string>(static_cast<size_t>(*count)));
        return &value;
      }
      const auto bytes = count ? ir::storageBytes(type, *count) : std::nullopt;
      if (!bytes)
        return makeError(ErrorCode::InvalidGraph, "{} is a {} tensor of shape {}, whose byte size is not representable",
                         outputLabel(index), ir::elemTypeName(type), ir::shapeToString(shape));
      ir::Tensor& buffer = state.evalBuffers[index];
      // Another value still sharing the buffer (a caller's tensor) keeps it: a new one is made.
      if (!(buffer.owner() && buffer.owner().use_count() == 1 && buffer.byteSize() >= *bytes)) {
        auto made = ir::Tensor::allocate(ir::ElemType::Uint8, {static_cast<int64_t>(*bytes)});
        if (!made) return made.takeError().addContext(outputLabel(index));
        buffer = std::move(*made);
      }
      if (Status bound = value.rebindAsPrefix(buffer, type, shape); !bound)
        return bound.takeError().addContext(outputLabel(index));  // (the label only made on an error)
      return &value;
    }
  };
  // Inputs of at most this many elements are given to the op by value when it cannot be prepared without.
  static constexpr uint64_t kValueInputElements = 64;
  struct RunFrame {
    std::vector<const ir::Tensor*> values;
    std::vector<ir::Tensor> owned;
    std::vector<NodeState> nodes;
    std::vector<const ir::Tensor*> ins;
    std::vector<ir::Tensor*> outs;
    std::vector<ir::Tensor*> callerOut;  // per slot: the caller's output tensor, or null
  };
  mutable std::mutex framesMutex;
  mutable std::vector<std::unique_ptr<RunFrame>> freeFrames;

  // Weightless contexts: source models loaded so far, by the file they came from ("" for the buffer).
  std::map<fs::path, std::shared_ptr<const SourceInitializers>> sourceModels;
  std::set<std::pair<const format::ContainerView*, uint32_t>> verifiedSourceWeights;  // --verify: hashed already

  // The source model a weightless graph of node `attrs` takes its weights from (docs/weight-sharing.md#weightless:
  // ORT's precedence, buffer > ep.context_source_model_path > onnx_model_filename beside the model).
  Expected<std::shared_ptr<const SourceInitializers>>
  sourceModelFor(const epcontext::NodeAttributes& attrs, const std::string& label, const fs::path& contextDir) {
    fs::path path;
    std::string how;
    if (!options.sourceModelBuffer.empty()) {
      how = "the source model buffer";
    } else if (!options.sourceModelPath.empty()) {
      path = options.sourceModelPath;
      how = fmt::format("source model '{}' (given)", path.string());
    } else {
      if (attrs.onnxModelFilename.empty())
        return makeError(ErrorCode::InvalidArgument,
                         "{}: the context is weightless but the node has no {} and no source model was given "
                         "(ctxrun --source-model, ep.context_source_model_path)",
                         label, epcontext::attr::kOnnxModelFilename);
      auto resolved = resolveInside(contextDir, attrs.onnxModelFilename);
      if (!resolved)
        return resolved.takeError().addContext(fmt::format("{}: {}", label, epcontext::attr::kOnnxModelFilename));
      path = *resolved;
      how = fmt::format("source model '{}' ({} beside the model)", path.string(), epcontext::attr::kOnnxModelFilename);
    }
    std::error_code ec;
    if (options.sourceModelBuffer.empty()) {
      path = fs::canonical(path, ec);
      if (ec)
        return makeError(
            ErrorCode::NotFound,
            "{}: the context is weightless: its weights are in {}, which does not exist (give it with ctxrun "
            "--source-model or ep.context_source_model_path)",
            label, how);
    }
    if (auto it = sourceModels.find(path); it != sourceModels.end()) return it->second;
    // A file is read once per process while sessions sharing contexts use it (as their .bin is mapped once).
    auto model = options.sourceModelBuffer.empty()
                     ? openSharedSourceModel(path, options.shareContexts)
                     : readSourceInitializers(options.sourceModelBuffer, nullptr, contextDir, "buffer");
    if (!model)
      return model.takeError().addContext(
          fmt::format("{}: reading the weights of a weightless context from {}", label, how));
    sourceModels[path] = *model;
    return *model;
  }

  // Weight `index` of weightless container `view`, taken from `source`: the initializer the container names for
  // `sourceName` (the graph's onnx_model_filename), with the recorded type and size, hashed when verifying.
  Expected<ir::Tensor> sourceWeight(const format::ContainerView& view, uint32_t index, const std::string& sourceName,
                                    const std::shared_ptr<const SourceInitializers>& source) {
    const format::WeightInfo& w = view.weights()[index];
    const format::WeightInfo::Source* where = nullptr;
    for (const auto& s : w.sources)
      if (s.model == sourceName) where = &s;
    if (!where)
      return makeError(ErrorCode::InvalidGraph, "'{}': weight {} records no place in source model '{}' (only in {})",
                       view.displayName(), index, sourceName, w.sources.front().model);
    auto found = source->byName.find(where->initializer);
    if (found == source->byName.end())
      return makeError(
          ErrorCode::InvalidGraph,
          "'{}': weight {} is initializer '{}' of source model '{}', but {} has no initializer of that name "
          "(a different model?)",
          view.displayName(), index, where->initializer, sourceName, source->displayName);
    const ir::Tensor& t = found->second;
    if (t.type() != w.type || t.byteSize() != w.size)
      return makeError(ErrorCode::InvalidGraph,
                       "'{}': weight {} expects initializer '{}' of source model '{}' as {} ({} bytes) but it is {} {} "
                       "({} bytes); the source model changed since compiling",
                       view.displayName(), index, where->initializer, sourceName, ir::elemTypeName(w.type), w.size,
                       ir::elemTypeName(t.type()), ir::shapeToString(t.shape()), t.byteSize());
    // Graphs sharing a weight resolve it once each: its bytes are hashed the first time only.
    if (options.verifyWeights && verifiedSourceWeights.insert({&view, index}).second)
      if (Hash128 actual = hash128(t.bytes()); actual != w.hash)
        return makeError(
            ErrorCode::InvalidGraph,
            "'{}': weight {} fails its hash: initializer '{}' of source model '{}' is not the one compiled "
            "(the table records {}, its bytes hash to {})",
            view.displayName(), index, where->initializer, sourceName, w.hash.toHex(), actual.toHex());
    return ir::Tensor::view(w.type, w.shape, t.bytes().data(), t.byteSize(), source);
  }

  Status checkCompatibility(const format::ContainerView& view, const std::string& where) {
    CompatibilityVerdict verdict = assessCompatibility(view.compat());
    if (verdict.level == Compatibility::Unsupported)
      return makeError(ErrorCode::Unsupported, "{}: {} ({})", where, verdict.reason, compatibilityName(verdict.level));
    if (verdict.level == Compatibility::PreferRecompilation) return preferRecompilation(where, verdict.reason);
    compatibility = std::max(compatibility, verdict.level);
    return Status::ok();
  }

  // A context that runs, but not as well as a recompiled one would: a warning, or an error under the strict option.
  Status preferRecompilation(const std::string& where, const std::string& reason) {
    const auto level = Compatibility::PreferRecompilation;
    if (options.failOnSuboptimal)
      return makeError(ErrorCode::InvalidGraph, "{}: {} ({}, failing as asked)", where, reason,
                       compatibilityName(level));
    warnings.push_back(fmt::format("{}: {}; recompiling is recommended ({})", where, reason, compatibilityName(level)));
    compatibility = std::max(compatibility, level);
    return Status::ok();
  }

  Expected<std::shared_ptr<const format::ContainerView>>
  openContext(const epcontext::NodeAttributes& attrs, const std::string& label, const fs::path& contextDir) {
    namespace attr = epcontext::attr;
    if (!attrs.cacheContext)
      return makeError(ErrorCode::InvalidGraph, "{}: {}=1 but no string attribute {}", label, attr::kMainContext,
                       attr::kEpCacheContext);
    if (attrs.embedMode == 1) {
      // A view of the node's attribute, which the model holds unchanged for as long as the view keeps it alive: the
      // context bytes are not copied again.
      const std::string_view embedded = *attrs.cacheContext;
      std::shared_ptr<const void> owner(shared, embedded.data());
      CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::open(std::as_bytes(std::span(embedded)), std::move(owner),
                                                                  fmt::format("{} (embedded context)", label)));
      return std::make_shared<const format::ContainerView>(std::move(view));
    }
    if (attrs.embedMode != 0)
      return makeError(ErrorCode::InvalidGraph, "{}: {} is {}; expected 0 or 1", label, attr::kEmbedMode,
                       attrs.embedMode);
    auto path = resolveInside(contextDir, std::string(*attrs.cacheContext));
    if (!path) return path.takeError().addContext(fmt::format("{}: {}", label, attr::kEpCacheContext));
    // Several main nodes may name one file: this session maps it once even when sessions do not share.
    std::error_code ec;
    fs::path key = fs::canonical(*path, ec);
    if (ec)
      return makeError(ErrorCode::InvalidGraph, "{}: context binary '{}' is missing: {}", label, path->string(),
                       ec.message());
    if (auto it = contextsByPath.find(key); it != contextsByPath.end()) return it->second;
    auto view = openSharedContainer(key, options.shareContexts);
    if (!view) return view.takeError().addContext(label);
    contextsByPath[key] = *view;
    return view;
  }

  // A model written with a context binary records that binary's checksum (epcontext::contextChecksumKey): a binary
  // of another run beside it (a folder mixed from two compiles) is refused rather than run with the wrong programs.
  Status checkBinding(const epcontext::NodeAttributes& attrs, const format::ContainerView& view,
                      const std::string& label) const {
    if (attrs.embedMode != 0 || !attrs.cacheContext) return Status::ok();
    const std::string* recorded = model().findMetadata(epcontext::contextChecksumKey(*attrs.cacheContext));
    if (!recorded || *recorded == view.checksum().toHex()) return Status::ok();
    return makeError(ErrorCode::InvalidGraph,
                     "{}: context binary '{}' is not the one this model was written with: the model records checksum "
                     "{}, the binary's is {} (the two files come from different compiles; deploy the files of one run "
                     "together)",
                     label, view.displayName(), *recorded, view.checksum().toHex());
  }

  Status load(const fs::path& contextDir) {
    const ir::Graph& g = model().graph;
    for (const auto* in : g.feedInputs()) inputs.push_back(*in);
    outputs = g.outputs;

    // Context binaries first: every main_context=1 node of ours.
    std::vector<size_t> epNodes;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (n.kind != ir::OpKind::EPContext) continue;
      std::string label = fmt::format("{}: {}", displayName, nodeLabel(n, i));
      const epcontext::NodeAttributes attrs = epcontext::readNodeAttributes(n);
      if (!epcontext::isOurSource(attrs.source))
        return makeError(ErrorCode::InvalidGraph,
                         "{}: EPContext node belongs to another execution provider ({} '{}'); ctxkit runs nodes whose "
                         "{} is {}",
                         label, epcontext::attr::kSource, attrs.source, epcontext::attr::kSource, epcontext::kEpName);
      epNodes.push_back(i);
      if (attrs.mainContext != 1) continue;
      CTX_ASSIGN_OR_RETURN(auto view, openContext(attrs, label, contextDir));
      CTX_RETURN_IF_ERROR(checkCompatibility(*view, label));
      if (!attrs.hardwareArchitecture.empty() && attrs.hardwareArchitecture != view->compat().targetId)
        return makeError(ErrorCode::InvalidGraph, "{}: {} '{}' but the context was compiled for '{}'", label,
                         epcontext::attr::kHardwareArchitecture, attrs.hardwareArchitecture, view->compat().targetId);
      CTX_RETURN_IF_ERROR(checkBinding(attrs, *view, label));
      if (options.verifyWeights) CTX_RETURN_IF_ERROR(view->verify());
      if (std::find(contexts.begin(), contexts.end(), view) == contexts.end()) {
        stats.mappedBytes += view->fileSize();
        contexts.push_back(std::move(view));
      }
    }
    if (!epNodes.empty() && contexts.empty())
      return makeError(ErrorCode::InvalidGraph, "{}: EPContext nodes but none has {}=1", displayName,
                       epcontext::attr::kMainContext);
    stats.contexts = contexts.size();

    for (size_t i : epNodes) {
      const ir::Node& n = g.nodes[i];
      std::string label = fmt::format("{}: {}", displayName, nodeLabel(n, i));
      std::string partition = epcontext::contextGraphName(n);
      const format::ContainerView* owner = nullptr;
      size_t graphIndex = 0;
      for (const auto& c : contexts)
        if (const format::GraphInfo* gi = c->findGraph(partition)) {
          if (owner)
            return makeError(ErrorCode::InvalidGraph, "{}: graph '{}' is in both '{}' and '{}'", label, partition,
                             owner->displayName(), c->displayName());
          owner = c.get();
          graphIndex = static_cast<size_t>(gi - c->graphs().data());
        }
      if (!owner)
        return makeError(ErrorCode::InvalidGraph, "{}: no graph named '{}' in the model's context binaries", label,
                         partition);
      // In a shared binary every model's graphs sit side by side: a node may run only a graph of its own model.
      const epcontext::NodeAttributes attrs = epcontext::readNodeAttributes(n);
      const std::string& sourceName = owner->graphs()[graphIndex].sourceModel;
      if (!attrs.onnxModelFilename.empty() && !sourceName.empty() && attrs.onnxModelFilename != sourceName)
        return makeError(ErrorCode::InvalidGraph,
                         "{}: graph '{}' of '{}' was compiled from '{}', but the node's {} is '{}': the node names "
                         "another model's graph",
                         label, partition, owner->displayName(), sourceName, epcontext::attr::kOnnxModelFilename,
                         attrs.onnxModelFilename);
      std::shared_ptr<const format::ContainerView> shared;
      for (const auto& c : contexts)
        if (c.get() == owner) shared = c;
      ProgramOptions programOptions;
      programOptions.prefault = options.prefault;
      if (owner->weightless()) {
        CTX_ASSIGN_OR_RETURN(auto source, sourceModelFor(attrs, label, contextDir));
        CTX_RETURN_IF_ERROR(checkSourcePins(*owner, sourceName, *source).addContext(label));
        programOptions.resolve = [this, owner, sourceName, source](uint32_t index) {
          return sourceWeight(*owner, index, sourceName, source);
        };
        programOptions.source = source;
        programOptions.sourceVerified = options.verifyWeights;
      }
      bool reused = false;
      CTX_ASSIGN_OR_RETURN(auto compiled, CompiledProgram::load(shared, graphIndex, std::move(programOptions),
                                                                options.shareContexts, &reused)
                                              .addContext(label));
      stats.sharedPrograms += reused;
      if (compiled->inputCount() != n.inputs.size() || compiled->outputCount() != n.outputs.size())
        return makeError(ErrorCode::InvalidGraph, "{}: node has {} inputs and {} outputs but graph '{}' has {} and {}",
                         label, n.inputs.size(), n.outputs.size(), partition, compiled->inputCount(),
                         compiled->outputCount());
      if (!compiled->suboptimal().empty())
        CTX_RETURN_IF_ERROR(
            preferRecompilation(fmt::format("{}: graph '{}'", label, partition), compiled->suboptimal()));
      programs[i] = std::move(compiled);
    }

    // Every fallback node (subgraphs included) must be executable, and every value defined before use.
    for (size_t i = 0; i < g.nodes.size(); ++i) (programs.count(i) ? stats.compiledNodes : stats.fallbackNodes) += 1;
    CTX_RETURN_IF_ERROR(checkExecutable(g, displayName));
    valueTable = ir::ValueTable(g);
    // The initializers in slots of the graph's numbering: runs through the Scope interpreter read them by id.
    constants = Scope(nullptr, valueTable);
    for (const auto& init : g.initializers) constants.set(valueTable.id(init.name), init.tensor);
    std::vector<bool> defined(valueTable.size(), false);
    for (ir::ValueId v = 0; v < valueTable.size(); ++v)
      defined[v] = valueTable[v].isGraphInput || valueTable[v].isInitializer;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const ir::ValueId in : valueTable.inputsOf(i))
        if (in != ir::kNoValue && !defined[in])
          return makeError(ErrorCode::InvalidGraph, "{}: {} reads '{}' before any node produces it", displayName,
                           nodeLabel(g.nodes[i], i), valueTable.name(in));
      for (const ir::ValueId out : valueTable.outputsOf(i))
        if (out != ir::kNoValue) defined[out] = true;
    }
    for (const auto& out : g.outputs)
      if (!defined[valueTable.id(out.name)])
        return makeError(ErrorCode::InvalidGraph, "{}: graph output '{}' is never produced", displayName, out.name);
    // Subgraphs read outer values by name: those reads count as uses.
    lastUse.assign(valueTable.size(), 0);
    for (ir::ValueId v = 0; v < valueTable.size(); ++v)
      if (!valueTable[v].uses.empty()) lastUse[v] = valueTable[v].uses.back().node;
    std::vector<std::optional<PreparedNodeCache::Slot>> known = prepareFallbackAhead();
    makePlan();
    if (!plan.usable) scoped = std::make_unique<ScopedGraph>(g, valueTable);
    else if (options.prefault) makeFirstFrame(known);
    if (options.prefault) prefaultCode();
    pool = kernels::makeThreadPool(std::max(1, options.threads));
    return Status::ok();
  }

  // The slot of a value name as a graph reads it (kNoSlot when no enclosing graph has it).
  using Resolver = std::function<size_t(const std::string&)>;

  // Appends the plan of subgraph `g` (its nodes, then its own subgraphs') reading enclosing values through `outer`;
  // an If branch takes no inputs, a Loop or Scan body its inputs in slots of its own. Returns its block, or kNoSlot
  // when it cannot be planned (the graph then runs on the Scope interpreter, which reports what is wrong).
  size_t planSubgraph(const ir::Graph& g, const Resolver& outer, bool takesInputs) {
    if (!takesInputs && !g.inputs.empty()) return kNoSlot;
    const ir::ValueTable table(g);
    const size_t base = plan.slots;
    plan.slots += table.size();
    const Resolver resolve = [&](const std::string& name) -> size_t {
      const ir::ValueId id = table.find(name);
      if (id != ir::kNoValue && !table[id].isOuter()) return base + id;
      return outer(name);
    };
    Block block;
    block.slotBegin = base;
    for (const auto& in : g.inputs) {
      if (in.name.empty()) return kNoSlot;
      block.inputs.push_back(base + table.id(in.name));
    }
    for (const auto& init : g.initializers) plan.constants.emplace_back(resolve(init.name), &init.tensor);
    for (const auto& out : g.outputs) block.outputs.push_back(resolve(out.name));
    if (std::find(block.outputs.begin(), block.outputs.end(), kNoSlot) != block.outputs.end()) return kNoSlot;
    block.begin = plan.nodes.size();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      NodePlan np;
      np.graph = &g;
      np.index = i;
      for (const auto& in : g.nodes[i].inputs) np.ins.push_back(in.empty() ? kNoSlot : resolve(in));
      for (const auto& out : g.nodes[i].outputs) np.outs.push_back(out.empty() ? kNoSlot : base + table.id(out));
      for (size_t k = 0; k < np.ins.size(); ++k)
        if (np.ins[k] == kNoSlot && !g.nodes[i].inputs[k].empty()) return kNoSlot;
      plan.nodes.push_back(std::move(np));
    }
    block.end = plan.nodes.size();
    const size_t index = plan.blocks.size();
    plan.blocks.push_back(std::move(block));
    if (!planSubgraphs(index, resolve)) return kNoSlot;
    plan.blocks[index].slotEnd = plan.slots;
    return index;
  }

  // Plans the subgraphs of block `b`'s If, Loop and Scan nodes.
  bool planSubgraphs(size_t b, const Resolver& resolve) {
    for (size_t i = plan.blocks[b].begin; i < plan.blocks[b].end; ++i) {
      const ir::Node& n = plan.nodes[i].node();
      if (n.kind == ir::OpKind::If) {
        const ir::Attribute* thenAttr = n.attrs.find("then_branch");
        const ir::Attribute* elseAttr = n.attrs.find("else_branch");
        if (!thenAttr || !thenAttr->g || !elseAttr || !elseAttr->g) return false;
        const size_t thenBlock = planSubgraph(*thenAttr->g, resolve, false);
        if (thenBlock == kNoSlot) return false;
        const size_t elseBlock = planSubgraph(*elseAttr->g, resolve, false);
        if (elseBlock == kNoSlot) return false;
        if (plan.blocks[thenBlock].outputs.size() != n.outputs.size() ||
            plan.blocks[elseBlock].outputs.size() != n.outputs.size())
          return false;
        plan.nodes[i].thenBlock = thenBlock;
        plan.nodes[i].elseBlock = elseBlock;
      } else if (n.kind == ir::OpKind::Loop || n.kind == ir::OpKind::Scan) {
        if (!planIteration(i, resolve)) return false;
      }
    }
    return true;
  }

  // Plans Loop or Scan node `i` (plan.nodes[i]): its body, and its attributes checked against its inputs and outputs.
  // False for what the plan cannot take (a body or attributes that do not fit the node, Scan before opset 9).
  bool planIteration(size_t i, const Resolver& resolve) {
    const ir::Node& n = plan.nodes[i].node();
    const ir::Attribute* bodyAttr = n.attrs.find("body");
    if (!bodyAttr || !bodyAttr->g) return false;
    const ir::Graph& body = *bodyAttr->g;
    size_t carried = 0, scanInputs = 0, scanOutputs = 0;
    std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;
    if (n.kind == ir::OpKind::Loop) {
      if (n.inputs.size() < 2) return false;
      carried = n.inputs.size() - 2;
      if (body.inputs.size() != 2 + carried || body.outputs.size() < 1 + carried) return false;
      scanOutputs = body.outputs.size() - 1 - carried;
    } else {
      if (n.opset < 9) return false;
      const int64_t scans = n.attrs.getInt("num_scan_inputs", 0);
      if (scans <= 0 || scans > static_cast<int64_t>(n.inputs.size())) return false;
      scanInputs = static_cast<size_t>(scans);
      carried = n.inputs.size() - scanInputs;
      if (body.inputs.size() != n.inputs.size() || body.outputs.size() < carried) return false;
      scanOutputs = body.outputs.size() - carried;
      inAxes = n.attrs.getInts("scan_input_axes", std::vector<int64_t>(scanInputs, 0));
      inDirs = n.attrs.getInts("scan_input_directions", std::vector<int64_t>(scanInputs, 0));
      outAxes = n.attrs.getInts("scan_output_axes", std::vector<int64_t>(scanOutputs, 0));
      outDirs = n.attrs.getInts("scan_output_directions", std::vector<int64_t>(scanOutputs, 0));
      if (inAxes.size() != scanInputs || inDirs.size() != scanInputs || outAxes.size() != scanOutputs ||
          outDirs.size() != scanOutputs)
        return false;
    }
    if (plan.nodes[i].outs.size() > carried + scanOutputs) return false;
    const size_t block = planSubgraph(body, resolve, true);
    if (block == kNoSlot) return false;
    IterationPlan& it = plan.nodes[i].iteration;
    it.body = block;
    it.graph = &body;
    it.carried = carried;
    it.scanInputs = scanInputs;
    it.inAxes = std::move(inAxes);
    it.inDirs = std::move(inDirs);
    it.outAxes = std::move(outAxes);
    it.outDirs = std::move(outDirs);
    return true;
  }

  void makePlan() {
    const ir::Graph& g = model().graph;
    // A value's slot is its id.
    auto slot = [&](const std::string& name) -> size_t { return valueTable.id(name); };
    auto slots = [](std::span<const ir::ValueId> ids) {
      std::vector<size_t> out;
      for (const ir::ValueId v : ids) out.push_back(v == ir::kNoValue ? kNoSlot : v);
      return out;
    };
    for (const auto& in : inputs) plan.inputs.push_back(slot(in.name));
    for (const auto& init : g.initializers) plan.constants.emplace_back(slot(init.name), &init.tensor);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      NodePlan np;
      np.graph = &g;
      np.index = i;
      np.ins = slots(valueTable.inputsOf(i));
      np.outs = slots(valueTable.outputsOf(i));
      if (auto it = programs.find(i); it != programs.end()) {
        np.program = it->second.get();
        for (size_t o = 0; o < np.program->outputCount(); ++o) {
          np.programOutputs.push_back(
              kernels::OutputDesc{np.program->outputDesc(o).type, program::toShape(np.program->outputDesc(o).shape)});
          np.boundedOutputs = np.boundedOutputs || program::isBounded(np.program->outputDesc(o));
        }
      }
      plan.nodes.push_back(std::move(np));
    }
    for (const auto& out : outputs) plan.outputs.push_back(slot(out.name));
    plan.slots = valueTable.size();
    plan.blocks.push_back(Block{0, g.nodes.size(), {}, plan.outputs, 0, 0});
    const Resolver top = [&](const std::string& name) -> size_t {
      const ir::ValueId id = valueTable.find(name);
      return id == ir::kNoValue ? kNoSlot : id;
    };
    if (!planSubgraphs(0, top)) {
      plan = RunPlan{};
      return;
    }
    plan.blocks[0].slotEnd = plan.slots;
    plan.madeOnce.assign(plan.slots, false);
    for (const NodePlan& np : plan.nodes)
      if (np.node().kind == ir::OpKind::Constant)
        for (const size_t s : np.outs)
          if (s != kNoSlot) plan.madeOnce[s] = true;
    plan.usable = true;
    stats.planned = true;
    freeFrames.reserve(std::max(2, options.threads) * 2);
  }

  std::unique_ptr<RunFrame> takeFrame() const {
    {
      std::lock_guard<std::mutex> lock(framesMutex);
      if (!freeFrames.empty()) {
        auto f = std::move(freeFrames.back());
        freeFrames.pop_back();
        return f;
      }
    }
    auto f = std::make_unique<RunFrame>();
    f->values.assign(plan.slots, nullptr);
    f->owned.resize(plan.slots);
    f->nodes.resize(plan.nodes.size());
    f->callerOut.assign(plan.slots, nullptr);
    for (const auto& [s, t] : plan.constants) f->values[s] = t;
    return f;
  }

  void returnFrame(std::unique_ptr<RunFrame> f) const {
    std::lock_guard<std::mutex> lock(framesMutex);
    freeFrames.push_back(std::move(f));
  }

  // The tensor node output `slot` is written to: the caller's output when the value is a graph output whose
  // tensor already has type `d` and its shape, else the frame's own, reallocated only when its buffer is too small
  // (then grown geometrically: a value growing over a Loop's iterations) or something else (a view) shares it.
  static Expected<ir::Tensor*> outputTensor(RunFrame& f, size_t slot, const kernels::OutputDesc& d,
                                            ir::Tensor* caller) {
    if (caller && caller->isWritable() && caller->type() == d.type && caller->shape() == d.shape) return caller;
    ir::Tensor& t = f.owned[slot];
    CTX_RETURN_IF_ERROR(fitOrGrow(t, d.type, d.shape));
    return &t;
  }

  static bool sameSignature(const std::vector<PreparedNodeCache::Slot>& sig, std::span<const ir::Tensor* const> ins) {
    if (sig.size() != ins.size()) return false;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (sig[i].present != (ins[i] != nullptr)) return false;
      if (ins[i] && (sig[i].type != ins[i]->type() || sig[i].shape != ins[i]->shape())) return false;
    }
    return true;
  }

  // The small inputs have the values `v` was prepared with.
  static bool sameValues(const ValuePrepared& v, std::span<const ir::Tensor* const> ins) {
    if (v.copies.size() != ins.size()) return false;
    for (size_t i = 0; i < ins.size(); ++i) {
      const ir::Tensor& copy = v.copies[i];
      if (copy.empty()) continue;
      if (!ins[i] || ins[i]->type() != copy.type() || ins[i]->shape() != copy.shape() ||
          ins[i]->byteSize() != copy.byteSize() ||
          (copy.byteSize() > 0 && std::memcmp(ins[i]->data(), copy.data(), copy.byteSize()) != 0))
        return false;
    }
    return true;
  }

  // Prepares node `n` for these inputs with the values of those of at most kValueInputElements elements (copied
  // into `v`, which the op may keep pointers to), or leaves v.op null when it cannot be.
  static void prepareWithValues(ValuePrepared& v, const ir::Node& n, std::span<const ir::Tensor* const> ins) {
    v.op.reset();  // it may point into the copies
    v.copies.assign(ins.size(), ir::Tensor());
    std::vector<kernels::ValueDesc> descs(ins.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      descs[i].present = ins[i] != nullptr;
      if (!ins[i]) continue;
      descs[i].type = ins[i]->type();
      descs[i].shape = ins[i]->shape();
      if (ins[i]->type() == ir::ElemType::String || ins[i]->elementCount() > kValueInputElements) continue;
      auto copy = ir::Tensor::copyOf(ins[i]->type(), ins[i]->shape(), ins[i]->bytes());
      if (!copy) continue;
      v.copies[i] = std::move(copy).value();
      descs[i].value = &v.copies[i];
    }
    kernels::OpContext ctx = kernels::nodeContext(n);
    if (auto prepared = kernels::prepare(ctx, descs, n.outputs.size())) v.op = std::move(prepared).value();
  }

  // The op of `state` prepared with the values of these inputs: one kept, else prepared now (appended, or in place
  // of the oldest once kValuePrepared are kept).
  static ValuePrepared& preparedWithValues(NodeState& state, const ir::Node& n,
                                           std::span<const ir::Tensor* const> ins) {
    for (ValuePrepared& v : state.valued)
      if (sameValues(v, ins)) return v;
    ValuePrepared* v = nullptr;
    if (state.valued.size() < kValuePrepared) {
      v = &state.valued.emplace_back();
    } else {
      v = &state.valued[state.valuedNext];
      state.valuedNext = (state.valuedNext + 1) % kValuePrepared;
    }
    prepareWithValues(*v, n, ins);
    return *v;
  }

  // Runs node `i` of the plan in frame `f`; `callerOut[slot]` is the caller's tensor for a graph output slot.
  Status runNode(RunFrame& f, size_t i, std::span<ir::Tensor* const> callerOut) const {
    const NodePlan& np = plan.nodes[i];
    const ir::Graph& g = *np.graph;
    const ir::Node& n = np.node();
    NodeState& state = f.nodes[i];
    f.ins.clear();
    for (size_t s : np.ins) {
      if (s != kNoSlot && !f.values[s])
        return makeError(ErrorCode::InvalidGraph, "{}: value '{}' is not available", nodeLabel(n, np.index),
                         n.inputs[f.ins.size()]);
      f.ins.push_back(s == kNoSlot ? nullptr : f.values[s]);
    }
    if (n.kind == ir::OpKind::If) {
      // The branch's values stay in their slots: the If's outputs are the branch's output values themselves.
      if (f.ins.empty() || !f.ins[0]) return makeError(ErrorCode::InvalidGraph, "If needs its condition input");
      const Block& b = plan.blocks[isTrue(*f.ins[0]) ? np.thenBlock : np.elseBlock];
      CTX_RETURN_IF_ERROR(runBlock(f, b, callerOut));
      for (size_t o = 0; o < np.outs.size(); ++o) {
        if (np.outs[o] == kNoSlot) continue;
        f.values[np.outs[o]] = f.values[b.outputs[o]];
        if (!f.values[np.outs[o]])
          return makeError(ErrorCode::InvalidGraph, "{}: its branch never produces output {}", nodeLabel(n, np.index),
                           o);
      }
      return Status::ok();
    }
    if (np.iteration.body != kNoSlot) {
      if (!state.iteration) state.iteration = std::make_unique<IterationState>();
      IterationState& it = *state.iteration;
      it.ins.assign(f.ins.begin(), f.ins.end());  // f.ins is the body nodes' list too
      // The body runs as a block of this frame.
      struct Body final : BodyFrame {
        const Impl& impl;
        RunFrame& f;
        const Block& block;
        std::span<ir::Tensor* const> callerOut;
        Body(const Impl& i, RunFrame& fr, const Block& b, std::span<ir::Tensor* const> c)
            : impl(i), f(fr), block(b), callerOut(c) {}
        Status runBody() override { return impl.runBlock(f, block, callerOut); }
      };
      const Block& b = plan.blocks[np.iteration.body];
      Body body(*this, f, b, callerOut);
      body.values = f.values;
      body.owned = f.owned;
      body.inputs = b.inputs;
      body.outputs = b.outputs;
      body.slotBegin = b.slotBegin;
      body.slotEnd = b.slotEnd;
      body.madeOnce = &plan.madeOnce;
      return n.kind == ir::OpKind::Loop ? runLoop(body, np.iteration, it, np.outs)
                                        : runScan(body, np.iteration, it, np.outs);
    }
    // Binds the node's outputs to tensors of `descs`, runs `body` and publishes them.
    auto bind = [&](std::span<const kernels::OutputDesc> descs, auto&& body) -> Status {
      f.outs.clear();
      for (size_t o = 0; o < np.outs.size(); ++o) {
        const size_t s = np.outs[o];
        if (s == kNoSlot || o >= descs.size()) {
          f.outs.push_back(nullptr);
          continue;
        }
        CTX_ASSIGN_OR_RETURN(ir::Tensor * t, outputTensor(f, s, descs[o], callerOut[s]));
        f.outs.push_back(t);
      }
      CTX_RETURN_IF_ERROR(body());
      for (size_t o = 0; o < np.outs.size(); ++o)
        if (np.outs[o] != kNoSlot) f.values[np.outs[o]] = f.outs[o];
      return Status::ok();
    };
    if (np.program && !np.boundedOutputs)
      return bind(np.programOutputs, [&] { return np.program->runInto(f.ins, f.outs, pool.get()); });
    if (np.program) {
      // An output of bounded shape is made by the program at the run's extent (kept in the node state until the
      // next run); the others are bound as for any program.
      f.outs.clear();
      for (size_t o = 0; o < np.outs.size(); ++o) {
        const size_t s = np.outs[o];
        if (s == kNoSlot || o >= np.programOutputs.size() || program::isBounded(np.program->outputDesc(o))) {
          f.outs.push_back(nullptr);
          continue;
        }
        CTX_ASSIGN_OR_RETURN(ir::Tensor * t, outputTensor(f, s, np.programOutputs[o], callerOut[s]));
        f.outs.push_back(t);
      }
      state.evalOuts.resize(np.outs.size());
      CTX_RETURN_IF_ERROR(np.program->runInto(f.ins, f.outs, pool.get(), &state.evalOuts));
      for (size_t o = 0; o < np.outs.size(); ++o)
        if (np.outs[o] != kNoSlot) f.values[np.outs[o]] = f.outs[o] ? f.outs[o] : &state.evalOuts[o];
      return Status::ok();
    }
    // Constants: made once per frame (read-only views of the value the fallback cache keeps).
    if (n.kind == ir::OpKind::Constant && n.inputs.empty()) {
      if (!state.looked) {
        auto made = shared->fallback.run(g, n, f.ins, pool.get());
        if (!made) return makeError(ErrorCode::Internal, "{}: the Constant was not made", nodeLabel(n, np.index));
        if (!*made) return made->takeError();
        for (size_t o = 0; o < np.outs.size() && o < (*made)->size(); ++o)
          if (np.outs[o] != kNoSlot) f.owned[np.outs[o]] = std::move((**made)[o]);
        state.looked = true;
      }
      for (size_t s : np.outs)
        if (s != kNoSlot) f.values[s] = &f.owned[s];
      return Status::ok();
    }
    if (!state.looked || !sameSignature(state.signature, f.ins)) {
      // In place: the slots' shapes keep their storage.
      state.signature.resize(f.ins.size());
      for (size_t k = 0; k < f.ins.size(); ++k) {
        PreparedNodeCache::Slot& slot = state.signature[k];
        slot.present = f.ins[k] != nullptr;
        slot.type = f.ins[k] ? f.ins[k]->type() : ir::ElemType::Undefined;
        if (f.ins[k]) slot.shape.assign(f.ins[k]->shape().begin(), f.ins[k]->shape().end());
        else slot.shape.clear();
      }
      state.op = nullptr;
      for (const auto& [signature, op] : state.seen)
        if (sameSignature(signature, f.ins)) state.op = op;
      if (!state.op && (state.op = shared->fallback.preparedFor(g, n, f.ins))) {
        if (state.seen.size() < kSeenSignatures) {
          state.seen.emplace_back(state.signature, state.op);
        } else {
          state.seen[state.seenNext] = {state.signature, state.op};
          state.seenNext = (state.seenNext + 1) % kSeenSignatures;
        }
      }
      state.looked = true;
      state.valued.clear();
      state.valuedNext = 0;
    }
    if (state.op) return bind(state.op->outputs(), [&] { return state.op->run(f.ins, f.outs, pool.get()); });
    // Not preparable from types and shapes (output shapes that depend on computed values: a Reshape's shape made by
    // a Shape chain): prepared with its small inputs' values too, and kept while those values stay the same.
    if (const ValuePrepared& v = preparedWithValues(state, n, f.ins); v.op)
      return bind(v.op->outputs(), [&] { return v.op->run(f.ins, f.outs, pool.get()); });
    // Not preparable even so (output shapes that depend on large computed values: NonZero, NonMaxSuppression):
    // evaluated on every run, into buffers the node state keeps (allocating only when an output outgrows its own).
    const kernels::OpContext ctx = kernels::nodeContext(n, pool.get());
    state.evalOuts.resize(np.outs.size());
    state.evalBuffers.resize(np.outs.size());
    KeptOutputs sink(state, n, np.index);
    for (ir::Tensor& t : state.evalOuts) t.unbind();
    CTX_RETURN_IF_ERROR(kernels::evaluateInto(ctx, f.ins, n.outputs.size(), sink, state.eval));
    for (size_t o = 0; o < np.outs.size(); ++o)
      if (np.outs[o] != kNoSlot) f.values[np.outs[o]] = state.evalOuts[o].empty() ? nullptr : &state.evalOuts[o];
    return Status::ok();
  }

  // The frame path of runInto (plan.usable).
  Status runPlanned(const std::vector<ir::Tensor>& feeds, std::span<ir::Tensor* const> outs) const {
    std::unique_ptr<RunFrame> f = takeFrame();
    struct Return {
      const Impl& impl;
      std::unique_ptr<RunFrame>& f;
      ~Return() { impl.returnFrame(std::move(f)); }
    } giveBack{*this, f};
    for (size_t i = 0; i < feeds.size(); ++i) f->values[plan.inputs[i]] = &feeds[i];
    // The caller's output tensors by slot.
    std::fill(f->callerOut.begin(), f->callerOut.end(), nullptr);
    // An output sharing its buffer with a feed (a decoder's present state passed back as its past) is not written
    // while the run may still read that feed: it gets its value copied at the end.
    for (size_t k = 0; k < outs.size(); ++k) {
      bool aliased = false;
      for (const auto& feed : feeds) aliased = aliased || (outs[k]->owner() && outs[k]->owner() == feed.owner());
      if (!aliased) f->callerOut[plan.outputs[k]] = outs[k];
    }
    kernels::ThreadPool::RunScope running(pool.get());  // workers stay awake between the run's ops
    CTX_RETURN_IF_ERROR(runBlock(*f, plan.blocks[0], f->callerOut).addContext(displayName));
    for (size_t k = 0; k < outs.size(); ++k) {
      const ir::Tensor* t = f->values[plan.outputs[k]];
      if (!t) return makeError(ErrorCode::Internal, "{}: output '{}' was not produced", displayName, outputs[k].name);
      CTX_RETURN_IF_ERROR(deliver(*t, *outs[k]));
    }
    return Status::ok();
  }

  // Runs the nodes of block `b` in frame `f`.
  Status runBlock(RunFrame& f, const Block& b, std::span<ir::Tensor* const> callerOut) const {
    RunProfile* profile = activeProfile();
    for (size_t i = b.begin; i < b.end; ++i) {
      const NodePlan& np = plan.nodes[i];
      // A compiled node's ops are timed by its program, an If, Loop or Scan by its subgraph's nodes; other nodes are
      // timed here.
      const bool timed = profile && !np.program && np.thenBlock == kNoSlot && np.iteration.body == kNoSlot;
      const auto start = timed ? RunProfile::Clock::now() : RunProfile::Clock::time_point{};
      Status st = runNode(f, i, callerOut);
      if (timed && st) profile->record(this, i, RunProfile::Clock::now() - start, [&] { return describeNode(f, i); });
      if (!st) {
        Error e = st.takeError();
        const std::string label = nodeLabel(np.node(), np.index);
        if (!e.message().starts_with(label + ": ")) e.addContext(label);
        return e;
      }
    }
    return Status::ok();
  }

  // Fallback node `i` as a run profile names it (with the shape its first output has in frame `f`).
  ProfiledOp describeNode(const RunFrame& f, size_t i) const {
    const NodePlan& np = plan.nodes[i];
    const ir::Node& n = np.node();
    std::string shape;
    if (!np.outs.empty() && np.outs[0] != kNoSlot && f.values[np.outs[0]])
      shape = fmt::format("[{}]", fmt::join(f.values[np.outs[0]]->shape(), ","));
    return ProfiledOp{"fallback", np.index, n.name, n.opType, std::move(shape)};
  }

  // Puts value `t` into the caller's output `out`: nothing to do when the node wrote there, a copy into it when it
  // has t's type and shape, else a new tensor (the caller's tensors never share the frame's buffers).
  static Status deliver(const ir::Tensor& t, ir::Tensor& out) {
    if (&t == &out) return Status::ok();
    if (t.type() == ir::ElemType::String) {
      out = ir::Tensor::strings(t.shape(), t.stringValues());
      return Status::ok();
    }
    if (out.isWritable() && out.type() == t.type() && out.shape() == t.shape()) {
      if (out.data() != t.data() && t.byteSize() > 0) std::memcpy(out.mutableData(), t.data(), t.byteSize());
      return Status::ok();
    }
    CTX_ASSIGN_OR_RETURN(out, ir::Tensor::copyOf(t.type(), t.shape(), t.bytes()));
    return Status::ok();
  }

  // Fallback nodes whose input types and shapes are known before any run (static graph inputs, initializers,
  // compiled programs' outputs and what those feed) are prepared now instead of in the first run. Nodes whose
  // output shapes depend on values computed at run time, and control flow, stay prepared on first use; their
  // constant MatMul/Gemm weights are packed into panels now all the same.
  // Returns the types and shapes known ahead, by value id.
  std::vector<std::optional<PreparedNodeCache::Slot>> prepareFallbackAhead() {
    using Slot = PreparedNodeCache::Slot;
    const ir::Graph& g = model().graph;
    std::vector<std::optional<Slot>> known(valueTable.size());  // by value id
    // Only shapes whose byte size is representable: anything else could never be fed (or computed) anyway.
    auto sizable = [](ir::ElemType type, const ir::Shape& shape) {
      auto count = ir::elementCount(shape);
      return type != ir::ElemType::Undefined && count && ir::storageBytes(type, *count);
    };
    for (const auto& in : inputs)
      if (auto shape = in.staticShape(); shape && sizable(in.type, *shape))
        known[valueTable.id(in.name)] = Slot{true, in.type, *shape};
    for (const auto& init : g.initializers)
      known[valueTable.id(init.name)] = Slot{true, init.tensor.type(), init.tensor.shape()};
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      std::vector<kernels::OutputDesc> outs;
      if (auto it = programs.find(i); it != programs.end()) {
        for (size_t o = 0; o < it->second->outputCount(); ++o) {
          // A bounded output's shape is known only when the program runs.
          const program::TensorDesc& d = it->second->outputDesc(o);
          outs.push_back(program::isBounded(d) ? kernels::OutputDesc{}
                                               : kernels::OutputDesc{d.type, program::toShape(d.shape)});
        }
      } else if (!ir::isControlFlow(n.kind) && n.kind != ir::OpKind::EPContext) {
        std::vector<Slot> signature;
        bool ready = true;
        for (const ir::ValueId in : valueTable.inputsOf(i)) {
          if (in != ir::kNoValue && !known[in]) ready = false;
          signature.push_back(in == ir::kNoValue || !ready ? Slot{} : *known[in]);
        }
        if (!ready) {
          shared->fallback.packAhead(g, n);  // its constant weight at least
          continue;
        }
        auto prepared = shared->fallback.prepareAhead(g, n, std::move(signature));
        if (!prepared) continue;
        outs = std::move(*prepared);
      }
      const std::span<const ir::ValueId> outIds = valueTable.outputsOf(i);
      for (size_t o = 0; o < outIds.size() && o < outs.size(); ++o)
        if (outIds[o] != ir::kNoValue && sizable(outs[o].type, outs[o].shape))
          known[outIds[o]] = Slot{true, outs[o].type, outs[o].shape};
    }
    return known;
  }

  // The first run frame, made at load with a buffer for each value of the model's graph whose type and shape are
  // known ahead (`known`, by value id) and written by a node into the frame (not a Constant's, not a graph output's,
  // which may go to the caller's buffer), so that the first run does not allocate and fault them in; it keeps them as
  // any frame keeps its buffers between runs. Values the plan cannot place, or too large to allocate now, are left to
  // the run.
  void makeFirstFrame(const std::vector<std::optional<PreparedNodeCache::Slot>>& known) {
    std::unique_ptr<RunFrame> f = takeFrame();
    std::vector<bool> graphOutput(plan.slots, false);
    for (size_t s : plan.outputs)
      if (s < plan.slots) graphOutput[s] = true;
    const size_t nodes = std::min(model().graph.nodes.size(), plan.nodes.size());
    for (size_t i = 0; i < nodes; ++i) {
      const std::span<const ir::ValueId> outIds = valueTable.outputsOf(i);
      const std::vector<size_t>& slots = plan.nodes[i].outs;
      for (size_t o = 0; o < outIds.size() && o < slots.size(); ++o) {
        const size_t s = slots[o];
        if (s == kNoSlot || s >= plan.slots || plan.madeOnce[s] || graphOutput[s] || outIds[o] == ir::kNoValue ||
            !known[outIds[o]])
          continue;
        const PreparedNodeCache::Slot& d = *known[outIds[o]];
        if (!fitOrGrow(f->owned[s], d.type, d.shape)) f->owned[s] = ir::Tensor();
      }
    }
    returnFrame(std::move(f));
  }

  Status checkFeeds(const std::vector<ir::Tensor>& feeds) const {
    if (feeds.size() != inputs.size())
      return makeError(ErrorCode::InvalidArgument, "{} takes {} inputs but {} were given", displayName, inputs.size(),
                       feeds.size());
    for (size_t i = 0; i < feeds.size(); ++i) {
      const ir::ValueInfo& in = inputs[i];
      if (in.type != ir::ElemType::Undefined && feeds[i].type() != in.type)
        return makeError(ErrorCode::InvalidArgument, "input {} ('{}') must be {} but is {}", i, in.name,
                         ir::elemTypeName(in.type), ir::elemTypeName(feeds[i].type()));
      if (in.shape) {
        bool ok = in.shape->size() == feeds[i].rank();
        for (size_t d = 0; ok && d < in.shape->size(); ++d)
          ok = !(*in.shape)[d].isKnown() || (*in.shape)[d].value == feeds[i].shape()[d];
        if (!ok)
          return makeError(ErrorCode::InvalidArgument, "input {} ('{}') must have shape {} but has {}", i, in.name,
                           ir::dimsToString(in.shape), ir::shapeToString(feeds[i].shape()));
      }
    }
    return Status::ok();
  }

  Status runInto(const std::vector<ir::Tensor>& feeds, std::span<ir::Tensor* const> outs) const {
    CTX_RETURN_IF_ERROR(checkFeeds(feeds));
    if (outs.size() != outputs.size())
      return makeError(ErrorCode::InvalidArgument, "{} has {} outputs but {} were given", displayName, outputs.size(),
                       outs.size());
    for (size_t k = 0; k < outs.size(); ++k)
      if (!outs[k]) return makeError(ErrorCode::InvalidArgument, "{}: output {} is null", displayName, k);
    if (plan.usable) return runPlanned(feeds, outs);
    CTX_ASSIGN_OR_RETURN(auto values, runScoped(feeds));
    for (size_t k = 0; k < outs.size(); ++k) *outs[k] = std::move(values[k]);
    return Status::ok();
  }

  // Graphs with control flow at the top level: values by id in a Scope, freed after their last reader.
  Expected<std::vector<ir::Tensor>> runScoped(const std::vector<ir::Tensor>& feeds) const {
    Scope scope(&constants, *scoped);  // initializers are read through the parent scope, never copied per run
    for (size_t i = 0; i < feeds.size(); ++i) scope.set(scoped->feeds[i], feeds[i]);
    NodeOverride runCompiled =
        [&](size_t node, std::span<const ir::Tensor* const> ins) -> std::optional<Expected<std::vector<ir::Tensor>>> {
      auto it = programs.find(node);
      if (it == programs.end()) return std::nullopt;
      return it->second->run(ins, pool.get());
    };
    GraphRunOptions runOptions{&runCompiled, lastUse};
    kernels::ThreadPool::RunScope running(pool.get());  // workers stay awake between the run's ops
    Interpreter interpreter(pool.get(), &shared->fallback);
    CTX_RETURN_IF_ERROR(interpreter.runGraph(*scoped, scope, runOptions).addContext(displayName));
    std::vector<ir::Tensor> out;
    for (size_t k = 0; k < outputs.size(); ++k) {
      const ir::Tensor* t = scoped->outputs[k] == ir::kNoValue ? nullptr : scope.find(scoped->outputs[k]);
      if (!t) return makeError(ErrorCode::Internal, "{}: output '{}' was not produced", displayName, outputs[k].name);
      out.push_back(*t);
    }
    return out;
  }
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Expected<std::unique_ptr<Session>> Session::load(ir::Model model, const fs::path& modelDir,
                                                 const SessionOptions& options, std::string displayName) {
  auto shared = std::make_shared<SharedModel>();
  shared->model = std::move(model);
  return loadShared(std::move(shared), false, modelDir, options, std::move(displayName));
}

Expected<std::unique_ptr<Session>> Session::loadShared(std::shared_ptr<SharedModel> shared, bool reused,
                                                       const fs::path& modelDir, const SessionOptions& options,
                                                       std::string displayName) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->displayName = std::move(displayName);
  impl->shared = std::move(shared);
  impl->stats.sharedModel = reused;
  CTX_RETURN_IF_ERROR(impl->load(modelDir.empty() ? fs::path(".") : modelDir));
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const std::vector<ir::ValueInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<ir::ValueInfo>& Session::outputs() const { return impl_->outputs; }
const std::vector<std::string>& Session::warnings() const { return impl_->warnings; }
const SessionStats& Session::stats() const { return impl_->stats; }
Compatibility Session::compatibility() const { return impl_->compatibility; }
size_t Session::preparedFallbackOps() const { return impl_->shared->fallback.preparedCount(); }
size_t Session::fallbackPanelPacks() const { return impl_->shared->fallback.panelPacks(); }
Expected<std::vector<ir::Tensor>> Session::run(const std::vector<ir::Tensor>& feeds) const {
  std::vector<ir::Tensor> out(impl_->outputs.size());
  std::vector<ir::Tensor*> ptrs;
  for (auto& t : out) ptrs.push_back(&t);
  CTX_RETURN_IF_ERROR(impl_->runInto(feeds, ptrs));
  return out;
}
Status Session::runInto(const std::vector<ir::Tensor>& feeds, std::span<ir::Tensor* const> outputs) const {
  return impl_->runInto(feeds, outputs);
}
Status Session::runCompiledNodeInto(size_t nodeIndex, std::span<const ir::Tensor* const> inputs,
                                    std::span<ir::Tensor* const> outputs, std::vector<ir::Tensor>* bounded) const {
  auto it = impl_->programs.find(nodeIndex);
  if (it == impl_->programs.end())
    return makeError(ErrorCode::InvalidArgument, "{}: node #{} is not a compiled EPContext node", impl_->displayName,
                     nodeIndex);
  return it->second->runInto(inputs, outputs, impl_->pool.get(), bounded).addContext(impl_->displayName);
}

Expected<std::vector<kernels::OutputDesc>> Session::compiledNodeOutputs(size_t nodeIndex,
                                                                        std::vector<bool>* bounded) const {
  auto it = impl_->programs.find(nodeIndex);
  if (it == impl_->programs.end())
    return makeError(ErrorCode::InvalidArgument, "{}: node #{} is not a compiled EPContext node", impl_->displayName,
                     nodeIndex);
  std::vector<kernels::OutputDesc> out;
  if (bounded) bounded->clear();
  for (size_t o = 0; o < it->second->outputCount(); ++o) {
    out.push_back(
        kernels::OutputDesc{it->second->outputDesc(o).type, program::toShape(it->second->outputDesc(o).shape)});
    if (bounded) bounded->push_back(program::isBounded(it->second->outputDesc(o)));
  }
  return out;
}

Expected<std::vector<ir::Tensor>> Session::runCompiledNode(size_t nodeIndex,
                                                           std::span<const ir::Tensor* const> inputs) const {
  auto it = impl_->programs.find(nodeIndex);
  if (it == impl_->programs.end())
    return makeError(ErrorCode::InvalidArgument, "{}: node #{} is not a compiled EPContext node", impl_->displayName,
                     nodeIndex);
  return it->second->run(inputs, impl_->pool.get()).addContext(impl_->displayName);
}

size_t sharedContextCount() { return liveSharedContainers(); }
size_t mappedContextCount() { return liveContainerMappings(); }

}  // namespace ctxkit::runtime
