// Writes the sample transformer block (tiny_prefill) with a symbolic sequence length, the model shape variants are
// compiled from: input x and output y become [1, seq, 64], and the Reshape targets into and out of the heads infer
// the sequence length (-1) instead of naming 16.
// usage: make_symbolic tiny_prefill.onnx OUT.onnx
#include "onnx_io/onnx_io.h"

#include <cstdio>

using namespace ctxkit;

namespace {

Status makeSymbolic(ir::Model& model) {
  ir::Graph& g = model.graph;
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    return makeError(ErrorCode::InvalidArgument, "expected the transformer block sample (one input, one output), got {} "
                     "inputs and {} outputs", g.inputs.size(), g.outputs.size());
  for (ir::ValueInfo* v : {&g.inputs[0], &g.outputs[0]}) {
    if (!v->shape || v->shape->size() != 3)
      return makeError(ErrorCode::InvalidArgument, "'{}' is {}, expected [1, seq, 64]", v->name, ir::dimsToString(v->shape));
    (*v->shape)[1] = ir::Dim::named("seq");
  }
  // Reshape targets [1, 16, ...]: the sequence length is their second entry.
  for (auto& init : g.initializers) {
    const ir::Tensor& t = init.tensor;
    if (t.type() != ir::ElemType::Int64 || t.shape().size() != 1 || t.elementCount() < 3) continue;
    std::vector<int64_t> dims(t.dataAs<int64_t>(), t.dataAs<int64_t>() + t.elementCount());
    if (dims[1] != 16) continue;
    dims[1] = -1;
    init.tensor = ir::Tensor::fromVector(ir::ElemType::Int64, t.shape(), dims);
  }
  g.valueInfo.clear();  // declared intermediate shapes would name the old length
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_symbolic tiny_prefill.onnx OUT.onnx\n");
    return 2;
  }
  auto model = onnx_io::loadModel(argv[1]);
  Status status = model ? makeSymbolic(*model) : model.takeError();
  if (status) status = onnx_io::saveModel(*model, argv[2]);
  if (!status) {
    std::fprintf(stderr, "make_symbolic: %s\n", status.error().message().c_str());
    return 1;
  }
  return 0;
}
