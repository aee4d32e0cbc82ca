// Typed attributes on graph nodes: decoded once where a graph enters ctxkit, read by every later stage.
#pragma once

#include "ir/graph.h"
#include "ops/op_schema.h"

#include <cstdint>
#include <memory>

namespace ctxkit::ir {

// What ops::decodeNode made of a node's ONNX attributes: the typed attributes for the kind and opset it decoded them
// for, or the decoder's error (a node with a bad attribute loads; the partitioner and the runtime report this error
// for it, as they would have had they decoded it themselves).
struct TypedAttrs {
  OpKind kind = OpKind::Unknown;
  int64_t opset = 0;
  Expected<ops::OpAttrs> attrs = ops::OpAttrs();
};

}  // namespace ctxkit::ir

namespace ctxkit::ops {

// Decodes node.attrs for node.kind and node.opset into node.typed (a fresh value: copies of the node made before
// keep theirs). Called where nodes enter ctxkit (onnx_io's loader, the plugin EP's graph reader) and by every pass
// that makes a node or changes its kind, opset or attributes.
void decodeNode(ir::Node& node);

// decodeNode for every node of `graph` and of the subgraphs its nodes hold.
void decodeGraph(ir::Graph& graph);

// The node's typed attributes (or its decoder error). A node without them, or whose kind or opset changed since
// they were decoded, is one nobody decoded (a node built by hand, as tests do): it is decoded now, for this caller
// only, and counted in lateDecodes(). Stages never decode a node themselves.
std::shared_ptr<const ir::TypedAttrs> attrsOf(const ir::Node& node);

// The node's attributes decoded with `replaced` in place of its attribute of that name: what an allowed value of a
// target constraint (auto_pad: ["VALID"]) means for this node, to compare with its typed field. Decodes target
// values, not the node: the node's own attributes are attrsOf's.
Expected<OpAttrs> decodeWith(const ir::Node& node, ir::Attribute replaced);

// True when `node.typed` is current: decoded for the node's kind and opset.
bool isDecoded(const ir::Node& node);

// How many times attributes were decoded after import: attrsOf on an undecoded node, and kernel contexts that
// came without typed attributes (kernels/op_entry.h). Tests hold the compile and run paths of loaded models to 0.
uint64_t lateDecodes();
void countLateDecode();

}  // namespace ctxkit::ops
