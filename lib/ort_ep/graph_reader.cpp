// OrtGraph / OrtNode -> ir::Node, through ORT's graph API.
#include "ort_ep/graph_reader.h"

#include "ops/node_attrs.h"

#include <cstring>

namespace ctxkit::ort_ep {

namespace {

Expected<std::vector<std::string>> valueNames(const Api& api, std::span<const OrtValueInfo* const> values) {
  std::vector<std::string> names;
  names.reserve(values.size());
  for (const OrtValueInfo* v : values) {
    if (v == nullptr) {  // an omitted optional input
      names.emplace_back();
      continue;
    }
    const char* name = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetValueInfoName(v, &name));
    names.emplace_back(name ? name : "");
  }
  return names;
}

// ReadOpAttr into a buffer of the size it asks for. A too-small buffer is an error status that reports the size.
Expected<std::string> readAttributeBytes(const Api& api, const OrtOpAttr& attr, OrtOpAttrType type) {
  size_t size = 0;
  OrtStatus* probe = api.ort.ReadOpAttr(&attr, type, nullptr, 0, &size);
  if (probe == nullptr) return std::string();  // nothing to read (empty string or list)
  api.ort.ReleaseStatus(probe);
  std::string bytes(size, '\0');
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.ReadOpAttr(&attr, type, bytes.data(), bytes.size(), &size));
  bytes.resize(size);
  return bytes;
}

template <typename T> Expected<std::vector<T>> readList(const Api& api, const OrtOpAttr& attr, OrtOpAttrType type) {
  CTX_ASSIGN_OR_RETURN(std::string bytes, readAttributeBytes(api, attr, type));
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

Expected<std::optional<ir::Attribute>> readAttribute(const Api& api, const OrtOpAttr& attr) {
  const char* name = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.OpAttr_GetName(&attr, &name));
  OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.OpAttr_GetType(&attr, &type));
  size_t size = 0;
  switch (type) {
    case ORT_OP_ATTR_INT: {
      int64_t v = 0;
      CTX_ORT_RETURN_IF_ERROR(api, api.ort.ReadOpAttr(&attr, type, &v, sizeof v, &size));
      return std::optional<ir::Attribute>(ir::Attribute::makeInt(name, v));
    }
    case ORT_OP_ATTR_FLOAT: {
      float v = 0;
      CTX_ORT_RETURN_IF_ERROR(api, api.ort.ReadOpAttr(&attr, type, &v, sizeof v, &size));
      return std::optional<ir::Attribute>(ir::Attribute::makeFloat(name, v));
    }
    case ORT_OP_ATTR_STRING: {
      CTX_ASSIGN_OR_RETURN(std::string s, readAttributeBytes(api, attr, type));
      return std::optional<ir::Attribute>(ir::Attribute::makeString(name, std::move(s)));
    }
    case ORT_OP_ATTR_INTS: {
      CTX_ASSIGN_OR_RETURN(auto v, readList<int64_t>(api, attr, type));
      return std::optional<ir::Attribute>(ir::Attribute::makeInts(name, std::move(v)));
    }
    case ORT_OP_ATTR_FLOATS: {
      CTX_ASSIGN_OR_RETURN(auto v, readList<float>(api, attr, type));
      return std::optional<ir::Attribute>(ir::Attribute::makeFloats(name, std::move(v)));
    }
    case ORT_OP_ATTR_TENSOR: {
      OrtValue* value = nullptr;
      CTX_ORT_RETURN_IF_ERROR(api, api.ort.OpAttr_GetTensorAttributeAsOrtValue(&attr, &value));
      if (value == nullptr) return std::optional<ir::Attribute>();
      auto view = tensorView(api, *value, name);
      Expected<ir::Tensor> copy =
          view ? ir::Tensor::copyOf(view->type(), view->shape(), view->bytes()) : view.takeError();
      api.ort.ReleaseValue(value);
      if (!copy) return copy.takeError();
      return std::optional<ir::Attribute>(ir::Attribute::makeTensor(name, std::move(copy).value()));
    }
    default: return std::optional<ir::Attribute>();  // string lists, graphs: not read (see ReadGraph::hasSubgraphs)
  }
}

Expected<ir::ValueInfo> readValueInfo(const Api& api, const OrtValueInfo& value) {
  ir::ValueInfo info;
  const char* name = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetValueInfoName(&value, &name));
  info.name = name ? name : "";
  const OrtTypeInfo* type = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetValueInfoTypeInfo(&value, &type));
  if (type == nullptr) return info;
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.CastTypeInfoToTensorInfo(type, &tensor));
  if (tensor == nullptr) return info;  // not a tensor (sequence, map, optional)
  ONNXTensorElementDataType elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorElementType(tensor, &elem));
  if (auto t = ir::elemTypeFromInt(static_cast<int32_t>(elem))) info.type = *t;
  // A value whose rank ORT does not know reports no dimensions, as a scalar does: it has no shape, not an empty one.
  if (!api.ort.TensorTypeAndShape_HasShape(tensor)) return info;
  size_t rank = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetDimensionsCount(tensor, &rank));
  std::vector<int64_t> dims(rank);
  std::vector<const char*> symbols(rank, nullptr);
  if (rank > 0) {
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetDimensions(tensor, dims.data(), rank));
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetSymbolicDimensions(tensor, symbols.data(), rank));
  }
  std::vector<ir::Dim> shape;
  for (size_t d = 0; d < rank; ++d)
    shape.push_back(dims[d] >= 0 ? ir::Dim::known(dims[d]) : ir::Dim::named(symbols[d] ? symbols[d] : ""));
  info.shape = std::move(shape);
  return info;
}

}  // namespace

Expected<ir::Tensor> tensorView(const Api& api, const OrtValue& value, const std::string& what) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorTypeAndShape(&value, &info));
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  Status st = fromOrtStatus(api, api.ort.GetTensorElementType(info, &type), "GetTensorElementType");
  if (st) st = fromOrtStatus(api, api.ort.GetDimensionsCount(info, &rank), "GetDimensionsCount");
  ir::Shape shape(rank);
  if (st && rank > 0) st = fromOrtStatus(api, api.ort.GetDimensions(info, shape.data(), rank), "GetDimensions");
  api.ort.ReleaseTensorTypeAndShapeInfo(info);
  CTX_RETURN_IF_ERROR(st);
  auto elem = ir::elemTypeFromInt(static_cast<int32_t>(type));
  if (!elem || *elem == ir::ElemType::String || *elem == ir::ElemType::Undefined)
    return makeError(ErrorCode::Unsupported, "{}: element type {} is not supported here", what, static_cast<int>(type));
  const void* data = nullptr;
  size_t bytes = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorData(&value, &data));
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.GetTensorSizeInBytes(&value, &bytes));
  return ir::Tensor::view(*elem, std::move(shape), static_cast<const std::byte*>(data), bytes, nullptr)
      .addContext(what);
}

Expected<std::vector<const OrtNode*>> graphNodes(const Api& api, const OrtGraph& graph) {
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetNumNodes(&graph, &count));
  std::vector<const OrtNode*> nodes(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetNodes(&graph, nodes.data(), nodes.size()));
  return nodes;
}

Expected<std::filesystem::path> graphModelPath(const Api& api, const OrtGraph& graph) {
  const ORTCHAR_T* path = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetModelPath(&graph, &path));
  return std::filesystem::path(path ? path : "");
}

Expected<NodeKind> readNodeKind(const Api& api, const OrtNode& node) {
  const char* opType = nullptr;
  const char* domain = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetOperatorType(&node, &opType));
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetDomain(&node, &domain));
  return NodeKind{opType ? opType : "", domain ? domain : ""};
}

Expected<std::optional<std::string>> readStringAttribute(const Api& api, const OrtNode& node, const char* name) {
  const OrtOpAttr* attr = nullptr;
  OrtStatus* status = api.ort.Node_GetAttributeByName(&node, name, &attr);
  if (status != nullptr) {  // ORT_NOT_FOUND: the node has no such attribute
    api.ort.ReleaseStatus(status);
    return std::optional<std::string>();
  }
  if (attr == nullptr) return std::optional<std::string>();
  OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.OpAttr_GetType(attr, &type));
  if (type != ORT_OP_ATTR_STRING) return std::optional<std::string>();
  CTX_ASSIGN_OR_RETURN(std::string value, readAttributeBytes(api, *attr, type));
  return std::optional<std::string>(std::move(value));
}

Expected<std::vector<std::string>> nodeInputNames(const Api& api, const OrtNode& node) {
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumInputs(&node, &count));
  std::vector<const OrtValueInfo*> values(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetInputs(&node, values.data(), values.size()));
  return valueNames(api, values);
}

Expected<std::vector<std::string>> nodeOutputNames(const Api& api, const OrtNode& node) {
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumOutputs(&node, &count));
  std::vector<const OrtValueInfo*> values(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetOutputs(&node, values.data(), values.size()));
  return valueNames(api, values);
}

Expected<ir::Node> readNode(const Api& api, const OrtNode& node) {
  ir::Node n;
  const char* name = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetName(&node, &name));
  n.name = name ? name : "";
  CTX_ASSIGN_OR_RETURN(NodeKind kind, readNodeKind(api, node));
  n.opType = std::move(kind.opType);
  n.domain = std::move(kind.domain);
  n.kind = ir::opKindFromName(n.domain, n.opType);
  int since = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetSinceVersion(&node, &since));
  n.opset = since;
  CTX_ASSIGN_OR_RETURN(n.inputs, nodeInputNames(api, node));
  CTX_ASSIGN_OR_RETURN(n.outputs, nodeOutputNames(api, node));
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumAttributes(&node, &count));
  std::vector<const OrtOpAttr*> attrs(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetAttributes(&node, attrs.data(), attrs.size()));
  for (const OrtOpAttr* a : attrs) {
    CTX_ASSIGN_OR_RETURN(auto attr, readAttribute(api, *a).addContext(fmt::format("node '{}'", n.name)));
    if (attr) n.attrs.set(std::move(*attr));
  }
  return n;
}

}  // namespace ctxkit::ort_ep

namespace ctxkit::ort_ep {

namespace {

// The ops of a body have the opsets of the model that holds it.
void setOpsets(ir::Graph& g, const ir::Model& model) {
  for (auto& n : g.nodes) {
    n.opset = model.opsetFor(n.domain);
    for (auto& a : n.attrs.all())
      if (a.g) setOpsets(*a.g, model);
    ops::decodeNode(n);  // again: decoded for the body's own opsets when it was read
  }
}

// An If node's then_branch and else_branch, read as graph attributes.
Status readBranches(const Api& api, const OrtNode& node, const ir::Model& model, ir::Node& n) {
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumSubgraphs(&node, &count));
  std::vector<const OrtGraph*> graphs(count);
  std::vector<const char*> names(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetSubgraphs(&node, graphs.data(), count, names.data()));
  for (size_t k = 0; k < count; ++k) {
    if (!graphs[k] || !names[k]) continue;
    CTX_ASSIGN_OR_RETURN(ReadGraph body,
                         readGraph(api, *graphs[k]).addContext(fmt::format("If node '{}' {}", n.name, names[k])));
    setOpsets(body.model.graph, model);
    n.attrs.set(ir::Attribute::makeGraph(names[k], std::make_shared<ir::Graph>(std::move(body.model.graph))));
  }
  return Status::ok();
}

}  // namespace

Expected<ReadGraph> readGraph(const Api& api, const OrtGraph& graph) {
  ReadGraph out;
  ir::Model& model = out.model;
  ir::Graph& g = model.graph;
  const char* name = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetName(&graph, &name));
  g.name = name ? name : "";
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetOnnxIRVersion(&graph, &model.irVersion));
  size_t count = 0;
  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetNumOperatorSets(&graph, &count));
  std::vector<const char*> domains(count);
  std::vector<int64_t> versions(count);
  if (count > 0)
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetOperatorSets(&graph, domains.data(), versions.data(), count));
  for (size_t i = 0; i < count; ++i) model.opsets.push_back({domains[i] ? domains[i] : "", versions[i]});

  auto readValues = [&](auto numFn, auto getFn, std::vector<ir::ValueInfo>& into) -> Status {
    size_t n = 0;
    CTX_ORT_RETURN_IF_ERROR(api, numFn(&graph, &n));
    std::vector<const OrtValueInfo*> values(n);
    if (n > 0) CTX_ORT_RETURN_IF_ERROR(api, getFn(&graph, values.data(), n));
    for (const OrtValueInfo* v : values) {
      CTX_ASSIGN_OR_RETURN(auto info, readValueInfo(api, *v));
      into.push_back(std::move(info));
    }
    return Status::ok();
  };
  CTX_RETURN_IF_ERROR(readValues(api.ort.Graph_GetNumInputs, api.ort.Graph_GetInputs, g.inputs));
  CTX_RETURN_IF_ERROR(readValues(api.ort.Graph_GetNumOutputs, api.ort.Graph_GetOutputs, g.outputs));

  CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetNumInitializers(&graph, &count));
  std::vector<const OrtValueInfo*> inits(count);
  if (count > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Graph_GetInitializers(&graph, inits.data(), count));
  for (const OrtValueInfo* v : inits) {
    CTX_ASSIGN_OR_RETURN(ir::ValueInfo info, readValueInfo(api, *v));
    const OrtValue* value = nullptr;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.ValueInfo_GetInitializerValue(v, &value));
    if (value == nullptr) continue;
    CTX_ASSIGN_OR_RETURN(ir::Tensor t, tensorView(api, *value, fmt::format("initializer '{}'", info.name)));
    g.initializers.push_back(ir::Initializer{info.name, std::move(t), std::nullopt});
  }

  CTX_ASSIGN_OR_RETURN(out.nodes, graphNodes(api, graph));
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    const OrtNode& node = *out.nodes[i];
    CTX_ASSIGN_OR_RETURN(ir::Node n, readNode(api, node));
    n.opset = model.opsetFor(n.domain);
    // Decoded here, once, for the model's opset: a bad attribute stays with the node, as onnx_io keeps it.
    ops::decodeNode(n);
    size_t subgraphs = 0;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumSubgraphs(&node, &subgraphs));
    out.implicitInputs.emplace_back();
    if (subgraphs > 0) {
      out.hasSubgraphs.push_back(i);
      size_t implicit = 0;
      CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumImplicitInputs(&node, &implicit));
      std::vector<const OrtValueInfo*> values(implicit);
      if (implicit > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetImplicitInputs(&node, values.data(), implicit));
      CTX_ASSIGN_OR_RETURN(out.implicitInputs.back(), valueNames(api, values));
      if (n.kind == ir::OpKind::If) CTX_RETURN_IF_ERROR(readBranches(api, node, model, n));
    }
    size_t outputs = 0;
    CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetNumOutputs(&node, &outputs));
    std::vector<const OrtValueInfo*> values(outputs);
    if (outputs > 0) CTX_ORT_RETURN_IF_ERROR(api, api.ort.Node_GetOutputs(&node, values.data(), outputs));
    for (const OrtValueInfo* v : values)
      if (v) {
        CTX_ASSIGN_OR_RETURN(auto info, readValueInfo(api, *v));
        if (info.type != ir::ElemType::Undefined) g.valueInfo.push_back(std::move(info));
      }
    g.nodes.push_back(std::move(n));
  }
  return out;
}

}  // namespace ctxkit::ort_ep
