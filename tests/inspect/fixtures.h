// Deployments for the ctxinspect tests, made with our own writer: EPContext models shaped like other EPs' (QNN,
// OpenVINO), small models for ctxgen, and helpers that run ctxinspect and read its JSON.
#pragma once

#include "e2e/tool_runner.h"
#include "onnx_io/model_builder.h"
#include "onnx_io/onnx_io.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::test {

namespace fs = std::filesystem;

inline constexpr const char* kQnn = "QNNExecutionProvider";
inline constexpr const char* kOpenVino = "OpenVINOExecutionProvider";

struct EpNodeSpec {
  std::string name;
  std::string source;
  int64_t mainContext = 1;
  int64_t embedMode = 0;
  std::optional<std::string> cacheContext; // a path, or the payload itself when embedMode is 1
};

// x -> node 0 -> v0 -> node 1 -> ... -> y (float32 1x8 everywhere), as another EP's compile step would write it.
inline ir::Model foreignModel(const std::vector<EpNodeSpec>& specs, const std::string& sdkVersion = "2.31.0") {
  ir::Model m;
  m.irVersion = 8;
  m.opsets = {{"", 13}, {"com.microsoft", 1}};
  m.producerName = "onnxruntime";
  m.graph.name = "foreign";
  auto value = [](std::string name) {
    return makeValue(std::move(name), ir::ElemType::Float, {ir::Dim::known(1), ir::Dim::known(8)});
  };
  m.graph.inputs.push_back(value("x"));
  std::string prev = "x";
  for (size_t i = 0; i < specs.size(); ++i) {
    const EpNodeSpec& s = specs[i];
    std::string out = i + 1 == specs.size() ? "y" : "v" + std::to_string(i);
    if (out != "y") m.graph.valueInfo.push_back(value(out));
    ir::Node n = makeNode(m, "EPContext", {prev}, {out}, "com.microsoft");
    n.name = s.name;
    n.attrs.set(ir::Attribute::makeInt("main_context", s.mainContext));
    n.attrs.set(ir::Attribute::makeInt("embed_mode", s.embedMode));
    if (s.cacheContext) n.attrs.set(ir::Attribute::makeString("ep_cache_context", *s.cacheContext));
    n.attrs.set(ir::Attribute::makeString("source", s.source));
    n.attrs.set(ir::Attribute::makeString("partition_name", s.source + "_" + s.name));
    n.attrs.set(ir::Attribute::makeString("ep_sdk_version", sdkVersion));
    m.graph.nodes.push_back(std::move(n));
    prev = out;
  }
  m.graph.outputs.push_back(value("y"));
  return m;
}

// A file of `size` bytes that is not a ctxkit container (another EP's context binary, or external data).
inline void writeBytes(const fs::path& p, size_t size, char fill = '\x5a') {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  std::string bytes(size, fill);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

inline void save(const ir::Model& m, const fs::path& p) {
  fs::create_directories(p.parent_path());
  auto s = onnx_io::saveModel(m, p);
  INFO((s ? std::string() : s.error().message()));
  REQUIRE(s);
}

struct Inspection {
  ctxkit::testing::ToolResult run;
  nlohmann::json json;
};

// ctxinspect with --json; the JSON must parse whatever the exit code.
inline Inspection inspectJson(std::vector<std::string> args) {
  args.push_back("--json");
  Inspection r{ctxkit::testing::runTool(CTXKIT_CTXINSPECT, args), {}};
  INFO(r.run.out << r.run.err);
  REQUIRE_NOTHROW(r.json = nlohmann::json::parse(r.run.out));
  return r;
}

// The deployment file entry whose path ends with `suffix`, or null.
inline nlohmann::json fileEntry(const nlohmann::json& report, const std::string& suffix) {
  for (const auto& f : report["deployment_files"]) {
    const std::string path = f["path"].get<std::string>();
    if (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) return f;
  }
  return nullptr;
}

// True when some problem contains every one of `parts`.
inline bool hasProblem(const nlohmann::json& report, const std::vector<std::string>& parts) {
  for (const auto& p : report["problems"]) {
    const std::string text = p.get<std::string>();
    bool all = true;
    for (const auto& part : parts)
      all = all && text.find(part) != std::string::npos;
    if (all) return true;
  }
  return false;
}

} // namespace ctxkit::test
