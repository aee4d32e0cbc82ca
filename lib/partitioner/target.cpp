// Parsing target JSON files.
#include "partitioner/target.h"

#include "ir/op_kind.h"
#include "ops/typed_attrs.h"
#include "support/file_io.h"

#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <initializer_list>

namespace ctxkit::partitioner {

namespace {

using Json = nlohmann::json;

// Errors name the file and the JSON path of the offending value: "target 'my.json': ops[3].opsets: ...".
Status bad(const std::string& file, const std::string& path, const std::string& what) {
  return makeError(ErrorCode::InvalidArgument, "target '{}': {}: {}", file, path, what);
}

// The keys docs/target-json.md and docs/target.schema.json document; anything else is a typo, not a silent no-op.
Status checkKeys(const Json& j, std::initializer_list<std::string_view> known, const std::string& file,
                 const std::string& path) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(known.begin(), known.end(), it.key()) == known.end())
      return bad(file, path.empty() ? it.key() : path + "." + it.key(),
                 fmt::format("unknown key; expected one of: {}", fmt::join(known, ", ")));
  return Status::ok();
}

Expected<std::vector<ir::ElemType>> parseTypes(const Json& j, const std::string& file, const std::string& path) {
  if (!j.is_array()) return bad(file, path, "expected an array of element type names");
  std::vector<ir::ElemType> types;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", path, i);
    if (!j[i].is_string()) return bad(file, at, "expected an element type name");
    auto t = ir::elemTypeFromName(j[i].get<std::string>());
    if (!t) return bad(file, at, fmt::format("unknown element type '{}'", j[i].get<std::string>()));
    types.push_back(*t);
  }
  return types;
}

Expected<OpSupport> parseOp(const Json& j, const std::string& file, const std::string& path) {
  if (!j.is_object()) return bad(file, path, "expected an object with a string \"op\"");
  CTX_RETURN_IF_ERROR(checkKeys(j, {"op", "domain", "opsets", "types", "constraints"}, file, path));
  if (!j.contains("op") || !j["op"].is_string()) return bad(file, path + ".op", "expected a string (the ONNX op type)");
  OpSupport op;
  op.opType = j["op"].get<std::string>();
  if (j.contains("domain")) {
    if (!j["domain"].is_string()) return bad(file, path + ".domain", "expected a string");
    op.domain = j["domain"].get<std::string>();
    if (op.domain == "ai.onnx") op.domain.clear();
  }
  if (ir::opKindFromName(op.domain, op.opType) == ir::OpKind::Unknown)
    return bad(file, path + ".op",
               fmt::format("'{}'{} is not an ONNX op ctxkit knows", op.opType,
                           op.domain.empty() ? std::string() : fmt::format(" in domain '{}'", op.domain)));
  if (j.contains("opsets")) {
    const Json& r = j["opsets"];
    const std::string at = path + ".opsets";
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer())
      return bad(file, at, "expected [min, max], two integers");
    op.minOpset = r[0].get<int64_t>();
    op.maxOpset = r[1].get<int64_t>();
    if (op.minOpset < 1) return bad(file, at + "[0]", fmt::format("opset {} is below 1", op.minOpset));
    if (op.minOpset > op.maxOpset)
      return bad(file, at, fmt::format("min {} is greater than max {}", op.minOpset, op.maxOpset));
  }
  if (j.contains("types")) {
    CTX_ASSIGN_OR_RETURN(op.types, parseTypes(j["types"], file, path + ".types"));
  }
  if (j.contains("constraints")) {
    const Json& c = j["constraints"];
    if (!c.is_object()) return bad(file, path + ".constraints", "expected an object");
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string at = path + ".constraints." + it.key();
      if (it.key() == "max_rank") {
        if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad(file, at, "expected a non-negative integer");
        op.maxRank = it->get<int64_t>();
        continue;
      }
      AttrConstraint a;
      a.name = it.key();
      if (!it->is_array()) return bad(file, at, "expected an array of allowed attribute values");
      for (size_t i = 0; i < it->size(); ++i) {
        const Json& v = (*it)[i];
        if (v.is_string()) a.allowedStrings.push_back(v.get<std::string>());
        else if (v.is_number_integer()) a.allowedInts.push_back(v.get<int64_t>());
        else return bad(file, fmt::format("{}[{}]", at, i), "expected a string or an integer");
      }
      // Constraints are checked on the op's typed attributes (nodes carry them decoded): the name must be a field.
      const ops::OpAttrs fields = ops::defaultAttrsFor(ir::opKindFromName(op.domain, op.opType));
      if (!ops::fieldInts(fields, a.name).found) {
        const std::string list = ops::fieldsSchemaText(fields);
        return bad(file, at,
                   fmt::format("{} has no attribute '{}' to constrain; its attributes:{}", op.opType, a.name,
                               list.empty() ? std::string(" none") : list));
      }
      op.attrs.push_back(std::move(a));
    }
  }
  return op;
}

}  // namespace

std::string_view float16ComputeName(Float16Compute compute) {
  return compute == Float16Compute::Float32 ? "float32" : "float16";
}

const OpSupport* Target::findOp(std::string_view domain, std::string_view opType, int64_t opset) const {
  if (domain == "ai.onnx") domain = "";
  for (const auto& op : ops)
    if (op.opType == opType && op.domain == domain && opset >= op.minOpset && opset <= op.maxOpset) return &op;
  return nullptr;
}

Expected<Target> parseTarget(const std::string& jsonText, const std::string& displayName) {
  Json j = Json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return makeError(ErrorCode::InvalidArgument, "target '{}': not a JSON object", displayName);
  const std::string& file = displayName;
  CTX_RETURN_IF_ERROR(checkKeys(j,
                                {"name", "ep", "hardware_architecture", "revision", "static_shapes_only",
                                 "bounded_shapes", "max_rank", "min_partition_size", "weight_alignment",
                                 "element_types", "preferred_layouts", "float16_compute", "ops"},
                                file, ""));
  Target t;
  auto str = [&](const char* key, std::string& out) -> Status {
    if (!j.contains(key)) return Status::ok();
    if (!j[key].is_string()) return bad(file, key, "expected a string");
    out = j[key].get<std::string>();
    return Status::ok();
  };
  auto num = [&](const char* key, auto& out) -> Status {
    if (!j.contains(key)) return Status::ok();
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0)
      return bad(file, key, "expected a non-negative integer");
    out = static_cast<std::remove_reference_t<decltype(out)>>(j[key].get<int64_t>());
    return Status::ok();
  };
  CTX_RETURN_IF_ERROR(str("name", t.name));
  CTX_RETURN_IF_ERROR(str("ep", t.ep));
  CTX_RETURN_IF_ERROR(str("hardware_architecture", t.hardwareArchitecture));
  CTX_RETURN_IF_ERROR(str("revision", t.revision));
  CTX_RETURN_IF_ERROR(num("max_rank", t.maxRank));
  CTX_RETURN_IF_ERROR(num("min_partition_size", t.minPartitionSize));
  CTX_RETURN_IF_ERROR(num("weight_alignment", t.weightAlignment));
  if (t.name.empty()) return bad(file, "name", "required, a non-empty string");
  if (t.hardwareArchitecture.empty()) t.hardwareArchitecture = t.name;
  if (t.weightAlignment < 64 || t.weightAlignment > 65536 || (t.weightAlignment & (t.weightAlignment - 1)) != 0)
    return bad(file, "weight_alignment", fmt::format("{} is not a power of two from 64 to 65536", t.weightAlignment));
  if (j.contains("static_shapes_only")) {
    if (!j["static_shapes_only"].is_boolean()) return bad(file, "static_shapes_only", "expected true or false");
    t.staticShapesOnly = j["static_shapes_only"].get<bool>();
  }
  if (j.contains("bounded_shapes")) {
    if (!j["bounded_shapes"].is_boolean()) return bad(file, "bounded_shapes", "expected true or false");
    t.boundedShapes = j["bounded_shapes"].get<bool>();
  }
  if (j.contains("float16_compute")) {
    const Json& c = j["float16_compute"];
    const std::string name = c.is_string() ? c.get<std::string>() : std::string();
    if (name == "float16") t.float16Compute = Float16Compute::Float16;
    else if (name == "float32") t.float16Compute = Float16Compute::Float32;
    else if (c.is_string()) return bad(file, "float16_compute", fmt::format("'{}'; expected float16 or float32", name));
    else return bad(file, "float16_compute", "expected a string: float16 or float32");
  }
  if (j.contains("element_types")) {
    CTX_ASSIGN_OR_RETURN(t.defaultTypes, parseTypes(j["element_types"], file, "element_types"));
  }
  if (j.contains("preferred_layouts")) {
    const Json& layouts = j["preferred_layouts"];
    if (!layouts.is_object()) return bad(file, "preferred_layouts", "expected an object");
    CTX_RETURN_IF_ERROR(checkKeys(layouts, {"gemm", "conv"}, file, "preferred_layouts"));
    for (auto it = layouts.begin(); it != layouts.end(); ++it) {
      if (!it->is_string()) return bad(file, "preferred_layouts." + it.key(), "expected a string");
      t.preferredLayouts[it.key()] = it->get<std::string>();
    }
  }
  if (auto gemm = t.preferredLayouts.find("gemm"); gemm != t.preferredLayouts.end()) {
    auto layout = cpu::parseGemmLayoutPreference(gemm->second);
    if (!layout)
      return bad(file, "preferred_layouts.gemm",
                 fmt::format("'{}'; expected row-major, panels-8, panels-16 or panels-32", gemm->second));
    t.gemmLayout = *layout;
  }
  if (!j.contains("ops")) return bad(file, "ops", "required, an array of ops or \"all-kernels\"");
  const Json& ops = j["ops"];
  if (ops.is_string() && ops.get<std::string>() == "all-kernels") {
    t.allKernelOps = true;
  } else if (ops.is_array()) {
    for (size_t i = 0; i < ops.size(); ++i) {
      CTX_ASSIGN_OR_RETURN(auto op, parseOp(ops[i], file, fmt::format("ops[{}]", i)));
      t.ops.push_back(std::move(op));
    }
  } else {
    return bad(file, "ops", "expected an array of ops or \"all-kernels\"");
  }
  return t;
}

Expected<Target> loadTarget(const std::string& nameOrPath) {
  if (auto json = builtinTargetJson(nameOrPath)) return parseTarget(*json, nameOrPath);
  if (nameOrPath.find('/') == std::string::npos && nameOrPath.find(".json") == std::string::npos)
    return makeError(ErrorCode::InvalidArgument,
                     "unknown target '{}'; built-in targets are npu-sim and cpu, or give a JSON file", nameOrPath);
  CTX_ASSIGN_OR_RETURN(auto text, readFile(nameOrPath).addContext("reading target"));
  return parseTarget(text, nameOrPath);
}

}  // namespace ctxkit::partitioner
