// Decoding a node's attributes once, onto the node.
#include "ops/node_attrs.h"

#include "ir/op_info.h"

#include <atomic>

namespace ctxkit::ops {

namespace {

std::atomic<uint64_t> lateDecodeCount{0};

// A node listing more or fewer inputs or outputs than its kind has (ops.def's arity) is refused as a bad attribute
// is: the error stands in for its typed attributes.
std::shared_ptr<const ir::TypedAttrs> decode(const ir::Node& node) {
  if (std::optional<std::string> problem = ir::arityProblem(node.kind, node.inputs.size(), node.outputs.size()))
    return std::make_shared<const ir::TypedAttrs>(
        ir::TypedAttrs{node.kind, node.opset, makeError(ErrorCode::InvalidGraph, "{}", *problem)});
  return std::make_shared<const ir::TypedAttrs>(
      ir::TypedAttrs{node.kind, node.opset, decodeAttrs(node.kind, node.opset, node.attrs)});
}

}  // namespace

void decodeNode(ir::Node& node) { node.typed = decode(node); }

void decodeGraph(ir::Graph& graph) {
  for (ir::Node& node : graph.nodes) {
    for (ir::Attribute& a : node.attrs.all()) {
      if (a.g) decodeGraph(*a.g);
      for (const auto& sub : a.graphs)
        if (sub) decodeGraph(*sub);
    }
    decodeNode(node);
  }
}

bool isDecoded(const ir::Node& node) {
  return node.typed && node.typed->kind == node.kind && node.typed->opset == node.opset;
}

std::shared_ptr<const ir::TypedAttrs> attrsOf(const ir::Node& node) {
  if (isDecoded(node)) return node.typed;
  countLateDecode();
  return decode(node);
}

Expected<OpAttrs> decodeWith(const ir::Node& node, ir::Attribute replaced) {
  ir::Attributes attrs = node.attrs;
  attrs.set(std::move(replaced));
  return decodeAttrs(node.kind, node.opset, attrs);
}

uint64_t lateDecodes() { return lateDecodeCount.load(std::memory_order_relaxed); }

void countLateDecode() { lateDecodeCount.fetch_add(1, std::memory_order_relaxed); }

}  // namespace ctxkit::ops
