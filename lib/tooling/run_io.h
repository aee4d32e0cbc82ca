// Feeding and checking sessions: input folders (ONNX test-data layout), seeded random inputs, output files,
// and tolerance comparison against expected outputs.
#pragma once

#include "ir/graph.h"
#include "support/output_guard.h"
#include "support/status.h"

#include <filesystem>
#include <string>
#include <vector>

namespace ctxkit::tooling {

// `input_<i>.pb`, `input_<i>.npy` or `<name>.npy` for each feed input, in graph order. Each file read is added to
// `read` when given, so that a caller can keep its outputs off them (checkRunFiles).
Expected<std::vector<ir::Tensor>> loadInputFolder(const std::filesystem::path& dir,
                                                  const std::vector<ir::ValueInfo>& inputs,
                                                  std::vector<RunFile>* read = nullptr);

// Floats uniform in [-1, 1), integers small and non-negative; shapes from declarations and bindings.
Expected<std::vector<ir::Tensor>> randomInputs(const std::vector<ir::ValueInfo>& inputs,
                                               const ir::ShapeBindings& bindings, uint64_t seed);

// `NAME=V[,V...]` (cli::parseValueAssignment): feed input NAME holds these values (one fills every element). An
// unknown name, a value that is not a number or that its type does not hold, or a wrong count is an InvalidArgument
// error naming the inputs.
Status setInputValue(std::vector<ir::Tensor>& feeds, const std::vector<ir::ValueInfo>& inputs,
                     const std::string& assignment);

// `output_<i>.pb` or `output_<i>.npy` for i in [0, count); each file read is added to `read` when given.
Expected<std::vector<ir::Tensor>> loadExpectedFolder(const std::filesystem::path& dir, size_t count,
                                                     std::vector<RunFile>* read = nullptr);

// The files saveTensors (`alsoPb` false) or saveOutputs writes for `count` tensors, before they are written.
std::vector<RunFile> savedFiles(const std::filesystem::path& dir, const std::string& prefix, size_t count, bool alsoPb);

// `<prefix>_<i>.npy` for each tensor.
Status saveTensors(const std::filesystem::path& dir, const std::string& prefix, const std::vector<ir::Tensor>& tensors);

Status saveOutputs(const std::filesystem::path& dir, const std::vector<ir::Tensor>& outputs,
                   const std::vector<ir::ValueInfo>& infos, bool alsoPb);

struct Comparison {
  bool match = true;
  std::string message;  // on mismatch: shape/type difference or the worst element
  double maxAbsError = 0;
  uint64_t mismatches = 0;
};

// |actual - expected| <= atol + rtol * |expected| per element; NaN matches NaN, infinities must be equal.
Comparison compareTensors(const ir::Tensor& actual, const ir::Tensor& expected, double rtol, double atol);

}  // namespace ctxkit::tooling
