// Typed node attributes, as ONNX defines them, with lookups that supply defaults.
#pragma once

#include "ir/tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::ir {

struct Graph;

enum class AttrType : uint8_t {
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10
};

std::string_view attrTypeName(AttrType type);

struct Attribute {
  std::string name;
  AttrType type = AttrType::Int;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;

  static Attribute makeInt(std::string name, int64_t v);
  static Attribute makeFloat(std::string name, float v);
  static Attribute makeString(std::string name, std::string v);
  static Attribute makeInts(std::string name, std::vector<int64_t> v);
  static Attribute makeFloats(std::string name, std::vector<float> v);
  static Attribute makeTensor(std::string name, Tensor v);
  static Attribute makeGraph(std::string name, std::shared_ptr<Graph> v);
};

// A node's attributes in file order. Few per node, so lookups scan.
class Attributes {
public:
  const Attribute* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  void set(Attribute attr);  // replaces an attribute of the same name
  bool remove(std::string_view name);

  int64_t getInt(std::string_view name, int64_t fallback) const;
  float getFloat(std::string_view name, float fallback) const;
  std::string getString(std::string_view name, std::string fallback = {}) const;
  std::vector<int64_t> getInts(std::string_view name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> getFloats(std::string_view name, std::vector<float> fallback = {}) const;

  const std::vector<Attribute>& all() const { return attrs_; }
  std::vector<Attribute>& all() { return attrs_; }
  size_t size() const { return attrs_.size(); }

private:
  std::vector<Attribute> attrs_;
};

}  // namespace ctxkit::ir
