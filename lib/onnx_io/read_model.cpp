// ModelProto -> ir::Model (graphs, nodes, attributes, value infos) and the public loading functions.
#include "onnx_io/onnx_io.h"
#include "onnx_io/proto_convert.h"

#include "ir/op_kind.h"
#include "ops/node_attrs.h"

#include <climits>
#include <cstdlib>

namespace ctxkit::onnx_io {

namespace fs = std::filesystem;

namespace detail {
namespace {

// "" and "ai.onnx" name the same default domain.
std::string normalizeDomain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

Expected<ir::ValueInfo> valueInfoFromProto(const onnx::ValueInfoProto& p) {
  ir::ValueInfo v;
  v.name = p.name();
  v.docString = p.doc_string();
  // Sequence, map and optional types have no ir form: they load as an undefined type of unknown rank.
  if (!p.has_type() || !p.type().has_tensor_type()) return v;
  const auto& tt = p.type().tensor_type();
  auto type = ir::elemTypeFromInt(tt.elem_type());
  if (!type) return makeError(ErrorCode::Unsupported, "element type {} is not a known ONNX type", tt.elem_type());
  v.type = *type;
  if (tt.has_shape()) {
    std::vector<ir::Dim> dims;
    dims.reserve(static_cast<size_t>(tt.shape().dim_size()));
    for (const auto& d : tt.shape().dim()) {
      // Negative dim_values occur in exported files as "unknown"; keep them unknown.
      if (d.has_dim_value() && d.dim_value() >= 0) dims.push_back(ir::Dim::known(d.dim_value()));
      else if (d.has_dim_param()) dims.push_back(ir::Dim::named(d.dim_param()));
      else dims.push_back(ir::Dim{});
    }
    v.shape = std::move(dims);
  }
  return v;
}

// IR version 1 files may leave `type` unset; the populated field tells it.
int inferAttributeType(const onnx::AttributeProto& p) {
  if (p.floats_size() > 0) return onnx::AttributeProto::FLOATS;
  if (p.ints_size() > 0) return onnx::AttributeProto::INTS;
  if (p.strings_size() > 0) return onnx::AttributeProto::STRINGS;
  if (p.tensors_size() > 0) return onnx::AttributeProto::TENSORS;
  if (p.graphs_size() > 0) return onnx::AttributeProto::GRAPHS;
  if (p.has_f()) return onnx::AttributeProto::FLOAT;
  if (p.has_i()) return onnx::AttributeProto::INT;
  if (p.has_s()) return onnx::AttributeProto::STRING;
  if (p.has_t()) return onnx::AttributeProto::TENSOR;
  if (p.has_g()) return onnx::AttributeProto::GRAPH;
  return onnx::AttributeProto::UNDEFINED;
}

Expected<std::shared_ptr<ir::Graph>> subgraph(const onnx::GraphProto& p, LoadContext& ctx, int depth) {
  CTX_ASSIGN_OR_RETURN(ir::Graph g, graphFromProto(p, ctx, depth + 1));
  return std::make_shared<ir::Graph>(std::move(g));
}

Expected<ir::Attribute> attributeFromProto(const onnx::AttributeProto& p, LoadContext& ctx, int depth) {
  if (!p.ref_attr_name().empty())
    return makeError(ErrorCode::Unsupported, "refers to function attribute '{}', which only functions may do",
                     p.ref_attr_name());
  ir::Attribute a;
  a.name = p.name();
  int type = p.type() == onnx::AttributeProto::UNDEFINED ? inferAttributeType(p) : static_cast<int>(p.type());
  switch (type) {
    case onnx::AttributeProto::FLOAT: a.f = p.f(); break;
    case onnx::AttributeProto::INT: a.i = p.i(); break;
    case onnx::AttributeProto::STRING: a.s = p.s(); break;
    case onnx::AttributeProto::TENSOR: {
      CTX_ASSIGN_OR_RETURN(a.t, tensorFromProto(p.t(), ctx));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      CTX_ASSIGN_OR_RETURN(a.g, subgraph(p.g(), ctx, depth));
      break;
    }
    case onnx::AttributeProto::FLOATS: a.floats.assign(p.floats().begin(), p.floats().end()); break;
    case onnx::AttributeProto::INTS: a.ints.assign(p.ints().begin(), p.ints().end()); break;
    case onnx::AttributeProto::STRINGS: a.strings.assign(p.strings().begin(), p.strings().end()); break;
    case onnx::AttributeProto::TENSORS:
      for (int i = 0; i < p.tensors_size(); ++i) {
        auto t = tensorFromProto(p.tensors(i), ctx);
        if (!t) return t.takeError().addContext(fmt::format("tensor {}", i));
        a.tensors.push_back(std::move(t).value());
      }
      break;
    case onnx::AttributeProto::GRAPHS:
      for (int i = 0; i < p.graphs_size(); ++i) {
        auto g = subgraph(p.graphs(i), ctx, depth);
        if (!g) return g.takeError().addContext(fmt::format("graph {}", i));
        a.graphs.push_back(std::move(g).value());
      }
      break;
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS:
    case onnx::AttributeProto::TYPE_PROTO:
    case onnx::AttributeProto::TYPE_PROTOS:
      return makeError(ErrorCode::Unsupported, "attributes of type {} ({}) are not supported",
                       onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type)),
                       type);
    case onnx::AttributeProto::UNDEFINED:
      return makeError(ErrorCode::InvalidGraph, "attribute has no type and no value");
    default: return makeError(ErrorCode::InvalidGraph, "attribute type {} is not a known ONNX type", type);
  }
  a.type = static_cast<ir::AttrType>(type);  // the numbers 1-10 agree (see ir/attribute.h)
  return a;
}

Expected<ir::Node> nodeFromProto(const onnx::NodeProto& p, LoadContext& ctx, int depth) {
  ir::Node n;
  n.name = p.name();
  n.opType = p.op_type();
  n.domain = normalizeDomain(p.domain());
  n.docString = p.doc_string();
  if (ctx.localFunctions.count({n.domain, n.opType}))
    return makeError(ErrorCode::Unsupported,
                     "calls the model-local function '{}' (domain '{}'); expected a standard op", n.opType, n.domain);
  n.kind = ir::opKindFromName(n.domain, n.opType);
  auto opset = ctx.opsets.find(n.domain);
  n.opset = opset == ctx.opsets.end() ? 0 : opset->second;
  n.inputs.assign(p.input().begin(), p.input().end());
  n.outputs.assign(p.output().begin(), p.output().end());
  for (const auto& ap : p.attribute()) {
    if (n.attrs.has(ap.name())) return makeError(ErrorCode::InvalidGraph, "attribute '{}' appears twice", ap.name());
    auto a = attributeFromProto(ap, ctx, depth);
    if (!a) return a.takeError().addContext(fmt::format("attribute '{}'", ap.name()));
    n.attrs.all().push_back(std::move(a).value());
  }
  // Decoded here, once: a bad attribute stays with the node (its decoder error), it does not fail the load.
  ops::decodeNode(n);
  return n;
}

Status valueInfosFromProto(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& list, std::string_view what,
                           std::vector<ir::ValueInfo>& out) {
  out.reserve(static_cast<size_t>(list.size()));
  for (const auto& vp : list) {
    auto v = valueInfoFromProto(vp);
    if (!v) return v.takeError().addContext(fmt::format("{} '{}'", what, vp.name()));
    out.push_back(std::move(v).value());
  }
  return Status::ok();
}

Expected<ir::Model> modelFromProto(const onnx::ModelProto& p, LoadContext& ctx) {
  ir::Model m;
  m.irVersion = p.ir_version();
  m.producerName = p.producer_name();
  m.producerVersion = p.producer_version();
  m.domain = p.domain();
  m.modelVersion = p.model_version();
  m.docString = p.doc_string();
  for (const auto& op : p.opset_import()) {
    std::string key = normalizeDomain(op.domain());
    if (!ctx.opsets.emplace(key, op.version()).second)
      return makeError(ErrorCode::InvalidGraph, "opset_import lists domain '{}' twice", key.empty() ? "ai.onnx" : key);
    m.opsets.push_back({op.domain(), op.version()});
  }
  for (const auto& f : p.functions()) ctx.localFunctions.emplace(normalizeDomain(f.domain()), f.name());
  for (const auto& kv : p.metadata_props()) {
    if (m.findMetadata(kv.key()))
      return makeError(ErrorCode::InvalidGraph, "metadata key '{}' appears twice", kv.key());
    m.metadata.emplace_back(kv.key(), kv.value());
  }
  if (!p.has_graph()) return makeError(ErrorCode::InvalidGraph, "model has no graph");
  CTX_ASSIGN_OR_RETURN(m.graph, graphFromProto(p.graph(), ctx, 0));
  return m;
}

Expected<ir::Model> loadFromBytes(std::span<const std::byte> bytes, fs::path baseDir, bool resolveExternalData = true) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return makeError(ErrorCode::Unsupported,
                     "model is {} bytes; protobuf cannot parse more than {} (2 GiB): store weights as external data",
                     bytes.size(), INT_MAX);
  auto proto = std::make_shared<onnx::ModelProto>();
  CTX_RETURN_IF_ERROR(parseMessage(*proto, bytes, "ONNX protobuf"));
  LoadContext ctx;
  ctx.baseDir = std::move(baseDir);
  ctx.resolveExternalData = resolveExternalData;
  ctx.owner = proto;
  CTX_ASSIGN_OR_RETURN(auto model, modelFromProto(*proto, ctx));
  for (const auto& [path, mapping] : ctx.mappings) model.externalDataFiles.push_back(path.string());
  return model;
}

Expected<ir::Tensor> tensorFromBytes(std::span<const std::byte> bytes, std::optional<fs::path> baseDir,
                                     std::string* name) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return makeError(ErrorCode::Unsupported, "tensor file is {} bytes; protobuf cannot parse more than {} (2 GiB)",
                     bytes.size(), INT_MAX);
  auto proto = std::make_shared<onnx::TensorProto>();
  CTX_RETURN_IF_ERROR(parseMessage(*proto, bytes, "ONNX TensorProto"));
  LoadContext ctx;
  ctx.baseDir = std::move(baseDir);
  ctx.owner = proto;
  auto t = tensorFromProto(*proto, ctx);
  if (!t && !proto->name().empty()) return t.takeError().addContext(fmt::format("tensor '{}'", proto->name()));
  if (name) *name = proto->name();
  return t;
}

}  // namespace

Expected<ir::Graph> graphFromProto(const onnx::GraphProto& p, LoadContext& ctx, int depth) {
  if (depth > kMaxGraphDepth)
    return makeError(ErrorCode::InvalidGraph, "subgraphs are nested more than {} levels deep", kMaxGraphDepth);
  ir::Graph g;
  g.name = p.name();
  g.docString = p.doc_string();
  if (p.sparse_initializer_size() > 0)
    return makeError(ErrorCode::Unsupported, "sparse initializer '{}' is not supported",
                     p.sparse_initializer(0).values().name());
  g.initializers.reserve(static_cast<size_t>(p.initializer_size()));
  for (const auto& tp : p.initializer()) {
    if (g.findInitializer(tp.name()))
      return makeError(ErrorCode::InvalidGraph, "initializer '{}' appears twice", tp.name());
    if (!ctx.resolveExternalData && tp.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
      ir::ExternalLocation ext;
      for (const auto& entry : tp.external_data()) {
        if (entry.key() == "location") ext.location = entry.value();
        if (entry.key() == "offset") ext.offset = std::strtoull(entry.value().c_str(), nullptr, 10);
        if (entry.key() == "length") ext.length = std::strtoull(entry.value().c_str(), nullptr, 10);
      }
      g.initializers.push_back(ir::Initializer{tp.name(), ir::Tensor(), std::move(ext)});
      continue;
    }
    auto t = tensorFromProto(tp, ctx);
    if (!t) return t.takeError().addContext(fmt::format("initializer '{}'", tp.name()));
    g.initializers.push_back(ir::Initializer{tp.name(), std::move(t).value(), std::nullopt});
  }
  CTX_RETURN_IF_ERROR(valueInfosFromProto(p.input(), "input", g.inputs));
  CTX_RETURN_IF_ERROR(valueInfosFromProto(p.output(), "output", g.outputs));
  CTX_RETURN_IF_ERROR(valueInfosFromProto(p.value_info(), "value_info", g.valueInfo));
  g.nodes.reserve(static_cast<size_t>(p.node_size()));
  for (int i = 0; i < p.node_size(); ++i) {
    const auto& np = p.node(i);
    auto n = nodeFromProto(np, ctx, depth);
    if (!n) {
      std::string where = np.name().empty() ? fmt::format("node #{} ({})", i, np.op_type())
                                            : fmt::format("node '{}' ({})", np.name(), np.op_type());
      return n.takeError().addContext(where);
    }
    g.nodes.push_back(std::move(n).value());
  }
  return g;
}

}  // namespace detail

Expected<ir::Model> loadModel(const fs::path& path, const LoadOptions& options) {
  return detail::guarded(fmt::format("loading '{}'", path.string()), [&]() -> Expected<ir::Model> {
    // The mapping is needed only while parsing: protobuf copies raw_data into the message.
    CTX_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
    return detail::loadFromBytes(mapped->bytes(), detail::folderOf(path), options.resolveExternalData);
  });
}

Expected<ir::Model> loadModelFromBuffer(std::span<const std::byte> bytes, const fs::path& baseDir,
                                        std::string_view displayName) {
  return detail::guarded(fmt::format("loading '{}'", displayName), [&]() -> Expected<ir::Model> {
    return detail::loadFromBytes(bytes, baseDir.empty() ? fs::path(".") : baseDir);
  });
}

Expected<ir::Tensor> parseTensor(std::span<const std::byte> bytes, std::string_view displayName, std::string* name) {
  return detail::guarded(fmt::format("loading '{}'", displayName),
                         [&]() -> Expected<ir::Tensor> { return detail::tensorFromBytes(bytes, std::nullopt, name); });
}

Expected<ir::Tensor> loadTensorFile(const fs::path& path, std::string* name) {
  return detail::guarded(fmt::format("loading '{}'", path.string()), [&]() -> Expected<ir::Tensor> {
    CTX_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
    return detail::tensorFromBytes(mapped->bytes(), detail::folderOf(path), name);
  });
}

}  // namespace ctxkit::onnx_io
