// Reads what ONNX Runtime hands the EP (OrtGraph, OrtNode, OrtValueInfo) into ctxkit's IR through ORT's graph API:
// no protobuf, no re-reading of the model file.
#pragma once

#include "ir/graph.h"
#include "ort_ep/ort_api.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace ctxkit::ort_ep {

// A view of an OrtValue tensor's bytes (valid while ORT keeps the value).
Expected<ir::Tensor> tensorView(const Api& api, const OrtValue& value, const std::string& what);
Expected<std::vector<const OrtNode*>> graphNodes(const Api& api, const OrtGraph& graph);
// The file ORT loaded the model from; empty when it came from memory.
Expected<std::filesystem::path> graphModelPath(const Api& api, const OrtGraph& graph);

// Op type and domain only: cheap enough to ask of every node in GetCapability.
struct NodeKind {
  std::string opType;
  std::string domain;
};
Expected<NodeKind> readNodeKind(const Api& api, const OrtNode& node);
// One attribute as a string, nullopt when the node has no such attribute (or it is not a string).
Expected<std::optional<std::string>> readStringAttribute(const Api& api, const OrtNode& node, const char* name);

// A node with its input and output names and its scalar, string and list attributes (tensor and graph attributes
// are not read: EPContext nodes have none).
Expected<ir::Node> readNode(const Api& api, const OrtNode& node);
// A whole graph as ORT sees it (after its own optimizations and free dimension overrides): inputs and outputs with
// types and shapes, initializers (views of ORT's buffers, valid while the OrtGraph is), nodes with their attributes
// (tensor attributes copied; an If's branches read too, so that the inline-if graph pass can take one; the bodies of
// Loop and Scan are not read) and the opsets.
struct ReadGraph {
  ir::Model model;
  std::vector<const OrtNode*> nodes;  // model.graph.nodes[i] came from nodes[i]
  std::vector<size_t> hasSubgraphs;   // nodes with If/Loop/Scan bodies
  // Per node, the values of this graph its bodies read (ORT's implicit inputs; empty for most nodes).
  std::vector<std::vector<std::string>> implicitInputs;
};
Expected<ReadGraph> readGraph(const Api& api, const OrtGraph& graph);
// Names of a node's inputs ("" for an omitted optional input) and outputs.
Expected<std::vector<std::string>> nodeInputNames(const Api& api, const OrtNode& node);
Expected<std::vector<std::string>> nodeOutputNames(const Api& api, const OrtNode& node);

}  // namespace ctxkit::ort_ep
