// ONNX Runtime for the plugin EP tests: ORT's library loaded at run time, one environment with ctxkit registered,
// sessions with ctxkit or with ORT's CPU EP alone, seeded inputs and output comparison.
#pragma once

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::ort_test {

// ONNX Runtime's library the tests load: ORT 1.30 from the cache, or the one CTXKIT_TEST_ORT_LIBRARY names (the
// older-ORT runs in tests/ort_ep/CMakeLists.txt: ORT 1.29 reading what ctxkit writes).
std::string ortLibrary();
// Loads ORT and registers libctxkit_ep.so; nullopt when ready, else why the tests must skip.
std::optional<std::string> setUp();
Ort::Env& env();
// The version string of the ONNX Runtime setUp loaded.
const std::string& ortVersion();
// Every message ORT's logger received at WARNING or above since the last call (the EP's included); ERROR and above are
// also printed to stderr.
std::vector<std::string> takeLogMessages();
// The name ctxkit's library is registered under (".virtual" lets its factory create the virtual NPU).
inline constexpr const char* kRegistrationName = "ctxkit.virtual";

// ctxkit's EP devices, by hardware device type.
std::vector<Ort::ConstEpDevice> ctxkitDevices();
Ort::ConstEpDevice ctxkitDevice(OrtHardwareDeviceType type);

struct SessionConfig {
  std::map<std::string, std::string> entries;    // session config entries
  std::map<std::string, std::string> epOptions;  // ctxkit's EP options
  OrtHardwareDeviceType device = OrtHardwareDeviceType_CPU;
  bool recordAssignment = true;
};
Ort::SessionOptions ctxkitOptions(const SessionConfig& config);
Ort::Session ctxkitSession(const std::filesystem::path& model, const SessionConfig& config = {});
// A model from memory: ORT knows no model path, so relative .bin paths need ep.context_file_path.
Ort::Session ctxkitSessionFromBytes(const std::string& bytes, const SessionConfig& config = {});
Ort::Session cpuSession(const std::filesystem::path& model);

// A sample model of the build: samples/<stem>.onnx.
std::string sample(const std::string& stem);
// Nodes of `model` that are EPContext nodes (`epContext`) or that are not; throws when the model cannot be read.
size_t countNodes(const std::filesystem::path& model, bool epContext);

// A copy of `model` at `out` whose ctxkit compatibility metadata is `value`; throws when the model has none.
std::filesystem::path withCompatibilityInfo(const std::filesystem::path& model, const std::string& value,
                                            const std::filesystem::path& out);

// Graph inputs with seeded values: floats uniform in [-1, 1), integers small and non-negative.
struct Feeds {
  std::vector<std::string> names;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<Ort::Value> values;
};
// Shapes for inputs whose declared shape is open (others: each open dimension 1), and values that fill an integer input
// (a sample rate that picks a branch).
struct FeedOverrides {
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, int64_t> values;
};
Feeds makeFeeds(Ort::Session& session, uint32_t seed, const FeedOverrides& overrides = {});

std::vector<Ort::Value> run(Ort::Session& session, Feeds& feeds);

// Float outputs compared element by element: passes when every |a-b| <= atol + rtol * |b|; reports the largest
// |a-b| and the first failing element, or why the outputs cannot be compared.
struct Comparison {
  bool ok = true;
  std::string detail;
  double maxAbsDiff = 0;
  size_t elements = 0;
};
Comparison compare(const std::vector<Ort::Value>& actual, const std::vector<Ort::Value>& expected, double rtol = 1e-3,
                   double atol = 1e-5);

// ORT + ctxkit on `ctxModel` against ORT's CPU EP on `sourceModel`, same seeded inputs.
Comparison matchesCpu(const std::filesystem::path& ctxModel, const std::filesystem::path& sourceModel,
                      const SessionConfig& config = {}, uint32_t seed = 7);

// A target without Softmax and Erf, written into `dir`: tiny_prefill then has fallback nodes between compiled
// partitions.
std::filesystem::path writeNoSoftmaxTarget(const std::filesystem::path& dir);

// EP name -> op types of the nodes ORT assigned to it (needs session.record_ep_graph_assignment_info=1).
std::map<std::string, std::vector<std::string>> assignment(const Ort::Session& session);

}  // namespace ctxkit::ort_test
