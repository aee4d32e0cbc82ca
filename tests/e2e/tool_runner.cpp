// Process spawning for end-to-end tests.
#include "tool_runner.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace ctxkit::testing {

namespace fs = std::filesystem;

namespace {
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}
}  // namespace

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ToolResult runTool(const std::string& tool, const std::vector<std::string>& args) {
  TempDir capture("capture");
  std::string cmd = quote(tool);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " </dev/null >" + quote((capture / "out").string()) + " 2>" + quote((capture / "err").string());
  int status = std::system(cmd.c_str());
  ToolResult r;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = readText(capture / "out");
  r.err = readText(capture / "err");
  return r;
}

TempDir::TempDir(const std::string& name) {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("ctxkit_test_" + name + "_" + std::to_string(getpid()) + "_" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

ToolResult runToolOk(const std::string& tool, const std::vector<std::string>& args) {
  ToolResult r = runTool(tool, args);
  INFO(tool << " exited " << r.exitCode << "\n" << r.out << r.err);
  REQUIRE(r.exitCode == 0);
  return r;
}

}  // namespace ctxkit::testing
