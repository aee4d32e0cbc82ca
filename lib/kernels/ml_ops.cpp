// ai.onnx.ml ops on plain tensors: Binarizer (1 where X exceeds the threshold, else 0, in X's type) and
// ArrayFeatureExtractor (the elements of X's last axis at the given indices).
#include "kernels/ops.h"

#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

constexpr TypeSet kBinarizerTypes =
    typeBit(ElemType::Float) | typeBit(ElemType::Double) | typeBit(ElemType::Int32) | typeBit(ElemType::Int64);

}  // namespace

InferResult inferBinarizer(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kBinarizerTypes));
  return single(inputs[0].type, inputs[0].shape);
}

Status runBinarizer(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const double threshold = attrsOf<ops::BinarizerAttrs>(ctx).threshold;
  return visitType<kBinarizerTypes>(inputs[0]->type(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* x = inputs[0]->dataAs<T>();
    T* y = outputs[0]->mutableDataAs<T>();
    for (size_t i = 0; i < inputs[0]->elementCount(); ++i) y[i] = static_cast<double>(x[i]) > threshold ? T(1) : T(0);
    return Status::ok();
  });
}

// ArrayFeatureExtractor (X, Y): X [..., n] and indices Y (all of them, flattened) -> [..., len(Y)]; a 1-D X gives
// [1, len(Y)].
InferResult inferArrayFeatureExtractor(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 2, 2));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 1, typeBit(ElemType::Int64)));
  const ir::Shape& x = inputs[0].shape;
  if (x.empty()) return invalid(ctx, "input 0 is a scalar but expected rank 1 or more");
  ir::Shape out = x.size() == 1 ? ir::Shape{1} : ir::Shape(x.begin(), x.end() - 1);
  out.push_back(dimProduct(inputs[1].shape));
  return single(inputs[0].type, std::move(out));
}

Status runArrayFeatureExtractor(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  const ir::Tensor &x = *inputs[0], &indices = *inputs[1];
  const size_t element = ir::elemSize(x.type());
  if (element == 0) return unsupported(ctx, "input of type {} is not supported", ir::elemTypeName(x.type()));
  const int64_t n = x.shape().back(), rows = dimProduct(x.shape(), 0, x.rank() - 1);
  const auto count = static_cast<int64_t>(indices.elementCount());
  const int64_t* idx = indices.dataAs<int64_t>();
  for (int64_t k = 0; k < count; ++k)
    if (idx[k] < 0 || idx[k] >= n) return invalid(ctx, "input 1 holds index {} outside [0, {})", idx[k], n);
  std::byte* y = outputs[0]->mutableData();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(y + static_cast<size_t>(r * count + k) * element,
                  x.data() + static_cast<size_t>(r * n + idx[k]) * element, element);
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
