// Dropout in inference: the output is the input and the mask is all true.
#include "cpu/convert.h"
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

InferResult inferDropout(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 3));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 2));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  std::vector<OutputDesc> outs{{inputs[0].type, inputs[0].shape}};
  if (outputCount > 1) outs.push_back({ElemType::Bool, inputs[0].shape});
  return outs;
}

Status runDropout(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  bool training = inputs.size() > 2 && inputs[2] && inputs[2]->elementCount() == 1 && inputs[2]->dataAs<bool>()[0];
  if (training) {
    double ratio = 0.5;
    if (inputs.size() > 1 && inputs[1])
      CTX_RETURN_IF_ERROR(cpu::convertElements(inputs[1]->type(), inputs[1]->data(), ElemType::Double, &ratio, 1));
    if (ratio != 0)
      return unsupported(ctx, "training-mode Dropout with ratio {} is random and not supported (inference only)",
                         ratio);
  }
  if (x.byteSize()) std::memcpy(outputs[0]->mutableData(), x.data(), x.byteSize());
  if (outputs.size() > 1 && outputs[1]) {
    bool* m = outputs[1]->mutableDataAs<bool>();
    for (uint64_t i = 0; i < outputs[1]->elementCount(); ++i) m[i] = true;
  }
  return Status::ok();
}
}  // namespace ctxkit::kernels::detail
