// The in-memory model: graphs of nodes over named values, free of protobuf types.
#pragma once

#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ctxkit::ir {

// One dimension of a declared shape: a value, a named symbol (dim_param), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // dim_param, when the file names one

  bool isKnown() const { return value >= 0; }
  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s)}; }
  friend bool operator==(const Dim&, const Dim&) = default;
};

struct ValueInfo {
  std::string name;
  ElemType type = ElemType::Undefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
  std::string docString;

  // The concrete shape when every dimension is known.
  std::optional<Shape> staticShape() const;
};

std::string dimsToString(const std::optional<std::vector<Dim>>& shape);  // "1x?xseq", "?" for unknown rank

// Where an initializer's bytes live in an external file (ONNX external data).
struct ExternalLocation {
  std::string location;  // relative to the model's folder
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct Initializer {
  std::string name;
  Tensor tensor;
  // When set, writers reference these bytes in that file instead of embedding them. Loaders leave it
  // empty: they resolve external data into `tensor` (mapped, not copied).
  std::optional<ExternalLocation> external;
};

// A node's attributes decoded for its kind and opset. Defined by ctxkit_ops (ops/node_attrs.h), which sits above ir:
// ir only carries it.
struct TypedAttrs;

struct Node {
  std::string name;
  std::string opType;
  std::string domain;  // "" is the default ONNX domain
  OpKind kind = OpKind::Unknown;
  int64_t opset = 0;                // the model's opset for `domain`, resolved at load
  std::vector<std::string> inputs;  // "" marks an omitted optional input
  std::vector<std::string> outputs;
  // The ONNX attributes as the file spelled them: what writers copy out, and all there is for unknown ops, control
  // flow and EPContext nodes.
  Attributes attrs;
  // `attrs` decoded once where the graph entered ctxkit (ops::decodeNode, called by the ONNX loader and the plugin
  // EP's graph reader, and by every pass that makes or changes a node): the typed attributes or the decoder's error.
  // Copies of a node share it; stages read it through ops::attrsOf.
  std::shared_ptr<const TypedAttrs> typed;
  std::string docString;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> valueInfo;
  std::vector<Initializer> initializers;
  std::string docString;

  const Initializer* findInitializer(std::string_view name) const;
  const ValueInfo* findValueInfo(std::string_view name) const;  // inputs, outputs, then value_info
  bool isInitializer(std::string_view name) const { return findInitializer(name) != nullptr; }
  // Graph inputs that are not initializers, in graph order (the runtime's feed list).
  std::vector<const ValueInfo*> feedInputs() const;
};

// User bindings for dynamic shapes: `--dim SYM=V` and `--shape INPUT=AxB` (compiler and runtime alike).
struct ShapeBindings {
  std::map<std::string, int64_t> dims;
  std::map<std::string, Shape> shapes;
};

// Every value `node` reads: its inputs and, recursively, what its subgraphs read by name (outer-scope values
// included; names a subgraph defines itself are included too, which is harmless for dependency tracking).
void collectNodeReads(const Node& node, std::set<std::string>& names);

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
};

struct Model {
  int64_t irVersion = 0;
  std::vector<OpsetImport> opsets;
  std::string producerName;
  std::string producerVersion;
  std::string domain;
  int64_t modelVersion = 0;
  std::string docString;
  std::vector<std::pair<std::string, std::string>> metadata;  // file order
  Graph graph;
  // Files the loader read external data from (resolved paths), so that writers can refuse to overwrite them.
  std::vector<std::string> externalDataFiles;

  int64_t opsetFor(std::string_view domain) const;  // 0 when not imported
  void setMetadata(const std::string& key, const std::string& value);
  const std::string* findMetadata(std::string_view key) const;
};

}  // namespace ctxkit::ir
