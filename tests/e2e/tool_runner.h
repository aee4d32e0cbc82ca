// Runs the real CLI binaries from tests and captures exit code, stdout and stderr.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ctxkit::testing {

struct ToolResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

ToolResult runTool(const std::string& tool, const std::vector<std::string>& args);

// runTool, and the test stops there, showing the tool's output, unless the tool exits 0.
ToolResult runToolOk(const std::string& tool, const std::vector<std::string>& args);

// A fresh folder under the build tree, removed when the object goes away.
class TempDir {
public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

private:
  std::filesystem::path path_;
};

std::string readText(const std::filesystem::path& p);

#ifdef CTXKIT_SAMPLES_DIR
// The bundled samples the build writes: a model, and its test data set (inputs and independently computed outputs).
inline const std::filesystem::path kSamples = CTXKIT_SAMPLES_DIR;
inline std::string sample(const std::string& stem) { return (kSamples / (stem + ".onnx")).string(); }
inline std::string sampleData(const std::string& stem) { return (kSamples / stem / "test_data_set_0").string(); }
#endif

}  // namespace ctxkit::testing
