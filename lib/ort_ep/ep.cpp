// GetCapability, Compile and the compute functions of ctxkit's EP: the load path of a ctxkit _ctx.onnx in ORT.
#include "ort_ep/ep.h"

#include "epcontext/contract.h"
#include "epcontext/session_options.h"
#include "format/container.h"
#include "kernels/kernels.h"
#include "ops/node_attrs.h"
#include "ort_ep/graph_reader.h"
#include "partitioner/target.h"
#include "program/program.h"
#include "runtime/session.h"
#include "support/file_io.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

namespace ctxkit::ort_ep {

namespace fs = std::filesystem;

namespace {

std::string lowerCase(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// The EP option prefix ORT gives options passed to AppendExecutionProvider_V2.
std::string epOptionPrefix() { return "ep." + lowerCase(epcontext::kEpName) + "."; }

}  // namespace

std::string epOptionKey(const char* key) { return epOptionPrefix() + key; }

namespace {

// ctxkit's EP options; any other key under its prefix is refused (a misspelled option would otherwise be ignored).
constexpr const char* kEpOptions[] = {"target", "threads", "verify", "weightless_scope"};

// The session's config entries, read from ORT in one call: session creation looks up a dozen keys, each of which
// would otherwise be two or three calls into ORT and a string copy.
class ConfigEntries {
public:
  static Expected<ConfigEntries> read(const Api& api, const OrtSessionOptions& options) {
    OrtKeyValuePairs* pairs = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetSessionOptionsConfigEntries(&options, &pairs));
    ConfigEntries entries;
    const char* const* keys = nullptr;
    const char* const* values = nullptr;
    size_t count = 0;
    api.ort.GetKeyValuePairs(pairs, &keys, &values, &count);
    entries.entries_.reserve(count);
    for (size_t i = 0; i < count; ++i)
      entries.entries_.emplace_back(keys[i] ? keys[i] : "", values[i] ? values[i] : "");
    api.ort.ReleaseKeyValuePairs(pairs);
    return entries;
  }
  // The value of `key`, or nothing when the session does not set it.
  const std::string* find(std::string_view key) const {
    for (const auto& [k, v] : entries_)
      if (k == key) return &v;
    return nullptr;
  }
  std::string get(std::string_view key, std::string_view fallback) const {
    const std::string* v = find(key);
    return v ? *v : std::string(fallback);
  }
  const std::vector<std::pair<std::string, std::string>>& all() const { return entries_; }

private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

Status refuseUnknownEpOptions(const ConfigEntries& entries) {
  const std::string prefix = epOptionPrefix();
  for (const auto& [key, value] : entries.all()) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string_view option = std::string_view(key).substr(prefix.size());
    if (std::find(std::begin(kEpOptions), std::end(kEpOptions), option) == std::end(kEpOptions))
      return makeError(ErrorCode::InvalidArgument, "{}: unknown EP option '{}' (ctxkit's options: {})",
                       epcontext::kEpName, option, fmt::join(kEpOptions, ", "));
  }
  return Status::ok();
}

// One fused node: what runs it, and the positions of its program's inputs and outputs among the fused node's
// (matched by value name).
struct NodeCompute : OrtNodeComputeInfo {
  const Api* api = nullptr;
  // Runs the node's program into ORT's output buffers: an EPContext node of a runtime Session, or a partition
  // lowered from a plain model.
  // Runs the program; an output of bounded shape takes no buffer and comes back in the vector, at the run's extent.
  std::function<Status(std::span<const ir::Tensor* const>, std::span<ir::Tensor* const>, std::vector<ir::Tensor>*)> run;
  std::vector<kernels::OutputDesc> outputs;  // the program's output types and shapes, in node output order
  std::vector<bool> bounded;                 // per output: its shape is bounded (outputs[k] holds the bound)
  std::string name;
  std::vector<size_t> inputSlots;   // node input k -> fused node input index
  std::vector<size_t> outputSlots;  // node output k -> fused node output index
};

// ONNX Runtime's buffer for output `slot` of the node at `shape`: empty (null data) when nobody reads the output.
Expected<std::span<std::byte>> outputBuffer(const Api& api, OrtKernelContext* context, size_t slot,
                                            std::span<const int64_t> shape) {
  OrtValue* value = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.KernelContext_GetOutput(context, slot, shape.data(), shape.size(), &value));
  if (value == nullptr) return std::span<std::byte>();
  void* data = nullptr;
  size_t bytes = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorMutableData(value, &data));
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorSizeInBytes(value, &bytes));
  return std::span<std::byte>(static_cast<std::byte*>(data), bytes);
}

Status compute(NodeCompute& nc, OrtKernelContext* context) {
  const Api& api = *nc.api;
  std::vector<ir::Tensor> inputs;
  inputs.reserve(nc.inputSlots.size());
  for (size_t k = 0; k < nc.inputSlots.size(); ++k) {
    const OrtValue* value = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.KernelContext_GetInput(context, nc.inputSlots[k], &value));
    if (value == nullptr) return makeError(ErrorCode::InvalidArgument, "{}: input {} is missing", nc.name, k);
    // A view of ORT's buffer: valid for the whole Compute call, which is as long as the program reads it.
    CTX_ASSIGN_OR_RETURN(auto t, tensorView(api, *value, fmt::format("{}: input {}", nc.name, k)));
    inputs.push_back(std::move(t));
  }
  std::vector<const ir::Tensor*> pointers;
  for (const auto& t : inputs) pointers.push_back(&t);
  // The program writes straight into ORT's output buffers: no copy afterwards.
  std::vector<ir::Tensor> views(nc.outputs.size());
  std::vector<ir::Tensor*> outputs(nc.outputs.size(), nullptr);
  bool anyBounded = false;
  for (size_t k = 0; k < nc.outputs.size(); ++k) {
    const kernels::OutputDesc& d = nc.outputs[k];
    if (k < nc.bounded.size() && nc.bounded[k]) {  // its shape is known once the program has run
      anyBounded = true;
      continue;
    }
    CTX_ASSIGN_OR_RETURN(std::span<std::byte> buffer, outputBuffer(api, context, nc.outputSlots[k], d.shape));
    if (buffer.data() == nullptr) continue;  // nobody reads it (or it holds no bytes): the program gets scratch
    CTX_ASSIGN_OR_RETURN(views[k], ir::Tensor::mutableView(d.type, d.shape, buffer.data(), buffer.size())
                                       .addContext(fmt::format("{}: output {}", nc.name, k)));
    outputs[k] = &views[k];
  }
  if (!anyBounded) return nc.run(pointers, outputs, nullptr);
  // Outputs of bounded shape: ONNX Runtime's buffer is asked for at the shape the run computed, and filled from the
  // program's (a copy of at most the bound's bytes).
  std::vector<ir::Tensor> made(nc.outputs.size());
  CTX_RETURN_IF_ERROR(nc.run(pointers, outputs, &made));
  for (size_t k = 0; k < nc.outputs.size(); ++k) {
    if (k >= nc.bounded.size() || !nc.bounded[k] || made[k].empty()) continue;
    CTX_ASSIGN_OR_RETURN(std::span<std::byte> buffer, outputBuffer(api, context, nc.outputSlots[k], made[k].shape()));
    if (buffer.data() == nullptr) continue;
    if (buffer.size() != made[k].byteSize())
      return makeError(ErrorCode::Internal, "{}: output {} is {} bytes but ONNX Runtime's buffer for it has {}",
                       nc.name, k, made[k].byteSize(), buffer.size());
    if (!buffer.empty()) std::memcpy(buffer.data(), made[k].data(), buffer.size());
  }
  return Status::ok();
}

OrtStatus* ORT_API_CALL createState(OrtNodeComputeInfo* self, OrtNodeComputeContext*, void** state) noexcept {
  *state = self;  // everything a run needs is immutable and lives in the compute info
  return nullptr;
}

OrtStatus* ORT_API_CALL computeImpl(OrtNodeComputeInfo* self, void*, OrtKernelContext* context) noexcept {
  auto& nc = *static_cast<NodeCompute*>(self);
  try {
    Status st = compute(nc, context);
    return st ? nullptr : toOrtStatus(*nc.api, st.error());
  } catch (const std::exception& e) {  // exceptions never cross into ORT
    return nc.api->ort.CreateStatus(ORT_FAIL, fmt::format("{}: {}", nc.name, e.what()).c_str());
  }
}

void ORT_API_CALL releaseState(OrtNodeComputeInfo*, void*) noexcept {}

// Slot of each name in `names` among `fusedNames`.
Expected<std::vector<size_t>> slotsByName(const std::vector<std::string>& names,
                                          const std::vector<std::string>& fusedNames, const std::string& what) {
  std::vector<size_t> slots;
  for (const auto& n : names) {
    size_t i = 0;
    while (i < fusedNames.size() && fusedNames[i] != n) ++i;
    if (i == fusedNames.size())
      return makeError(ErrorCode::Internal, "{}: value '{}' is not among the fused node's", what, n);
    slots.push_back(i);
  }
  return slots;
}

// The nodes of `graph` that are ctxkit's EPContext nodes.
Expected<std::vector<const OrtNode*>> ourEpContextNodes(const Api& api, const OrtGraph& graph) {
  std::vector<const OrtNode*> ours;
  CTX_ASSIGN_OR_RETURN(auto nodes, graphNodes(api, graph));
  for (const OrtNode* node : nodes) {
    CTX_ASSIGN_OR_RETURN(NodeKind kind, readNodeKind(api, *node));
    if (ir::opKindFromName(kind.domain, kind.opType) != ir::OpKind::EPContext) continue;
    CTX_ASSIGN_OR_RETURN(auto source, readStringAttribute(api, *node, epcontext::attr::kSource));
    if (!source || !epcontext::isOurSource(*source)) continue;  // another EP's node: not ours to claim
    ours.push_back(node);
  }
  return ours;
}

Status getCapability(CtxKitEp& ep, const OrtGraph& graph, OrtEpGraphSupportInfo& support) {
  const Api& api = ep.api();
  CTX_ASSIGN_OR_RETURN(auto ours, ourEpContextNodes(api, graph));
  // A compiled model: its EPContext nodes and nothing else (the rest was left to ORT when it was compiled).
  if (ours.empty())
    return ep.plainGraphs().claimPartitions(api, ep.config(), graph, support,
                                            [&](const std::string& m) { ep.log(ORT_LOGGING_LEVEL_WARNING, m); });
  for (const OrtNode* node : ours) {
    // Each EPContext node is a fused node of its own, so ORT keeps the model's node boundaries.
    OrtNodeFusionOptions options{};
    options.ort_version_supported = ORT_API_VERSION;
    options.drop_constant_initializers = false;
    CTX_ORT_RETURN_IF_ERROR(api, api.ep.EpGraphSupportInfo_AddNodesToFuse(&support, &node, 1, &options));
  }
  return Status::ok();
}

NodeCompute* newNodeCompute(const Api& api, std::string name) {
  auto* nc = new NodeCompute();
  *static_cast<OrtNodeComputeInfo*>(nc) = OrtNodeComputeInfo{};
  nc->ort_version_supported = ORT_API_VERSION;
  nc->CreateState = createState;
  nc->Compute = computeImpl;
  nc->ReleaseState = releaseState;
  nc->api = &api;
  nc->name = std::move(name);
  return nc;
}

// Fused nodes of a plain model: the partitions GetCapability lowered.
Status compilePlain(CtxKitEp& ep, const OrtGraph** graphs, const OrtNode** fusedNodes, size_t count,
                    std::vector<std::unique_ptr<NodeCompute>>& computes) {
  const Api& api = ep.api();
  for (size_t i = 0; i < count; ++i) {
    CTX_ASSIGN_OR_RETURN(auto partition, ep.plainGraphs().find(api, *graphs[i]));
    computes.emplace_back(newNodeCompute(api, fmt::format("partition '{}'", partition->name)));
    NodeCompute& nc = *computes.back();
    kernels::ThreadPool* pool = &ep.pool();
    nc.run = [partition, pool](std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs,
                               std::vector<ir::Tensor>* bounded) {
      return partition->program->runInto(inputs, outputs, pool, bounded);
    };
    for (size_t o = 0; o < partition->program->outputCount(); ++o) {
      nc.outputs.push_back(kernels::OutputDesc{partition->program->outputDesc(o).type,
                                               program::toShape(partition->program->outputDesc(o).shape)});
      nc.bounded.push_back(program::isBounded(partition->program->outputDesc(o)));
    }
    CTX_ASSIGN_OR_RETURN(auto fusedInputs, nodeInputNames(api, *fusedNodes[i]));
    CTX_ASSIGN_OR_RETURN(auto fusedOutputs, nodeOutputNames(api, *fusedNodes[i]));
    CTX_ASSIGN_OR_RETURN(nc.inputSlots, slotsByName(partition->inputs, fusedInputs, nc.name));
    CTX_ASSIGN_OR_RETURN(nc.outputSlots, slotsByName(partition->outputs, fusedOutputs, nc.name));
    for (const auto& out : fusedOutputs)  // every value ORT expects from the node must be made by the program
      if (std::find(partition->outputs.begin(), partition->outputs.end(), out) == partition->outputs.end())
        return makeError(ErrorCode::Internal,
                         "{}: ORT expects '{}' from the fused node but the program does not output it", nc.name, out);
  }
  return Status::ok();
}

// ORT overwrites an earlier output, but never an input: a context binary that would replace the model being
// compiled is refused.
Status refuseInput(const fs::path& bin, const fs::path& model) {
  std::error_code ec;
  if (!model.empty() && fs::equivalent(bin, model, ec))
    return makeError(ErrorCode::InvalidArgument, "{}: the context binary '{}' would replace the model being compiled",
                     epcontext::kEpName, bin.string());
  return Status::ok();
}

// ep.context_enable=1: the context goes beside the output model as <output stem without _ctx>_ctxkit.bin (or into
// the first node with ep.context_embed_mode=1), and each fused node becomes an EPContext node
// (docs/epcontext-models.md).
Status writeEpContextNodes(CtxKitEp& ep, const OrtGraph** graphs, const OrtNode** fusedNodes, size_t count,
                           OrtNode** epContextNodes) {
  const Api& api = ep.api();
  const EpConfig& config = ep.config();
  std::vector<std::shared_ptr<const LoweredPartitionRun>> partitions;
  for (size_t i = 0; i < count; ++i) {
    CTX_ASSIGN_OR_RETURN(auto p, ep.plainGraphs().find(api, *graphs[i]));
    partitions.push_back(std::move(p));
  }
  const PlainContext& context = *partitions[0]->context;
  for (const auto& p : partitions)
    if (p->context.get() != &context)
      return makeError(ErrorCode::Internal, "fused nodes of one Compile call come from different graphs");
  // The context goes to a file beside the output model unless it is embedded (and not shared): only then does the
  // compile need to know where the output model goes. ORT's compile API sets ep.context_file_path to the output model
  // (SetOutputModelPath) or to the folder and name given by SetEpContextBinaryInformation; a model from a file
  // without either compiles to <stem>_ctx.onnx beside it, as ORT names it.
  const bool toFile = config.context.shareContexts || config.context.embedMode == 0;
  fs::path output = config.context.contextFilePath;
  if (output.empty() && !context.modelPath.empty())
    output = context.modelPath.parent_path() / (context.modelPath.stem().string() + "_ctx.onnx");
  if (output.empty() && toFile)
    return makeError(ErrorCode::InvalidArgument,
                     "{}: a model compiled from memory with {}={} needs a folder and a name for its context binary: "
                     "call ModelCompilationOptions_SetEpContextBinaryInformation (or set {}){}",
                     epcontext::kEpName,
                     config.context.shareContexts ? epcontext::option::kShareEpContexts
                                                  : epcontext::option::kContextEmbedMode,
                     config.context.shareContexts ? 1 : 0, epcontext::option::kContextFilePath,
                     config.context.shareContexts
                         ? ""
                         : fmt::format(", or embed the context ({}=1)", epcontext::option::kContextEmbedMode));
  std::string outStem = output.stem().string();
  if (outStem.size() > 4 && outStem.compare(outStem.size() - 4, 4, "_ctx") == 0) outStem.resize(outStem.size() - 4);
  std::string binName = outStem + "_ctxkit.bin";
  std::string embedded;
  if (config.context.shareContexts) {
    SharedCompile& shared = SharedCompile::instance();
    std::lock_guard lock(shared.mutex());
    binName = shared.binName(outStem);
    // The programs are serialized here, for the shared context only.
    for (const auto& p : partitions)
      CTX_RETURN_IF_ERROR(shared.addGraph(p->name, context.modelPath, p->program->program()));
    if (config.context.stopShareContexts) {
      fs::path bin = output.parent_path() / binName;
      CTX_RETURN_IF_ERROR(refuseInput(bin, context.modelPath));
      CTX_ASSIGN_OR_RETURN(auto target, partitioner::loadTarget(config.target));
      // Written aside and renamed over an earlier binary, as ORT overwrites an earlier output.
      CTX_RETURN_IF_ERROR(shared.writeAndReset(bin, target, config.context.weightless, config.weightlessScope));
    }
  } else if (!context.fileBytes) {
    return makeError(ErrorCode::Internal, "{}: no context was made to write", epcontext::kEpName);
  } else if (config.context.embedMode == 1) {
    embedded.assign(reinterpret_cast<const char*>(context.fileBytes->data()), context.fileBytes->size());
  } else {
    fs::path bin = output.parent_path() / binName;
    CTX_RETURN_IF_ERROR(refuseInput(bin, context.modelPath));
    CTX_RETURN_IF_ERROR(writeFileAtomically(bin, std::span(*context.fileBytes)));
  }
  const OrtModelEditorApi* editor = api.ort.GetModelEditorApi();
  if (editor == nullptr) return makeError(ErrorCode::Unsupported, "this ONNX Runtime has no model editor API");
  for (size_t i = 0; i < count; ++i) {
    const LoweredPartitionRun& p = *partitions[i];
    epcontext::NodeAttributes attrs = epcontext::ourNodeAttributes();
    attrs.mainContext = i == 0 ? 1 : 0;
    attrs.embedMode = config.context.embedMode;
    if (i == 0)
      attrs.cacheContext = config.context.embedMode == 1 ? std::string_view(embedded) : std::string_view(binName);
    attrs.onnxModelFilename = context.modelPath.filename().string();
    attrs.hardwareArchitecture = context.targetId;
    attrs.partitionName = p.name;
    attrs.maxSize = static_cast<int64_t>(p.program->arenaBytes());
    ir::Node node;
    epcontext::writeNodeAttributes(attrs, node);
    std::vector<OrtOpAttr*> ortAttrs;
    Status st = Status::ok();
    for (const auto& a : node.attrs.all()) {
      OrtOpAttr* attr = nullptr;
      OrtStatus* created = nullptr;
      if (a.type == ir::AttrType::Int) created = api.ort.CreateOpAttr(a.name.c_str(), &a.i, 1, ORT_OP_ATTR_INT, &attr);
      else if (a.type == ir::AttrType::String)
        created =
            api.ort.CreateOpAttr(a.name.c_str(), a.s.data(), static_cast<int>(a.s.size()), ORT_OP_ATTR_STRING, &attr);
      else continue;
      st = fromOrtStatus(api, created, "CreateOpAttr");
      if (!st) break;
      ortAttrs.push_back(attr);
    }
    // ORT puts the EPContext node in place of the fused node of the same name (it matches them by name, and refuses
    // the model when one is missing), and names a plugin EP's fused nodes itself (<EP>_<model hash>_<n>): the node
    // keeps that name, and ep.context_node_name_prefix goes to partition_name, which names the graph.
    const char* fusedName = nullptr;
    if (st) st = fromOrtStatus(api, api.ort.Node_GetName(fusedNodes[i], &fusedName), "Node_GetName");
    std::vector<const char*> ins, outs;
    for (const auto& n : p.inputs) ins.push_back(n.c_str());
    for (const auto& n : p.outputs) outs.push_back(n.c_str());
    if (st)
      st = fromOrtStatus(api,
                         editor->CreateNode(epcontext::kOpType, epcontext::kDomain, fusedName ? fusedName : "",
                                            ins.data(), ins.size(), outs.data(), outs.size(), ortAttrs.data(),
                                            ortAttrs.size(), &epContextNodes[i]),
                         "CreateNode (EPContext)");
    for (OrtOpAttr* a : ortAttrs) api.ort.ReleaseOpAttr(a);  // CreateNode copied them
    CTX_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

Status compile(CtxKitEp& ep, const OrtGraph** graphs, const OrtNode** fusedNodes, size_t count,
               std::vector<std::unique_ptr<NodeCompute>>& computes) {
  const Api& api = ep.api();
  if (count == 0) return Status::ok();
  CTX_ASSIGN_OR_RETURN(auto firstOurs, ourEpContextNodes(api, *graphs[0]));
  if (firstOurs.empty()) return compilePlain(ep, graphs, fusedNodes, count, computes);
  const EpConfig& config = ep.config();
  if (config.context.contextEnable) {
    // Compiling it again would need its context binaries where the new model goes. Refused here, where ORT fails
    // the session with the error (an error from GetCapability only makes ORT leave the nodes unclaimed and copy
    // them into the new model as they are).
    CTX_ASSIGN_OR_RETURN(fs::path modelPath, graphModelPath(api, *graphs[0]));
    const char* name = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetName(firstOurs[0], &name));
    return makeError(ErrorCode::InvalidGraph,
                     "{}: {} is already compiled: it holds {} EPContext node{} of {} ('{}'{}); compile its source "
                     "model instead, or load it for inference without {}",
                     epcontext::kEpName,
                     modelPath.empty() ? std::string("the model (from memory)") : modelPath.string(), count,
                     count == 1 ? "" : "s", epcontext::kEpName, name ? name : "", count > 1 ? ", ..." : "",
                     epcontext::option::kContextEnable);
  }
  // One runtime session holds every EPContext node of this call, so that main_context=0 nodes find their graphs in
  // the contexts the main nodes load, as in a model.
  ir::Model model;
  model.opsets.push_back({epcontext::kDomain, epcontext::kDomainVersion});
  std::vector<std::string> fusedNames;
  std::map<std::string, bool> declared;
  fs::path modelPath;
  for (size_t i = 0; i < count; ++i) {
    CTX_ASSIGN_OR_RETURN(auto nodes, graphNodes(api, *graphs[i]));
    const char* fusedName = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetName(fusedNodes[i], &fusedName));
    fusedNames.emplace_back(fusedName ? fusedName : "");
    if (nodes.size() != 1)
      return makeError(ErrorCode::Internal, "fused node '{}' holds {} nodes; ctxkit claims EPContext nodes one by one",
                       fusedNames.back(), nodes.size());
    if (modelPath.empty()) {
      CTX_ASSIGN_OR_RETURN(modelPath, graphModelPath(api, *graphs[i]));
    }
    CTX_ASSIGN_OR_RETURN(ir::Node node, readNode(api, *nodes[0]));
    ops::decodeNode(node);  // entering ctxkit (an EPContext node keeps its ONNX attributes only)
    for (const auto& in : node.inputs)
      if (!in.empty() && !declared[in]) {
        declared[in] = true;
        model.graph.inputs.push_back(ir::ValueInfo{in, ir::ElemType::Undefined, std::nullopt, {}});
      }
    for (const auto& out : node.outputs)
      model.graph.outputs.push_back(ir::ValueInfo{out, ir::ElemType::Undefined, std::nullopt, {}});
    model.graph.nodes.push_back(std::move(node));
  }
  // As ORT resolves them: against the model's folder, or for a model from memory the folder of
  // ep.context_file_path.
  fs::path contextDir =
      !modelPath.empty() ? modelPath.parent_path() : fs::path(config.context.contextFilePath).parent_path();
  // With session.model_external_initializers_file_folder_path set, ORT reports the model at <that folder>/
  // virtual_model.onnx; the model's own folder is then ep.context_file_path's, which a model package sets beside it
  // (docs/package.md#weights).
  if (!config.weightsFolder.empty() && !config.context.contextFilePath.empty() && !modelPath.empty() &&
      modelPath.parent_path().lexically_normal() == fs::path(config.weightsFolder).lexically_normal())
    contextDir = fs::path(config.context.contextFilePath).parent_path();
  std::string displayName = modelPath.empty() ? std::string("model (from memory)") : modelPath.filename().string();
  runtime::SessionOptions options;
  options.threads = config.threads;
  options.failOnSuboptimal = config.failOnSuboptimal;
  options.shareContexts = config.shareLoadedContexts;
  options.sourceModelPath = config.context.sourceModelPath;
  options.sourceModelBuffer = config.sourceModelBuffer;
  if (options.sourceModelPath.empty() && options.sourceModelBuffer.empty() && !config.weightsFolder.empty() &&
      count > 0) {
    const std::string name = epcontext::readNodeAttributes(model.graph.nodes[0]).onnxModelFilename;
    if (!name.empty()) {
      auto inFolder = resolveInside(config.weightsFolder, name);
      if (!inFolder)
        return inFolder.takeError().addContext(
            fmt::format("{}: {} '{}' in session.model_external_initializers_file_folder_path", displayName,
                        epcontext::attr::kOnnxModelFilename, name));
      options.sourceModelPath = inFolder->string();
    }
  }
  options.verifyWeights = config.verify;
  // Session creation stays the context load and program binding (docs/ort-ep.md): the arena and the mapped weights
  // are faulted in by the first Run, as ONNX Runtime's CPU EP allocates its own on first use.
  options.prefault = false;
  // The nodes' names and values, for binding the fused nodes below: the model itself moves into the session (an
  // embedded context is a node attribute of the size of the binary, which a copy of the model would copy again).
  struct NodeIo {
    std::string name;
    std::vector<std::string> inputs, outputs;
  };
  std::vector<NodeIo> nodeIo;
  nodeIo.reserve(count);
  for (const ir::Node& node : model.graph.nodes) nodeIo.push_back(NodeIo{node.name, node.inputs, node.outputs});
  auto loaded = runtime::Session::load(std::move(model), contextDir, options, displayName);
  // A context binary that cannot be loaded (missing, not a file, another format version, changed bytes) makes the
  // model invalid for ORT: ORT_INVALID_GRAPH, as ORT's design asks, whatever the runtime's kind of error.
  if (!loaded) return Error(ErrorCode::InvalidGraph, loaded.error().message());
  std::shared_ptr<const runtime::Session> session(std::move(loaded).value());

  for (size_t i = 0; i < count; ++i) {
    const NodeIo& node = nodeIo[i];
    std::unique_ptr<NodeCompute> nc(
        newNodeCompute(api, fmt::format("{}: EPContext node '{}'", displayName, node.name)));
    nc->run = [session, i](std::span<const ir::Tensor* const> inputs, std::span<ir::Tensor* const> outputs,
                           std::vector<ir::Tensor>* bounded) {
      return session->runCompiledNodeInto(i, inputs, outputs, bounded);
    };
    CTX_ASSIGN_OR_RETURN(nc->outputs, session->compiledNodeOutputs(i, &nc->bounded));
    CTX_ASSIGN_OR_RETURN(auto fusedInputs, nodeInputNames(api, *fusedNodes[i]));
    CTX_ASSIGN_OR_RETURN(auto fusedOutputs, nodeOutputNames(api, *fusedNodes[i]));
    std::vector<std::string> nodeInputs;
    for (const auto& in : node.inputs)
      if (!in.empty()) nodeInputs.push_back(in);
    CTX_ASSIGN_OR_RETURN(nc->inputSlots, slotsByName(nodeInputs, fusedInputs, nc->name));
    CTX_ASSIGN_OR_RETURN(nc->outputSlots, slotsByName(node.outputs, fusedOutputs, nc->name));
    computes.push_back(std::move(nc));
  }
  return Status::ok();
}

const char* ORT_API_CALL getName(const OrtEp*) noexcept { return epcontext::kEpName; }

OrtStatus* ORT_API_CALL getCapabilityImpl(OrtEp* self, const OrtGraph* graph, OrtEpGraphSupportInfo* support) noexcept {
  auto& ep = *static_cast<CtxKitEp*>(self);
  try {
    Status st = getCapability(ep, *graph, *support);
    if (!st && ep.sharesCompile()) ep.endSharedGroup(st.error().message());
    return st ? nullptr : toOrtStatus(ep.api(), st.error());
  } catch (const std::exception& e) {
    return ep.api().ort.CreateStatus(ORT_FAIL,
                                     fmt::format("{}: GetCapability: {}", epcontext::kEpName, e.what()).c_str());
  }
}

OrtStatus* ORT_API_CALL compileImpl(OrtEp* self, const OrtGraph** graphs, const OrtNode** fusedNodes, size_t count,
                                    OrtNodeComputeInfo** computeInfos, OrtNode** epContextNodes) noexcept {
  auto& ep = *static_cast<CtxKitEp*>(self);
  try {
    std::vector<std::unique_ptr<NodeCompute>> computes;
    Status st = compile(ep, graphs, fusedNodes, count, computes);
    if (st && epContextNodes && ep.config().context.contextEnable) {
      auto plain = ourEpContextNodes(ep.api(), *graphs[0]);
      if (plain && plain->empty()) st = writeEpContextNodes(ep, graphs, fusedNodes, count, epContextNodes);
    }
    if (!st && ep.sharesCompile()) ep.endSharedGroup(st.error().message());
    if (!st) return toOrtStatus(ep.api(), st.error());
    for (size_t i = 0; i < count; ++i) {
      computeInfos[i] = computes[i].release();
    }
    return nullptr;
  } catch (const std::exception& e) {
    return ep.api().ort.CreateStatus(ORT_FAIL, fmt::format("{}: Compile: {}", epcontext::kEpName, e.what()).c_str());
  }
}

// Every weight a context uses can stay in the source model (ALL): derived weights (folded, fused) are stored, and
// packed layouts are made at load. With EP option weightless_scope=external_only, only external-data initializers stay
// there (EXTERNAL_ONLY: the EP copies the initializers inside the .onnx file into its context).
OrtStatus* ORT_API_CALL getWeightlessSupport(const OrtEp* self, OrtWeightlessSupport* support) noexcept {
  *support = static_cast<const CtxKitEp*>(self)->config().weightlessScope == weightshare::WeightlessScope::All
                 ? OrtWeightlessSupport_ALL
                 : OrtWeightlessSupport_EXTERNAL_ONLY;
  return nullptr;
}

const char* ORT_API_CALL getCompatibilityInfo(OrtEp* self, const OrtGraph*) noexcept {
  return static_cast<CtxKitEp*>(self)->compatibilityInfo().c_str();
}

void ORT_API_CALL releaseNodeComputeInfos(OrtEp*, OrtNodeComputeInfo** infos, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) delete static_cast<NodeCompute*>(infos[i]);
}

}  // namespace

Expected<EpConfig> readEpConfig(const Api& api, const OrtSessionOptions& options) {
  EpConfig config;
  CTX_ASSIGN_OR_RETURN(const ConfigEntries entries, ConfigEntries::read(api, options));
  config.target = entries.get(epOptionKey("target"), config.target);
  if (!epcontext::findKnownTarget(config.target)) {
    std::error_code ec;
    if (!fs::is_regular_file(config.target, ec))
      return makeError(ErrorCode::InvalidArgument,
                       "{} option target '{}': neither a built-in target ({}, {}) nor a target file",
                       epcontext::kEpName, config.target, epcontext::kNpuSim.id, epcontext::kCpu.id);
  }
  const std::string threads = entries.get(epOptionKey("threads"), "1");
  auto [end, ec] = std::from_chars(threads.data(), threads.data() + threads.size(), config.threads);
  if (threads.empty() || ec != std::errc() || end != threads.data() + threads.size() || config.threads < 1 ||
      config.threads > 1024)
    return makeError(ErrorCode::InvalidArgument, "{} option threads '{}': expected a number from 1 to 1024",
                     epcontext::kEpName, threads);
  const std::string verify = entries.get(epOptionKey("verify"), "0");
  if (verify != "0" && verify != "1")
    return makeError(ErrorCode::InvalidArgument, "{} option verify '{}': expected 0 or 1", epcontext::kEpName, verify);
  config.verify = verify == "1";
  // The weightless scope ORT's OrtWeightlessSupport names, spelled as its weightless_support device metadata.
  const std::string scope = entries.get(epOptionKey("weightless_scope"), "all");
  if (scope != "all" && scope != "external_only")
    return makeError(ErrorCode::InvalidArgument, "{} option weightless_scope '{}': expected all or external_only",
                     epcontext::kEpName, scope);
  config.weightlessScope =
      scope == "all" ? weightshare::WeightlessScope::All : weightshare::WeightlessScope::ExternalOnly;
  CTX_RETURN_IF_ERROR(refuseUnknownEpOptions(entries));
  // ORT's EPContext keys, through the parser ctxgen's -C uses.
  for (const char* key : epcontext::contextOptionKeys())
    if (const std::string* value = entries.find(key); value && !value->empty())
      CTX_RETURN_IF_ERROR(epcontext::applyContextOption(key, *value, config.context));
  if (config.context.contextEnable) CTX_RETURN_IF_ERROR(epcontext::checkContextOptions(config.context));
  // Loaded contexts are shared between the process's sessions unless the session says ep.share_ep_contexts=0.
  const std::string* share = entries.find(epcontext::option::kShareEpContexts);
  config.shareLoadedContexts = !share || *share != "0";
  config.failOnSuboptimal = entries.get("session.fail_on_suboptimal_compiled_model", "0") == "1";
  config.weightsFolder = entries.get("session.model_external_initializers_file_folder_path", "");
  const void* buffer = nullptr;
  size_t bufferSize = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ep.SessionOptionsGetWeightlessSourceModelBuffer(&options, &buffer, &bufferSize));
  if (buffer != nullptr) config.sourceModelBuffer = std::span(static_cast<const std::byte*>(buffer), bufferSize);
  return config;
}

CtxKitEp::CtxKitEp(const Api& api, EpConfig config, const OrtLogger* logger)
    : OrtEp{}, api_(api), config_(std::move(config)), logger_(logger) {
  ort_version_supported = ORT_API_VERSION;
  GetName = getName;
  GetCapability = getCapabilityImpl;
  Compile = compileImpl;
  ReleaseNodeComputeInfos = releaseNodeComputeInfos;
  GetCompiledModelCompatibilityInfo = getCompatibilityInfo;
  GetWeightlessSupport = getWeightlessSupport;
  if (sharesCompile()) {
    SharedCompile& shared = SharedCompile::instance();
    std::lock_guard lock(shared.mutex());
    sharedGroup_ = shared.group();
  }
}

CtxKitEp::~CtxKitEp() {
  // The group's last session ends it, whether or not it wrote the binary (no logging here: ORT may have released
  // the session's logger already).
  if (sharesCompile() && config_.context.stopShareContexts) SharedCompile::instance().endGroup(sharedGroup_);
}

void CtxKitEp::endSharedGroup(const std::string& why) {
  if (SharedCompile::instance().endGroup(sharedGroup_))
    log(ORT_LOGGING_LEVEL_WARNING,
        fmt::format("{}: this {}=1 group ends here, its binary unwritten: a session of it failed: {}; compile the "
                    "group again from its first model",
                    epcontext::kEpName, epcontext::option::kShareEpContexts, why));
}

void endSharedGroupOfFailedSession(const Api& api, const OrtSessionOptions& options) {
  for (const char* key : {epcontext::option::kContextEnable, epcontext::option::kShareEpContexts,
                          epcontext::option::kStopShareEpContexts}) {
    auto value = sessionConfigEntry(api, options, key, "0");
    if (!value || *value != "1") return;
  }
  SharedCompile& shared = SharedCompile::instance();
  uint64_t group = 0;
  {
    std::lock_guard lock(shared.mutex());
    group = shared.group();
  }
  shared.endGroup(group);
}

kernels::ThreadPool& CtxKitEp::pool() {
  // ORT calls Compile, the only caller, from one thread at a time per session.
  if (!pool_) pool_ = kernels::makeThreadPool(config_.threads);
  return *pool_;
}

const std::string& CtxKitEp::compatibilityInfo() {
  // Made when ORT first asks (it asks only when it writes a compiled model): a session that loads one never parses
  // the target description for it.
  if (!compatibilityInfo_) {
    epcontext::CompatibilityInfo info;
    info.formatMajor = format::kFormatMajor;
    info.formatMinor = format::kFormatMinor;
    if (auto target = partitioner::loadTarget(config_.target)) {
      info.targetId = target->hardwareArchitecture;
      info.targetRevision = target->revision;
    }
    compatibilityInfo_ = epcontext::formatCompatibilityInfo(info);
  }
  return *compatibilityInfo_;
}

void CtxKitEp::log(OrtLoggingLevel level, const std::string& message) const {
  if (logger_ == nullptr) return;
  // A message that cannot be logged is dropped: logging never changes what a session does.
  if (OrtStatus* st = api_.ort.Logger_LogMessage(logger_, level, message.c_str(), ORT_FILE, __LINE__, "GetCapability"))
    api_.ort.ReleaseStatus(st);
}

}  // namespace ctxkit::ort_ep
