// Writes a float16 version of a float32 model for the ONNX Runtime oracle: every float32 initializer, Constant value
// and graph input/output/value_info becomes float16 (the way converters make half-precision models).
// usage: make_fp16 IN.onnx OUT.onnx
#include "cpu/convert.h"
#include "onnx_io/onnx_io.h"

#include <cstdio>

using namespace ctxkit;

namespace {

ir::Tensor toHalf(const ir::Tensor& t) {
  if (t.type() != ir::ElemType::Float) return t;
  auto half = ir::Tensor::allocate(ir::ElemType::Float16, t.shape()).value();
  for (uint64_t i = 0; i < t.elementCount(); ++i) half.mutableDataAs<uint16_t>()[i] = cpu::floatToHalf(t.dataAs<float>()[i]);
  return half;
}

void convertGraph(ir::Graph& g) {
  for (auto& init : g.initializers) init.tensor = toHalf(init.tensor);
  for (auto* list : {&g.inputs, &g.outputs, &g.valueInfo})
    for (auto& v : *list)
      if (v.type == ir::ElemType::Float) v.type = ir::ElemType::Float16;
  for (auto& n : g.nodes) {
    std::vector<ir::Attribute> attrs = n.attrs.all();
    for (auto& a : attrs) {
      if (a.type == ir::AttrType::Tensor) a.t = toHalf(a.t);
      if (a.type == ir::AttrType::Graph && a.g) convertGraph(*a.g);
      n.attrs.set(a);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_fp16 IN.onnx OUT.onnx\n");
    return 2;
  }
  auto model = onnx_io::loadModel(argv[1]);
  if (!model) {
    std::fprintf(stderr, "make_fp16: %s\n", model.error().message().c_str());
    return 1;
  }
  convertGraph(model->graph);
  if (auto s = onnx_io::saveModel(*model, argv[2]); !s) {
    std::fprintf(stderr, "make_fp16: %s\n", s.error().message().c_str());
    return 1;
  }
  return 0;
}
