// ir::Model -> ModelProto and the public writers: embedded or external weights, always written atomically.
#include "onnx_io/onnx_io.h"
#include "onnx_io/proto_convert.h"

#include "support/checked.h"

#include <climits>

namespace ctxkit::onnx_io {

namespace fs = std::filesystem;

namespace detail {

Status tensorToProto(const ir::Tensor& t, const std::string& name, onnx::TensorProto* p) {
  if (t.empty()) return makeError(ErrorCode::InvalidArgument, "tensor has no element type");
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.type()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (t.type() == ir::ElemType::String) {
    if (t.stringValues().size() != t.elementCount())
      return makeError(ErrorCode::InvalidArgument, "string tensor of shape {} has {} values; expected {}",
                       ir::shapeToString(t.shape()), t.stringValues().size(), t.elementCount());
    for (const auto& s : t.stringValues()) p->add_string_data(s);
  } else {
    p->set_raw_data(reinterpret_cast<const char*>(t.data()), t.byteSize());
  }
  return Status::ok();
}

namespace {

Status externalToProto(const ir::Initializer& init, onnx::TensorProto* p) {
  const ir::Tensor& t = init.tensor;
  const ir::ExternalLocation& ext = *init.external;
  if (t.empty()) return makeError(ErrorCode::InvalidArgument, "tensor has no element type");
  if (t.type() == ir::ElemType::String)
    return makeError(ErrorCode::InvalidArgument, "string tensors cannot use external data");
  // Our outputs must never point outside their folder (docs/bad-input.md#paths), so the writer checks what the loader
  // checks.
  auto where = resolveInside(".", ext.location);
  if (!where) return where.takeError().addContext("external data location");
  auto needed = ir::storageBytes(t.type(), t.elementCount());
  if (!needed || *needed != ext.length)
    return makeError(ErrorCode::InvalidArgument,
                     "external data length is {} bytes; expected {} for a {} tensor of shape {}", ext.length,
                     needed ? std::to_string(*needed) : "?", ir::elemTypeName(t.type()), ir::shapeToString(t.shape()));
  p->set_name(init.name);
  p->set_data_type(static_cast<int32_t>(t.type()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto add = [&](const char* key, std::string value) {
    auto* entry = p->add_external_data();
    entry->set_key(key);
    entry->set_value(std::move(value));
  };
  add("location", ext.location);
  add("offset", std::to_string(ext.offset));
  add("length", std::to_string(ext.length));
  return Status::ok();
}

void valueInfoToProto(const ir::ValueInfo& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  if (!v.docString.empty()) p->set_doc_string(v.docString);
  // Types the ir cannot hold (sequences, maps) were loaded as undefined with no shape: leave them untyped.
  if (v.type == ir::ElemType::Undefined && !v.shape) return;
  auto* tt = p->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(v.type));
  if (!v.shape) return;
  auto* shape = tt->mutable_shape();
  for (const ir::Dim& d : *v.shape) {
    auto* dp = shape->add_dim();
    if (d.isKnown()) dp->set_dim_value(d.value);
    else if (!d.symbol.empty()) dp->set_dim_param(d.symbol);
  }
}

Status graphToProto(const ir::Graph& g, onnx::GraphProto* p, int depth);

Status subgraphToProto(const std::shared_ptr<ir::Graph>& g, onnx::GraphProto* p, int depth) {
  if (!g) return makeError(ErrorCode::InvalidArgument, "graph attribute has no graph");
  return graphToProto(*g, p, depth + 1);
}

Status attributeToProto(const ir::Attribute& a, onnx::AttributeProto* p, int depth) {
  p->set_name(a.name);
  p->set_type(static_cast<onnx::AttributeProto::AttributeType>(a.type));  // same numbers as ONNX
  switch (a.type) {
    case ir::AttrType::Float: p->set_f(a.f); break;
    case ir::AttrType::Int: p->set_i(a.i); break;
    case ir::AttrType::String: p->set_s(a.s); break;
    case ir::AttrType::Tensor: return tensorToProto(a.t, std::string(), p->mutable_t());
    case ir::AttrType::Graph: return subgraphToProto(a.g, p->mutable_g(), depth);
    case ir::AttrType::Floats:
      for (float v : a.floats) p->add_floats(v);
      break;
    case ir::AttrType::Ints:
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case ir::AttrType::Strings:
      for (const auto& v : a.strings) p->add_strings(v);
      break;
    case ir::AttrType::Tensors:
      for (size_t i = 0; i < a.tensors.size(); ++i) {
        Status s = tensorToProto(a.tensors[i], std::string(), p->add_tensors());
        if (!s) return s.addContext(fmt::format("tensor {}", i));
      }
      break;
    case ir::AttrType::Graphs:
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        Status s = subgraphToProto(a.graphs[i], p->add_graphs(), depth);
        if (!s) return s.addContext(fmt::format("graph {}", i));
      }
      break;
    default: return makeError(ErrorCode::InvalidArgument, "attribute type {} is not valid", static_cast<int>(a.type));
  }
  return Status::ok();
}

Status nodeToProto(const ir::Node& n, onnx::NodeProto* p, int depth) {
  if (!n.name.empty()) p->set_name(n.name);
  // Nodes built by passes may carry only their kind; the op type string is derived from it then.
  bool fromKind = n.opType.empty() && n.kind != ir::OpKind::Unknown;
  p->set_op_type(fromKind ? std::string(ir::opKindName(n.kind)) : n.opType);
  std::string domain = fromKind ? std::string(ir::opKindDomain(n.kind)) : n.domain;
  if (!domain.empty()) p->set_domain(domain);
  if (p->op_type().empty()) return makeError(ErrorCode::InvalidArgument, "node has no op type");
  for (const auto& in : n.inputs) p->add_input(in);
  for (const auto& out : n.outputs) p->add_output(out);
  for (const auto& a : n.attrs.all()) {
    Status s = attributeToProto(a, p->add_attribute(), depth);
    if (!s) return s.addContext(fmt::format("attribute '{}'", a.name));
  }
  if (!n.docString.empty()) p->set_doc_string(n.docString);
  return Status::ok();
}

Status graphToProto(const ir::Graph& g, onnx::GraphProto* p, int depth) {
  if (depth > kMaxGraphDepth)
    return makeError(ErrorCode::InvalidArgument, "subgraphs are nested more than {} levels deep", kMaxGraphDepth);
  p->set_name(g.name);
  if (!g.docString.empty()) p->set_doc_string(g.docString);
  for (const auto& init : g.initializers) {
    Status s = init.external ? externalToProto(init, p->add_initializer())
                             : tensorToProto(init.tensor, init.name, p->add_initializer());
    if (!s) return s.addContext(fmt::format("initializer '{}'", init.name));
  }
  for (const auto& v : g.inputs) valueInfoToProto(v, p->add_input());
  for (const auto& v : g.outputs) valueInfoToProto(v, p->add_output());
  for (const auto& v : g.valueInfo) valueInfoToProto(v, p->add_value_info());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    Status s = nodeToProto(n, p->add_node(), depth);
    if (!s)
      return s.addContext(n.name.empty() ? fmt::format("node #{} ({})", i, n.opType)
                                         : fmt::format("node '{}' ({})", n.name, n.opType));
  }
  return Status::ok();
}

Status modelToProto(const ir::Model& m, onnx::ModelProto* p) {
  if (m.irVersion != 0) p->set_ir_version(m.irVersion);
  for (const auto& op : m.opsets) {
    auto* o = p->add_opset_import();
    o->set_domain(op.domain);
    o->set_version(op.version);
  }
  if (!m.producerName.empty()) p->set_producer_name(m.producerName);
  if (!m.producerVersion.empty()) p->set_producer_version(m.producerVersion);
  if (!m.domain.empty()) p->set_domain(m.domain);
  if (m.modelVersion != 0) p->set_model_version(m.modelVersion);
  if (!m.docString.empty()) p->set_doc_string(m.docString);
  for (const auto& [key, value] : m.metadata) {
    auto* kv = p->add_metadata_props();
    kv->set_key(key);
    kv->set_value(value);
  }
  return graphToProto(m.graph, p->mutable_graph(), 0);
}

Expected<std::string> serializeMessage(const google::protobuf::MessageLite& message, std::string_view what) {
  size_t size = message.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX))
    return makeError(ErrorCode::Unsupported,
                     "serialized {} would be {} bytes; protobuf's limit is {} (2 GiB): store weights as external data",
                     what, size, INT_MAX);
  std::string out;
  if (!message.SerializeToString(&out))
    return makeError(ErrorCode::Internal, "protobuf failed to serialize the {}", what);
  return out;
}

Expected<std::string> serializeModelImpl(const ir::Model& model) {
  onnx::ModelProto proto;
  CTX_RETURN_IF_ERROR(modelToProto(model, &proto));
  return serializeMessage(proto, "model");
}

// Every initializer of `g` and its subgraphs, in graph order then node order (deterministic).
void collectInitializers(ir::Graph& g, std::vector<ir::Initializer*>& out) {
  for (auto& init : g.initializers) out.push_back(&init);
  for (auto& n : g.nodes)
    for (auto& a : n.attrs.all()) {
      if (a.g) collectInitializers(*a.g, out);
      for (auto& sub : a.graphs)
        if (sub) collectInitializers(*sub, out);
    }
}

constexpr uint64_t kExternalAlignment = 64;

}  // namespace
}  // namespace detail

Expected<std::string> serializeModel(const ir::Model& model) {
  return detail::guarded("serializing model", [&]() { return detail::serializeModelImpl(model); });
}

Status saveModel(const ir::Model& model, const fs::path& path) {
  return detail::guarded(fmt::format("saving '{}'", path.string()), [&]() -> Status {
    CTX_ASSIGN_OR_RETURN(std::string bytes, detail::serializeModelImpl(model));
    return writeFileAtomically(path, bytes);
  });
}

Status saveModelWithExternalData(ir::Model model, const fs::path& path, const std::string& externalFileName,
                                 size_t thresholdBytes) {
  CTX_ASSIGN_OR_RETURN(auto files,
                       stageModelWithExternalData(std::move(model), path, externalFileName, thresholdBytes));
  for (auto& file : files) CTX_RETURN_IF_ERROR(file->commit());
  return Status::ok();
}

Expected<std::vector<std::unique_ptr<AtomicFileWriter>>> stageModelWithExternalData(ir::Model model,
                                                                                    const fs::path& path,
                                                                                    const std::string& externalFileName,
                                                                                    size_t thresholdBytes) {
  using Files = std::vector<std::unique_ptr<AtomicFileWriter>>;
  return detail::guarded(fmt::format("saving '{}'", path.string()), [&]() -> Expected<Files> {
    fs::path folder = detail::folderOf(path);
    auto dataPath = resolveInside(folder, externalFileName);
    if (!dataPath) return dataPath.takeError().addContext("external data file");
    if (*dataPath == (folder / path.filename()).lexically_normal())
      return makeError(ErrorCode::InvalidArgument, "external data file '{}' is the model file itself",
                       externalFileName);

    std::vector<ir::Initializer*> all;
    detail::collectInitializers(model.graph, all);
    std::vector<ir::Initializer*> moving;
    for (ir::Initializer* init : all) {
      if (init->external) {
        auto other = resolveInside(folder, init->external->location);
        if (other && *other == *dataPath)
          return makeError(ErrorCode::InvalidArgument,
                           "initializer '{}' already references '{}', the external data file being written", init->name,
                           externalFileName);
        continue;
      }
      const ir::Tensor& t = init->tensor;
      if (!t.empty() && t.type() != ir::ElemType::String && t.byteSize() > 0 && t.byteSize() >= thresholdBytes)
        moving.push_back(init);
    }

    // Both files go to temporary names first; the data file is committed before the model that refers to it.
    std::unique_ptr<AtomicFileWriter> data;
    if (!moving.empty()) {
      CTX_ASSIGN_OR_RETURN(data, AtomicFileWriter::create(*dataPath));
      for (ir::Initializer* init : moving) {
        uint64_t offset = alignUp(data->bytesWritten(), detail::kExternalAlignment);
        CTX_RETURN_IF_ERROR(data->writeZeros(offset - data->bytesWritten()));
        CTX_RETURN_IF_ERROR(data->write(init->tensor.bytes()));
        init->external = ir::ExternalLocation{externalFileName, offset, init->tensor.byteSize()};
      }
    }
    CTX_ASSIGN_OR_RETURN(std::string bytes, detail::serializeModelImpl(model));
    CTX_ASSIGN_OR_RETURN(auto modelWriter, AtomicFileWriter::create(path));
    CTX_RETURN_IF_ERROR(modelWriter->write(bytes));
    CTX_RETURN_IF_ERROR(modelWriter->finish());
    Files files;
    if (data) {
      CTX_RETURN_IF_ERROR(data->finish());
      files.push_back(std::move(data));
    }
    files.push_back(std::move(modelWriter));
    return files;
  });
}

Expected<std::string> serializeTensor(const ir::Tensor& tensor, const std::string& name) {
  return detail::guarded(fmt::format("serializing tensor '{}'", name), [&]() -> Expected<std::string> {
    onnx::TensorProto proto;
    CTX_RETURN_IF_ERROR(detail::tensorToProto(tensor, name, &proto));
    return detail::serializeMessage(proto, "tensor");
  });
}

}  // namespace ctxkit::onnx_io
