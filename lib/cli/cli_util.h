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

// Splits "a.onnx,b.onnx" lists and plain arguments into one list of paths.
std::vector<std::string> splitModelList(const std::vector<std::string>& args);

// Usage errors exit 2, everything else 1.
int exitCodeFor(const Error& error);

}  // namespace ctxkit::cli
