// Parsing helpers shared by the command-line tools: shape bindings and exit codes.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace ctxkit::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// "SYM=V" into bindings.dims; "INPUT=AxBxC" into bindings.shapes. Errors quote the argument.
Status parseDimBinding(const std::string& text, ir::ShapeBindings& bindings);
Status parseShapeBinding(const std::string& text, ir::ShapeBindings& bindings);

// "NAME=V[,V...]", the value of --set (ctxgen binds an input at compile time, ctxrun feeds it): one number for every
// element, or one per element. Errors quote the argument.
struct ValueAssignment {
  std::string name;
  std::vector<double> values;
};
Expected<ValueAssignment> parseValueAssignment(const std::string& text);

// A tensor of `type` and `shape` holding `values`: one value fills every element, else there is one per element.
// Another count, a value the type does not hold exactly (a fraction or an out-of-range number for an integer type, not
// 0 or 1 for bool) and a type --set does not fill are InvalidArgument errors beginning with `what`.
Expected<ir::Tensor> valueTensor(ir::ElemType type, const ir::Shape& shape, const std::vector<double>& values,
                                 const std::string& what);

// Splits "a.onnx,b.onnx" lists and plain arguments into one list of paths.
std::vector<std::string> splitModelList(const std::vector<std::string>& args);

// Usage errors exit 2, everything else 1.
int exitCodeFor(const Error& error);

// A byte count as --memory-limit takes it: digits with an optional K, M, G or T (binary multiples), e.g. 512M, 32G.
Expected<uint64_t> parseByteCount(const std::string& text);

}  // namespace ctxkit::cli
