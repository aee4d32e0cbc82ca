// Accelerator target descriptions: which ops, types and shapes a (simulated) target compiles.
#pragma once

#include "cpu/weight_layout.h"
#include "epcontext/contract.h"
#include "ir/elem_type.h"
#include "support/status.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::partitioner {

struct AttrConstraint {
  std::string name;
  std::vector<std::string> allowedStrings;  // for string attributes (auto_pad)
  std::vector<int64_t> allowedInts;         // every element of an int/ints attribute must be one of these
};

struct OpSupport {
  std::string domain;  // "" for the default ONNX domain
  std::string opType;
  int64_t minOpset = 1;
  int64_t maxOpset = 1000;
  std::vector<ir::ElemType> types;  // empty: the target's default types
  std::optional<int64_t> maxRank;   // overrides the target's
  std::vector<AttrConstraint> attrs;
};

// How a target computes float16 values ("float16_compute" in a target file, docs/target-json.md).
enum class Float16Compute : uint8_t {
  // Every op's float16 result is rounded to float16, as ONNX defines it (the default; npu-sim).
  Float16,
  // Float16 values are computed and kept as float32 between ops, as ONNX Runtime's CPU EP computes them: rounded to
  // float16 only by an explicit Cast (or CastLike) to float16 and where a value leaves a partition (the cpu target;
  // the widen-float16 lowering pass).
  Float32,
};
// "float16" or "float32": the name a target file gives it.
std::string_view float16ComputeName(Float16Compute compute);

struct Target {
  std::string name;  // what --target named
  std::string ep = epcontext::kEpName;
  std::string hardwareArchitecture;  // written to hardware_architecture and the compatibility block
  std::string revision = epcontext::kDefaultRevision;
  bool staticShapesOnly = true;
  // Values whose shapes depend on values (behind NonZero, NonMaxSuppression, TopK with a computed k) compile when the
  // analysis bounds them: planned at the bound, run at the extent each run computes
  // (docs/compiler.md#bounded-programs).
  bool boundedShapes = false;
  int64_t maxRank = 8;
  int64_t minPartitionSize = 1;
  uint64_t weightAlignment = 64;
  std::vector<ir::ElemType> defaultTypes;
  // The cpu target takes every op the runtime has a kernel for, with the kernel's types.
  bool allKernelOps = false;
  std::vector<OpSupport> ops;
  std::map<std::string, std::string> preferredLayouts;
  // preferred_layouts.gemm: how constant B operands of MatMul/Gemm are stored (the choose-layouts pass).
  cpu::WeightLayout gemmLayout;
  Float16Compute float16Compute = Float16Compute::Float16;

  const OpSupport* findOp(std::string_view domain, std::string_view opType, int64_t opset) const;
};

std::vector<std::string> builtinTargetNames();
// The JSON text of a built-in target, for `ctxgen --print-target` and docs.
std::optional<std::string> builtinTargetJson(std::string_view name);

// How many op kinds the target compiles: its op entries, or for "all-kernels" every op with a kernel.
size_t supportedOpCount(const Target& target);
// `ctxgen --list-targets`: one line per built-in target (name, id/revision, op count).
std::string listBuiltinTargets();

// `nameOrPath` is a built-in name (epcontext::knownTargets()) or a JSON file. Errors name the file and the field.
Expected<Target> loadTarget(const std::string& nameOrPath);
Expected<Target> parseTarget(const std::string& jsonText, const std::string& displayName);

}  // namespace ctxkit::partitioner
