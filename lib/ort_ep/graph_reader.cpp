// OrtGraph / OrtNode -> ir::Node, through ORT's graph API.
#include "ort_ep/graph_reader.h"

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

template <typename T>
Expected<std::vector<T>> readList(const Api& api, const OrtOpAttr& attr, OrtOpAttrType type) {
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
    default:
      return std::optional<ir::Attribute>();  // strings, tensors, graphs: not needed by EPContext nodes
  }
}

}  // namespace

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
