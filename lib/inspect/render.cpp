// Text and JSON renderings of an inspection report.
#include "inspect/inspect.h"

#include "epcontext/contract.h"
#include "support/text.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace ctxkit::inspect {

namespace {

std::string valuesText(const std::vector<ValueSummary>& values) {
  std::string s;
  for (const auto& v : values) s += fmt::format("{}{} {} {}", s.empty() ? "" : ", ", v.name, v.type, v.shape);
  return s.empty() ? "-" : s;
}

// Another EP's nodes often lack attributes ctxkit writes; "-" keeps the listing readable.
std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

std::string reportText(const Report& r) {
  std::string out;
  out += fmt::format("EPContext nodes: {}\n", r.nodes.size());
  for (const auto& n : r.nodes) {
    out += fmt::format("  {} [{}]\n", n.name, n.model);
    out += fmt::format("    source: {}\n    main_context: {}\n    embed_mode: {}\n    ep_cache_context: {}\n",
                       orDash(n.source), n.mainContext, n.embedMode, orDash(n.cacheContext));
    out += fmt::format("    partition_name: {}\n    ep_sdk_version: {}\n    hardware_architecture: {}\n",
                       orDash(n.partitionName), orDash(n.sdkVersion), orDash(n.hardwareArchitecture));
    out += fmt::format("    onnx_model_filename: {}\n    max_size: {}\n", orDash(n.onnxModelFilename),
                       n.maxSize ? std::to_string(*n.maxSize) : std::string("-"));
    if (!n.notes.empty()) out += fmt::format("    notes: {}\n", n.notes);
    out += fmt::format("    inputs: {}\n    outputs: {}\n", valuesText(n.inputs), valuesText(n.outputs));
  }
  out += "Deployment files:\n";
  for (const auto& f : r.files) {
    std::string what =
        f.format == "opaque" ? fmt::format("  ({} context, opaque)", f.ep.empty() ? "unnamed EP" : f.ep) : "";
    out += fmt::format("  {:<16} {:>12}  {}{}{}\n", f.role, f.bytes ? std::to_string(*f.bytes) : std::string("-"),
                       f.path, what, f.problem.empty() ? "" : "  [" + f.problem + "]");
  }
  if (!r.externalData.empty()) {
    uint64_t bytes = 0;
    size_t broken = 0;
    for (const auto& e : r.externalData) {
      bytes += e.length;
      broken += !e.problem.empty();
    }
    out += fmt::format("External data: {}, {} bytes, {}\n", counted(r.externalData.size(), "initializer"), bytes,
                       counted(broken, "broken reference"));
  }
  for (const auto& c : r.contexts) {
    out +=
        fmt::format("Context binary {}: format {}.{}, producer {} {}, target {} revision {}, {} bytes, alignment {}\n",
                    c.path, c.compat.formatMajor, c.compat.formatMinor, c.compat.producer, c.compat.producerVersion,
                    c.compat.targetId, c.compat.targetRevision, c.fileBytes, c.alignment);
    out +=
        fmt::format("  compatibility: {}{}\n", c.verdict, c.verdictReason.empty() ? "" : " (" + c.verdictReason + ")");
    for (const auto& g : c.graphs)
      out += fmt::format("  graph {} (from {}): {} ops, {} weight refs, arena {} bytes\n", g.name, g.sourceModel,
                         g.opCount, g.weightRefs, g.arenaBytes);
    out += fmt::format(
        "  weights: {} unique, {} bytes stored, {} bytes referenced, {} bytes used by programs (sharing ratio "
        "{:.2f}), {} shared by several graphs\n",
        c.weightCount, c.storedWeightBytes, c.referencedWeightBytes, c.uniqueWeightBytes, c.sharingRatio,
        c.sharedWeights.size());
    if (c.weightless)
      out += fmt::format("  weightless: {}, {} bytes, read from the source models at load\n",
                         counted(c.sourceWeights, "weight"), c.sourceWeightBytes);
    // Which graphs, source models and compiled models (one per shape variant) use which weights.
    for (const auto& u : c.weightUsers) {
      out += fmt::format("  {}, {} bytes, used by {} {}\n", counted(u.count, "weight"), u.bytes,
                         noun(u.graphs.size(), "graph"), fmt::join(u.graphs, ", "));
      out += fmt::format("    source {} {}; compiled {} {}\n", noun(u.models.size(), "model"),
                         fmt::join(u.models, ", "), noun(u.compiledModels.size(), "model"),
                         u.compiledModels.empty() ? "-" : fmt::format("{}", fmt::join(u.compiledModels, ", ")));
    }
    if (c.verified) out += "  verify: every weight hash, padding byte and structural rule checked: ok\n";
  }
  for (const auto& m : r.compatibility)
    out += fmt::format("Compatibility of {}: {}{} ({})\n", m.model, m.verdict, m.reason.empty() ? "" : ": " + m.reason,
                       m.info);
  if (r.problems.empty()) {
    out += "no problems found\n";
  } else {
    out += fmt::format("{}:\n", counted(r.problems.size(), "problem"));
    for (const auto& p : r.problems) out += "  " + p + "\n";
  }
  return out;
}

std::string reportJson(const Report& r) {
  using Json = nlohmann::ordered_json;
  auto values = [](const std::vector<ValueSummary>& vs) {
    Json a = Json::array();
    for (const auto& v : vs) a.push_back({{"name", v.name}, {"type", v.type}, {"shape", v.shape}});
    return a;
  };
  Json j;
  // 2: weights.unique_bytes counts the weights programs use (program::sharingFigures); stored_bytes took its old role.
  j["schema_version"] = 2;
  j["models"] = r.models;
  j["ep_context_nodes"] = Json::array();
  namespace attr = epcontext::attr;  // the node's keys are its EPContext attribute names
  for (const auto& n : r.nodes) {
    Json jn = {{"model", n.model},
               {"name", n.name},
               {attr::kSource, n.source},
               {attr::kMainContext, n.mainContext},
               {attr::kEmbedMode, n.embedMode},
               {attr::kEpCacheContext, n.cacheContext},
               {attr::kPartitionName, n.partitionName},
               {attr::kEpSdkVersion, n.sdkVersion},
               {attr::kHardwareArchitecture, n.hardwareArchitecture},
               {attr::kOnnxModelFilename, n.onnxModelFilename},
               {attr::kMaxSize, n.maxSize ? Json(*n.maxSize) : Json(nullptr)},
               {attr::kNotes, n.notes},
               {"inputs", values(n.inputs)},
               {"outputs", values(n.outputs)}};
    j["ep_context_nodes"].push_back(std::move(jn));
  }
  j["deployment_files"] = Json::array();
  for (const auto& f : r.files)
    j["deployment_files"].push_back({{"path", f.path},
                                     {"role", f.role},
                                     {"format", f.format},
                                     {"ep", f.ep},
                                     {"bytes", f.bytes ? Json(*f.bytes) : Json(nullptr)},
                                     {"exists", f.exists},
                                     {"problem", f.problem}});
  j["external_data"] = Json::array();
  for (const auto& e : r.externalData)
    j["external_data"].push_back({{"model", e.model},
                                  {"initializer", e.initializer},
                                  {"location", e.location},
                                  {"path", e.path},
                                  {"offset", e.offset},
                                  {"length", e.length},
                                  {"file_bytes", e.fileBytes ? Json(*e.fileBytes) : Json(nullptr)},
                                  {"problem", e.problem}});
  j["context_binaries"] = Json::array();
  for (const auto& c : r.contexts) {
    Json jc;
    jc["path"] = c.path;
    jc["compatibility"] = {{"producer", c.compat.producer},
                           {"producer_version", c.compat.producerVersion},
                           {"target", c.compat.targetId},
                           {"target_revision", c.compat.targetRevision},
                           {"format", fmt::format("{}.{}", c.compat.formatMajor, c.compat.formatMinor)},
                           {"verdict", c.verdict},
                           {"reason", c.verdictReason}};
    jc["bytes"] = c.fileBytes;
    jc["alignment"] = c.alignment;
    jc["graphs"] = Json::array();
    for (const auto& g : c.graphs)
      jc["graphs"].push_back({{"name", g.name},
                              {"source_model", g.sourceModel},
                              {"ops", g.opCount},
                              {"weight_refs", g.weightRefs},
                              {"arena_bytes", g.arenaBytes}});
    jc["weights"] = {{"count", c.weightCount},
                     {"stored_bytes", c.storedWeightBytes},
                     {"unique_bytes", c.uniqueWeightBytes},
                     {"referenced_bytes", c.referencedWeightBytes},
                     {"sharing_ratio", c.sharingRatio},
                     {"weightless", c.weightless},
                     {"source_count", c.sourceWeights},
                     {"source_bytes", c.sourceWeightBytes}};
    jc["shared_weights"] = Json::array();
    for (const auto& w : c.sharedWeights)
      jc["shared_weights"].push_back({{"index", w.index},
                                      {"bytes", w.bytes},
                                      {"graphs", w.graphs},
                                      {"models", w.models},
                                      {"compiled_models", w.compiledModels}});
    jc["weight_users"] = Json::array();
    for (const auto& u : c.weightUsers)
      jc["weight_users"].push_back({{"graphs", u.graphs},
                                    {"models", u.models},
                                    {"compiled_models", u.compiledModels},
                                    {"weights", u.count},
                                    {"bytes", u.bytes}});
    jc["verified"] = c.verified;
    j["context_binaries"].push_back(std::move(jc));
  }
  j["model_compatibility"] = Json::array();
  for (const auto& m : r.compatibility)
    j["model_compatibility"].push_back(
        {{"model", m.model}, {"info", m.info}, {"verdict", m.verdict}, {"reason", m.reason}});
  j["problems"] = r.problems;
  j["ok"] = r.problems.empty();
  return j.dump(2) + "\n";
}

}  // namespace ctxkit::inspect
