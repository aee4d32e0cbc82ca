// Helpers for kernel unit tests: building tensors, evaluating one op, reading results back.
#pragma once

#include "kernels/kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace ctxkit::test {

using ir::ElemType;
using ir::OpKind;

inline ir::Tensor floats(ir::Shape shape, std::vector<float> v) {
  return ir::Tensor::fromVector(ElemType::Float, std::move(shape), v);
}
inline ir::Tensor doubles(ir::Shape shape, std::vector<double> v) {
  return ir::Tensor::fromVector(ElemType::Double, std::move(shape), v);
}
inline ir::Tensor int64s(ir::Shape shape, std::vector<int64_t> v) {
  return ir::Tensor::fromVector(ElemType::Int64, std::move(shape), v);
}
inline ir::Tensor int32s(ir::Shape shape, std::vector<int32_t> v) {
  return ir::Tensor::fromVector(ElemType::Int32, std::move(shape), v);
}
template <typename T> ir::Tensor typed(ElemType type, ir::Shape shape, std::vector<T> v) {
  return ir::Tensor::fromVector(type, std::move(shape), v);
}

template <typename T> std::vector<T> values(const ir::Tensor& t) {
  const T* p = t.dataAs<T>();
  return std::vector<T>(p, p + t.elementCount());
}

// The raw bytes (packed 4-bit tensors hold two elements per byte).
inline std::vector<uint8_t> bytesOf(const ir::Tensor& t) {
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.byteSize());
}

// One node to evaluate: op kind, opset and attributes.
struct Op {
  OpKind kind;
  int64_t opset = 17;
  ir::Attributes attrs;
  std::string name = "n1";

  Op(OpKind k, int64_t o = 17) : kind(k), opset(o) {}
  Op& i(const std::string& n, int64_t v) {
    attrs.set(ir::Attribute::makeInt(n, v));
    return *this;
  }
  Op& f(const std::string& n, float v) {
    attrs.set(ir::Attribute::makeFloat(n, v));
    return *this;
  }
  Op& s(const std::string& n, std::string v) {
    attrs.set(ir::Attribute::makeString(n, std::move(v)));
    return *this;
  }
  Op& ints(const std::string& n, std::vector<int64_t> v) {
    attrs.set(ir::Attribute::makeInts(n, std::move(v)));
    return *this;
  }
  Op& fl(const std::string& n, std::vector<float> v) {
    attrs.set(ir::Attribute::makeFloats(n, std::move(v)));
    return *this;
  }

  kernels::OpContext ctx(kernels::ThreadPool* pool = nullptr) const {
    return kernels::OpContext{kind, opset, attrs, name, pool};
  }

  // Evaluates with the given inputs (nullptr = omitted optional input).
  Expected<std::vector<ir::Tensor>> eval(std::vector<const ir::Tensor*> inputs, size_t outputs = 1,
                                         kernels::ThreadPool* pool = nullptr) const {
    return kernels::evaluate(ctx(pool), inputs, outputs);
  }
  // Evaluates and requires success; returns output 0.
  ir::Tensor run1(std::vector<const ir::Tensor*> inputs, kernels::ThreadPool* pool = nullptr) const {
    auto r = eval(std::move(inputs), 1, pool);
    if (!r) FAIL("evaluate failed: " << r.error().message());
    return std::move(r.value()[0]);
  }
  // Evaluates and requires failure; returns the error.
  Error fails(std::vector<const ir::Tensor*> inputs, size_t outputs = 1) const {
    auto r = eval(std::move(inputs), outputs);
    if (r) FAIL("evaluate succeeded but an error was expected");
    return r.error();
  }
};

inline void requireClose(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    if (std::isnan(want[i]))
      REQUIRE(std::isnan(got[i]));
    else
      REQUIRE(std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i])));
  }
}

}  // namespace ctxkit::test
