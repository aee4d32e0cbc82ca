// ONNX Runtime loaded with dlopen (the tests skip when the npm package is absent), ctxkit registered once.
#include "ort_harness.h"

#include "epcontext/contract.h"
#include "onnx_io/onnx_io.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <utility>
#include <memory>
#include <random>
#include <sstream>

namespace ctxkit::ort_test {

namespace fs = std::filesystem;

namespace {
std::unique_ptr<Ort::Env> theEnv;
std::string loadedVersion;
std::mutex logMutex;
std::vector<std::string> logMessages;

void ORT_API_CALL recordLog(void*, OrtLoggingLevel severity, const char* category, const char* logid,
                            const char* location, const char* message) {
  std::string line = std::string(category ? category : "") + " " + (logid ? logid : "") + " " +
                     (location ? location : "") + ": " + (message ? message : "");
  if (severity >= ORT_LOGGING_LEVEL_ERROR) std::cerr << line << "\n";
  std::lock_guard lock(logMutex);
  logMessages.push_back(std::move(line));
}
}  // namespace

std::vector<std::string> takeLogMessages() {
  std::lock_guard lock(logMutex);
  return std::exchange(logMessages, {});
}

std::string ortLibrary() {
  const char* chosen = std::getenv("CTXKIT_TEST_ORT_LIBRARY");
  return chosen && *chosen ? chosen : CTXKIT_ORT_LIBRARY;
}

std::optional<std::string> setUp() {
  if (theEnv) return std::nullopt;
  const std::string library = ortLibrary();
  if (!fs::exists(library))
    return "skipped: ONNX Runtime is not in the cache (" + library + "); run scripts/fetch_test_assets.sh";
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) return std::string("skipped: cannot load ONNX Runtime: ") + dlerror();
  using GetApiBase = const OrtApiBase* (*)();
  auto getApiBase = reinterpret_cast<GetApiBase>(dlsym(handle, "OrtGetApiBase"));
  if (!getApiBase) return "skipped: " + library + " exports no OrtGetApiBase";
  loadedVersion = getApiBase()->GetVersionString();
  const OrtApi* api = getApiBase()->GetApi(ORT_API_VERSION);
  if (!api) return std::string("ONNX Runtime ") + getApiBase()->GetVersionString() + " does not offer API " +
                   std::to_string(ORT_API_VERSION);
  Ort::InitApi(api);
  try {
    theEnv = std::make_unique<Ort::Env>(ORT_LOGGING_LEVEL_WARNING, "ctxkit-ort-ep-test", recordLog, nullptr);
    theEnv->RegisterExecutionProviderLibrary(kRegistrationName, CTXKIT_EP_LIBRARY);
  } catch (const Ort::Exception& e) {
    return std::string("registering ") + CTXKIT_EP_LIBRARY + " with ONNX Runtime failed: " + e.what();
  }
  return std::nullopt;
}

Ort::Env& env() { return *theEnv; }

const std::string& ortVersion() { return loadedVersion; }

std::vector<Ort::ConstEpDevice> ctxkitDevices() {
  std::vector<Ort::ConstEpDevice> ours;
  for (const auto& d : env().GetEpDevices())
    if (std::string(d.EpName()) == "CtxKitExecutionProvider") ours.push_back(d);
  return ours;
}

Ort::ConstEpDevice ctxkitDevice(OrtHardwareDeviceType type) {
  for (const auto& d : ctxkitDevices())
    if (d.Device().Type() == type) return d;
  throw std::runtime_error("no ctxkit EP device of type " + std::to_string(static_cast<int>(type)));
}

Ort::SessionOptions ctxkitOptions(const SessionConfig& config) {
  Ort::SessionOptions options;
  options.SetIntraOpNumThreads(1);
  options.AddConfigEntry("session.intra_op.allow_spinning", "0");
  if (config.recordAssignment) options.AddConfigEntry("session.record_ep_graph_assignment_info", "1");
  for (const auto& [k, v] : config.entries) options.AddConfigEntry(k.c_str(), v.c_str());
  std::unordered_map<std::string, std::string> epOptions(config.epOptions.begin(), config.epOptions.end());
  options.AppendExecutionProvider_V2(env(), {ctxkitDevice(config.device)}, epOptions);
  return options;
}

Ort::Session ctxkitSession(const fs::path& model, const SessionConfig& config) {
  return Ort::Session(env(), model.c_str(), ctxkitOptions(config));
}

Ort::Session ctxkitSessionFromBytes(const std::string& bytes, const SessionConfig& config) {
  return Ort::Session(env(), bytes.data(), bytes.size(), ctxkitOptions(config));
}

Ort::Session cpuSession(const fs::path& model) {
  Ort::SessionOptions options;
  options.SetIntraOpNumThreads(1);
  options.AddConfigEntry("session.intra_op.allow_spinning", "0");
  return Ort::Session(env(), model.c_str(), options);
}

std::string sample(const std::string& stem) { return std::string(CTXKIT_SAMPLES_DIR) + "/" + stem + ".onnx"; }

size_t countNodes(const fs::path& model, bool epContext) {
  auto m = onnx_io::loadModel(model);
  if (!m) throw std::runtime_error("reading " + model.string() + ": " + m.error().message());
  size_t n = 0;
  for (const auto& node : m->graph.nodes) n += (node.kind == ir::OpKind::EPContext) == epContext;
  return n;
}

fs::path withCompatibilityInfo(const fs::path& model, const std::string& value, const fs::path& out) {
  auto m = onnx_io::loadModel(model);
  if (!m) throw std::runtime_error("reading " + model.string() + ": " + m.error().message());
  if (!m->findMetadata(epcontext::compatibilityMetadataKey()))
    throw std::runtime_error(model.string() + " has no " + epcontext::compatibilityMetadataKey());
  m->setMetadata(epcontext::compatibilityMetadataKey(), value);
  if (auto st = onnx_io::saveModel(*m, out); !st) throw std::runtime_error("writing " + out.string() + ": " + st.error().message());
  return out;
}

Comparison matchesCpu(const fs::path& ctxModel, const fs::path& sourceModel, const SessionConfig& config,
                      uint32_t seed) {
  Ort::Session reference = cpuSession(sourceModel);
  Ort::Session ours = ctxkitSession(ctxModel, config);
  Feeds feeds = makeFeeds(reference, seed);
  return compare(run(ours, feeds), run(reference, feeds));
}

Feeds makeFeeds(Ort::Session& session, uint32_t seed, const FeedOverrides& overrides) {
  Feeds feeds;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Ort::AllocatorWithDefaultOptions allocator;
  Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  size_t count = session.GetInputCount();
  feeds.buffers.resize(count);
  for (size_t i = 0; i < count; ++i) {
    feeds.names.push_back(session.GetInputNameAllocated(i, allocator).get());
    Ort::TypeInfo typeInfo = session.GetInputTypeInfo(i);  // owns what `info` views
    auto info = typeInfo.GetTensorTypeAndShapeInfo();
    std::vector<int64_t> shape = info.GetShape();
    if (auto it = overrides.shapes.find(feeds.names.back()); it != overrides.shapes.end()) shape = it->second;
    for (auto& d : shape)
      if (d < 0) d = 1;
    size_t elements = 1;
    for (auto d : shape) elements *= static_cast<size_t>(d);
    ONNXTensorElementDataType type = info.GetElementType();
    auto& buf = feeds.buffers[i];
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      buf.resize(elements * sizeof(float));
      auto* p = reinterpret_cast<float*>(buf.data());
      for (size_t e = 0; e < elements; ++e) p[e] = uniform(rng);
    } else if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
      buf.resize(elements * sizeof(int64_t));
      auto* p = reinterpret_cast<int64_t*>(buf.data());
      auto fixed = overrides.values.find(feeds.names.back());
      for (size_t e = 0; e < elements; ++e)
        p[e] = fixed != overrides.values.end() ? fixed->second : static_cast<int64_t>(rng() % 4);
    } else {
      throw std::runtime_error("test inputs: element type " + std::to_string(type) + " not generated");
    }
    feeds.values.push_back(
        Ort::Value::CreateTensor(cpu, buf.data(), buf.size(), shape.data(), shape.size(), type));
  }
  return feeds;
}

std::vector<Ort::Value> run(Ort::Session& session, Feeds& feeds) {
  Ort::AllocatorWithDefaultOptions allocator;
  std::vector<std::string> outNames;
  for (size_t i = 0; i < session.GetOutputCount(); ++i) outNames.push_back(session.GetOutputNameAllocated(i, allocator).get());
  std::vector<const char*> in, out;
  for (const auto& n : feeds.names) in.push_back(n.c_str());
  for (const auto& n : outNames) out.push_back(n.c_str());
  return session.Run(Ort::RunOptions{nullptr}, in.data(), feeds.values.data(), in.size(), out.data(), out.size());
}

Comparison compare(const std::vector<Ort::Value>& actual, const std::vector<Ort::Value>& expected, double rtol, double atol) {
  Comparison c;
  if (actual.size() != expected.size()) {
    c.ok = false;
    c.detail = "output counts differ: " + std::to_string(actual.size()) + " vs " + std::to_string(expected.size());
    return c;
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    auto a = actual[i].GetTensorTypeAndShapeInfo();
    auto b = expected[i].GetTensorTypeAndShapeInfo();
    if (a.GetShape() != b.GetShape() || a.GetElementType() != b.GetElementType()) {
      c.ok = false;
      c.detail = "output " + std::to_string(i) + ": shape or type differs";
      return c;
    }
    if (a.GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {  // indices, labels: equal or not
      const int64_t* pa = actual[i].GetTensorData<int64_t>();
      const int64_t* pb = expected[i].GetTensorData<int64_t>();
      size_t n = a.GetElementCount();
      c.elements += n;
      for (size_t e = 0; e < n && c.ok; ++e)
        if (pa[e] != pb[e]) {
          c.ok = false;
          c.detail = "output " + std::to_string(i) + " element " + std::to_string(e) + ": " + std::to_string(pa[e]) +
                     " vs " + std::to_string(pb[e]);
        }
      continue;
    }
    if (a.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      c.ok = false;
      c.detail = "output " + std::to_string(i) + ": only float and int64 outputs are compared here";
      return c;
    }
    const float* pa = actual[i].GetTensorData<float>();
    const float* pb = expected[i].GetTensorData<float>();
    size_t n = a.GetElementCount();
    c.elements += n;
    for (size_t e = 0; e < n; ++e) {
      double d = std::fabs(static_cast<double>(pa[e]) - pb[e]);
      if (!(d <= atol + rtol * std::fabs(static_cast<double>(pb[e])))) {
        if (c.ok) {
          std::ostringstream s;
          s << "output " << i << " element " << e << ": " << pa[e] << " vs " << pb[e];
          c.detail = s.str();
        }
        c.ok = false;
      }
      if (d > c.maxAbsDiff || std::isnan(d)) c.maxAbsDiff = std::isnan(d) ? INFINITY : d;
    }
  }
  return c;
}

std::map<std::string, std::vector<std::string>> assignment(const Ort::Session& session) {
  std::map<std::string, std::vector<std::string>> byEp;
  for (const auto& sub : session.GetEpGraphAssignmentInfo())
    for (const auto& node : sub.GetNodes()) byEp[sub.GetEpName()].push_back(node.GetOperatorType());
  return byEp;
}

fs::path writeNoSoftmaxTarget(const fs::path& dir) {
  fs::path p = dir / "nosoftmax.json";
  std::ofstream(p) << R"({"name":"nosoftmax","element_types":["float32"],"ops":[{"op":"MatMul"},{"op":"Add"},)"
                      R"({"op":"Mul"},{"op":"Div"},{"op":"Reshape"},{"op":"Transpose"},{"op":"LayerNormalization"}]})";
  return p;
}

}  // namespace ctxkit::ort_test
