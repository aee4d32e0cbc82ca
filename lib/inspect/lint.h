// ctxinspect --lint: the ways an EPContext deployment of any EP breaks, as findings with stable rule ids
// (docs/ctxinspect.md#lint), in text, JSON and SARIF for CI annotations.
#pragma once

#include "support/status.h"

#include <filesystem>
#include <string>
#include <vector>

namespace ctxkit::inspect {

enum class Level { Error, Warning, Note };

struct Finding {
  std::string rule;  // "CTXL002"
  Level level = Level::Error;
  std::string model;    // the _ctx.onnx at fault
  std::string node;     // the EPContext node, when the finding is about one
  std::string message;  // what is wrong, naming the attribute, path or value
};

// One rule: its id, short name, level and what to do about it.
struct LintRule {
  const char* id;
  const char* name;
  Level level;
  const char* help;
};
const std::vector<LintRule>& lintRules();

// Lints the models as one deployment (a shared group's models together). Fails only when a model file cannot be read
// as ONNX.
Expected<std::vector<Finding>> lintModels(const std::vector<std::filesystem::path>& models);

std::string lintText(const std::vector<Finding>& findings);
std::string lintJson(const std::vector<Finding>& findings);   // schema: docs/ctxinspect.md#lint
std::string lintSarif(const std::vector<Finding>& findings);  // SARIF 2.1.0, one run of tool "ctxinspect"
bool hasErrors(const std::vector<Finding>& findings);

}  // namespace ctxkit::inspect
