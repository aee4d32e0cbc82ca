// Input folders, random inputs, output files and tolerance comparison.
#include "tooling/run_io.h"

#include "cli/cli_util.h"

#include "ir/npy.h"
#include "onnx_io/onnx_io.h"
#include "support/file_io.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace ctxkit::tooling {

namespace fs = std::filesystem;

namespace {

double halfToDouble(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : std::ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

// For seeded random float16 inputs: the nearest float16 (ties to even) of a value well inside its range.
uint16_t halfFromDouble(double v) {
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = std::abs(v);
  if (a < std::ldexp(1.0, -25)) return sign;
  int e = 0;
  std::frexp(a, &e);                                                           // a = m * 2^e, m in [0.5, 1)
  const int exponent = std::max(e - 1, -14);                                   // subnormals share the smallest exponent
  const double mantissa = std::nearbyint(a * std::ldexp(1.0, 10 - exponent));  // 10 fraction bits (+ implicit 1)
  const uint32_t bits = (exponent == -14 && mantissa < 1024)
                            ? static_cast<uint32_t>(mantissa)
                            : (static_cast<uint32_t>(exponent + 15) << 10) + static_cast<uint32_t>(mantissa) - 1024;
  return static_cast<uint16_t>(sign | bits);  // a mantissa rounded up to 2048 carries into the exponent
}

double bf16ToDouble(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element `i` as a double, for comparison; false for types we cannot compare numerically.
bool elementAsDouble(const ir::Tensor& t, uint64_t i, double& out) {
  const std::byte* p = t.data();
  switch (t.type()) {
    case ir::ElemType::Float: out = t.dataAs<float>()[i]; return true;
    case ir::ElemType::Double: out = t.dataAs<double>()[i]; return true;
    case ir::ElemType::Int8: out = t.dataAs<int8_t>()[i]; return true;
    case ir::ElemType::Uint8: out = t.dataAs<uint8_t>()[i]; return true;
    case ir::ElemType::Int16: out = t.dataAs<int16_t>()[i]; return true;
    case ir::ElemType::Uint16: out = t.dataAs<uint16_t>()[i]; return true;
    case ir::ElemType::Int32: out = t.dataAs<int32_t>()[i]; return true;
    case ir::ElemType::Uint32: out = t.dataAs<uint32_t>()[i]; return true;
    case ir::ElemType::Int64: out = static_cast<double>(t.dataAs<int64_t>()[i]); return true;
    case ir::ElemType::Uint64: out = static_cast<double>(t.dataAs<uint64_t>()[i]); return true;
    case ir::ElemType::Bool: out = static_cast<uint8_t>(p[i]) != 0; return true;
    case ir::ElemType::Float16: out = halfToDouble(t.dataAs<uint16_t>()[i]); return true;
    case ir::ElemType::BFloat16: out = bf16ToDouble(t.dataAs<uint16_t>()[i]); return true;
    default: return false;
  }
}

std::string indexText(const ir::Shape& shape, uint64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) break;
    idx[d] = static_cast<int64_t>(flat % static_cast<uint64_t>(shape[d]));
    flat /= static_cast<uint64_t>(shape[d]);
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}

// `<base>.pb`, else `<base>.npy`: the one that exists.
std::optional<fs::path> tensorFileAt(const fs::path& base) {
  std::error_code ec;
  for (const char* ext : {".pb", ".npy"}) {
    fs::path p = base;
    p += ext;
    if (fs::exists(p, ec)) return p;
  }
  return std::nullopt;
}

Expected<ir::Tensor> loadTensorFile(const fs::path& path, std::vector<RunFile>* read, const std::string& role) {
  if (read) read->push_back(RunFile{path, role});
  return path.extension() == ".pb" ? onnx_io::loadTensorFile(path) : ir::loadNpy(path);
}

// splitmix64: a fixed generator so every platform makes the same inputs.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

Expected<std::vector<ir::Tensor>> loadInputFolder(const fs::path& dir, const std::vector<ir::ValueInfo>& inputs,
                                                  std::vector<RunFile>* read) {
  std::vector<ir::Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string role = fmt::format("input {} ('{}')", i, inputs[i].name);
    auto file = tensorFileAt(dir / fmt::format("input_{}", i));
    fs::path named = dir / (inputs[i].name + ".npy");
    std::error_code ec;
    if (!file && inputs[i].name.find('/') == std::string::npos && fs::exists(named, ec)) file = named;
    if (!file)
      return makeError(ErrorCode::NotFound, "neither '{0}.pb', '{0}.npy' nor '{1}' exists",
                       (dir / fmt::format("input_{}", i)).string(), named.string())
          .addContext(role);
    auto t = loadTensorFile(*file, read, role);
    if (!t) return t.takeError().addContext(role);
    feeds.push_back(std::move(t).value());
  }
  return feeds;
}

Status setInputValue(std::vector<ir::Tensor>& feeds, const std::vector<ir::ValueInfo>& inputs,
                     const std::string& assignment) {
  CTX_ASSIGN_OR_RETURN(cli::ValueAssignment a, cli::parseValueAssignment(assignment));
  for (size_t i = 0; i < inputs.size() && i < feeds.size(); ++i) {
    if (inputs[i].name != a.name) continue;
    CTX_ASSIGN_OR_RETURN(feeds[i], cli::valueTensor(feeds[i].type(), feeds[i].shape(), a.values,
                                                    fmt::format("--set '{}': input '{}'", assignment, a.name)));
    return Status::ok();
  }
  std::vector<std::string> names;
  for (const auto& in : inputs) names.push_back(in.name);
  return makeError(ErrorCode::InvalidArgument, "--set {}: the model has no input '{}' (its inputs: {})", a.name, a.name,
                   fmt::join(names, ", "));
}

Expected<std::vector<ir::Tensor>> randomInputs(const std::vector<ir::ValueInfo>& inputs,
                                               const ir::ShapeBindings& bindings, uint64_t seed) {
  Rng rng{seed};
  std::vector<ir::Tensor> feeds;
  for (const auto& in : inputs) {
    ir::Shape shape;
    if (auto it = bindings.shapes.find(in.name); it != bindings.shapes.end()) {
      shape = it->second;
    } else if (in.shape) {
      for (size_t d = 0; d < in.shape->size(); ++d) {
        const ir::Dim& dim = (*in.shape)[d];
        if (dim.isKnown()) shape.push_back(dim.value);
        else if (auto b = bindings.dims.find(dim.symbol); !dim.symbol.empty() && b != bindings.dims.end())
          shape.push_back(b->second);
        else
          return makeError(ErrorCode::InvalidArgument,
                           "input '{}': dimension {} ('{}') is dynamic; bind it with --dim or --shape", in.name, d,
                           dim.symbol.empty() ? "?" : dim.symbol);
      }
    } else {
      return makeError(ErrorCode::InvalidArgument, "input '{}' has no declared shape; give --shape {}=...", in.name,
                       in.name);
    }
    CTX_ASSIGN_OR_RETURN(auto t, ir::Tensor::allocate(in.type, shape).addContext(fmt::format("input '{}'", in.name)));
    uint64_t n = t.elementCount();
    for (uint64_t i = 0; i < n; ++i) {
      double u = rng.uniform();
      switch (in.type) {
        case ir::ElemType::Float: t.mutableDataAs<float>()[i] = static_cast<float>(u * 2 - 1); break;
        case ir::ElemType::Float16: t.mutableDataAs<uint16_t>()[i] = halfFromDouble(u * 2 - 1); break;
        case ir::ElemType::Double: t.mutableDataAs<double>()[i] = u * 2 - 1; break;
        case ir::ElemType::Int64: t.mutableDataAs<int64_t>()[i] = static_cast<int64_t>(u * 4); break;
        case ir::ElemType::Int32: t.mutableDataAs<int32_t>()[i] = static_cast<int32_t>(u * 4); break;
        case ir::ElemType::Int8: t.mutableDataAs<int8_t>()[i] = static_cast<int8_t>(u * 4); break;
        case ir::ElemType::Uint8: t.mutableDataAs<uint8_t>()[i] = static_cast<uint8_t>(u * 4); break;
        case ir::ElemType::Bool: t.mutableDataAs<uint8_t>()[i] = u < 0.5 ? 0 : 1; break;
        default:
          return makeError(ErrorCode::Unsupported,
                           "input '{}': random {} inputs are not supported; give an input folder", in.name,
                           ir::elemTypeName(in.type));
      }
    }
    feeds.push_back(std::move(t));
  }
  return feeds;
}

Expected<std::vector<ir::Tensor>> loadExpectedFolder(const fs::path& dir, size_t count, std::vector<RunFile>* read) {
  std::vector<ir::Tensor> out;
  for (size_t i = 0; i < count; ++i) {
    const std::string role = fmt::format("expected output {}", i);
    const fs::path base = dir / fmt::format("output_{}", i);
    auto file = tensorFileAt(base);
    if (!file)
      return makeError(ErrorCode::NotFound, "neither '{0}.pb' nor '{0}.npy' exists", base.string()).addContext(role);
    CTX_ASSIGN_OR_RETURN(auto t, loadTensorFile(*file, read, role).addContext(role));
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<RunFile> savedFiles(const fs::path& dir, const std::string& prefix, size_t count, bool alsoPb) {
  std::vector<RunFile> files;
  for (size_t i = 0; i < count; ++i) {
    files.push_back(RunFile{dir / fmt::format("{}_{}.npy", prefix, i), fmt::format("saved {} {}", prefix, i)});
    if (alsoPb)
      files.push_back(RunFile{dir / fmt::format("{}_{}.pb", prefix, i), fmt::format("saved {} {}", prefix, i)});
  }
  return files;
}

Status saveTensors(const fs::path& dir, const std::string& prefix, const std::vector<ir::Tensor>& tensors) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return makeError(ErrorCode::IoError, "cannot create '{}': {}", dir.string(), ec.message());
  for (size_t i = 0; i < tensors.size(); ++i)
    CTX_RETURN_IF_ERROR(ir::saveNpy(tensors[i], dir / fmt::format("{}_{}.npy", prefix, i)));
  return Status::ok();
}

Status saveOutputs(const fs::path& dir, const std::vector<ir::Tensor>& outputs, const std::vector<ir::ValueInfo>& infos,
                   bool alsoPb) {
  CTX_RETURN_IF_ERROR(saveTensors(dir, "output", outputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (alsoPb) {
      CTX_ASSIGN_OR_RETURN(auto bytes, onnx_io::serializeTensor(outputs[i], i < infos.size() ? infos[i].name : ""));
      CTX_RETURN_IF_ERROR(writeFileAtomically(dir / fmt::format("output_{}.pb", i), bytes));
    }
  }
  return Status::ok();
}

Comparison compareTensors(const ir::Tensor& actual, const ir::Tensor& expected, double rtol, double atol) {
  Comparison c;
  if (actual.type() != expected.type() || actual.shape() != expected.shape()) {
    c.match = false;
    c.message =
        fmt::format("got {} {} but expected {} {}", ir::elemTypeName(actual.type()), ir::shapeToString(actual.shape()),
                    ir::elemTypeName(expected.type()), ir::shapeToString(expected.shape()));
    return c;
  }
  if (actual.type() == ir::ElemType::String) {
    if (actual.stringValues() != expected.stringValues()) {
      c.match = false;
      c.message = "string values differ";
    }
    return c;
  }
  uint64_t n = actual.elementCount();
  double worstExcess = -1;
  uint64_t worst = 0;
  double worstA = 0, worstE = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double a, e;
    if (!elementAsDouble(actual, i, a) || !elementAsDouble(expected, i, e)) {
      if (std::memcmp(actual.data(), expected.data(), actual.byteSize()) != 0) {
        c.match = false;
        c.message = "bytes differ";
      }
      return c;
    }
    bool ok;
    double err = std::fabs(a - e);
    if (std::isnan(a) || std::isnan(e)) ok = std::isnan(a) && std::isnan(e), err = ok ? 0 : INFINITY;
    else if (std::isinf(a) || std::isinf(e)) ok = a == e, err = ok ? 0 : INFINITY;
    else ok = err <= atol + rtol * std::fabs(e);
    if (!std::isinf(err)) c.maxAbsError = std::max(c.maxAbsError, err);
    if (!ok) {
      ++c.mismatches;
      double excess = std::isinf(err) ? INFINITY : err - (atol + rtol * std::fabs(e));
      if (excess > worstExcess) {
        worstExcess = excess;
        worst = i;
        worstA = a;
        worstE = e;
      }
    }
  }
  if (c.mismatches > 0) {
    c.match = false;
    c.message = fmt::format("{} of {} elements differ; worst at {}: got {} expected {} (|diff| {:.3g}, allowed {:.3g})",
                            c.mismatches, n, indexText(actual.shape(), worst), worstA, worstE,
                            std::fabs(worstA - worstE), atol + rtol * std::fabs(worstE));
  }
  return c;
}

}  // namespace ctxkit::tooling
