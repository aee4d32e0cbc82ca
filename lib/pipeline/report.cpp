// Human and JSON renderings of a compile report.
#include "pipeline/pipeline.h"
#include "program/sharing.h"
#include "support/text.h"

#include <nlohmann/json.hpp>

namespace ctxkit::pipeline {

namespace {

std::string humanBytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

double ratio(const CompileReport& r) {
  return program::SharingFigures{r.referencedWeightBytes, r.uniqueWeightBytes, r.storedWeightBytes}.ratio();
}

}  // namespace

std::string reportText(const CompileReport& r, bool verbose) {
  std::string out;
  for (const auto& m : r.models) {
    out += fmt::format("{}: {}: {} compiled in {}, {} fallback, {} folded\n", m.source.string(),
                       counted(m.nodeCount, "node"), m.compiledNodes, counted(m.partitions.size(), "partition"),
                       m.fallbackNodes, m.foldedNodes);
    for (const auto& [input, values] : m.boundInputs) out += fmt::format("  input {} bound to {}\n", input, values);
    if (verbose || r.dryRun) {
      for (const auto& p : m.partitions)
        out += fmt::format("  partition {}: {} -> {}, {}, {}, arena {}\n    ops: {}\n", p.name,
                           counted(p.nodeCount, "node"), counted(p.opCount, "op"), counted(p.inputCount, "input"),
                           counted(p.outputCount, "output"), humanBytes(p.arenaBytes), fmt::join(p.opTypes, " "));
      for (const auto& f : m.fallback)
        out += fmt::format("  fallback {} ({}): {}\n", f.name.empty() ? "(unnamed)" : f.name, f.opType, f.reason);
      for (const auto& v : m.valueDependent)
        out += fmt::format("  value-dependent {} ({}): output at most {}; {} behind it, {} with a bound\n",
                           v.name.empty() ? "(unnamed)" : v.name, v.opType,
                           v.bound ? ir::shapeToString(*v.bound) : std::string("unbounded"),
                           counted(v.nodes, "fallback node"), v.boundedNodes);
    }
  }
  out += fmt::format("weights: {} referenced, {} unique, {} stored in {} (sharing ratio {:.2f})\n",
                     humanBytes(r.referencedWeightBytes), humanBytes(r.uniqueWeightBytes),
                     humanBytes(r.storedWeightBytes), counted(r.uniqueWeights, "entry", "entries"), ratio(r));
  if (r.weightless)
    out += fmt::format("weightless: {} ({}) stay in the source models; {} stored in the context binary\n",
                       counted(r.sourceWeights, "weight"), humanBytes(r.sourceWeightBytes),
                       humanBytes(r.uniqueWeightBytes - r.sourceWeightBytes));
  if (r.dryRun) {
    out += "dry run: nothing written\n";
  } else {
    for (const auto& f : r.files) out += fmt::format("wrote {} ({})\n", f.path.string(), humanBytes(f.bytes));
  }
  if (verbose) {
    out += "stage times:";
    for (const auto& s : r.stages) out += fmt::format(" {} {:.1f} ms;", s.stage, s.milliseconds);
    out += "\n";
    for (const auto& p : r.passes)
      out += fmt::format("pass {} ({}, {:.1f} ms): {}\n", p.name, ir::passKindName(p.kind), p.milliseconds,
                         p.change.summary());
  }
  return out;
}

std::string summaryLine(const CompileReport& r, double seconds) {
  size_t nodes = 0, compiled = 0, partitions = 0;
  uint64_t written = 0;
  for (const auto& m : r.models) {
    nodes += m.nodeCount;
    compiled += m.compiledNodes;
    partitions += m.partitions.size();
  }
  for (const auto& f : r.files) written += f.bytes;
  std::string out = fmt::format("compiled {} for {}: {} of {} in {}; ", counted(r.models.size(), "model"), r.target,
                                compiled, counted(nodes, "node"), counted(partitions, "partition"));
  if (r.dryRun) out += "dry run, nothing written";
  else out += fmt::format("wrote {}, {}", counted(r.files.size(), "file"), humanBytes(written));
  return out + fmt::format("; hashed {} of weights; {:.2f} s", humanBytes(r.hashedBytes), seconds);
}

std::string progressLine(const Progress& p, double seconds) {
  auto rate = [&](uint64_t bytes) {
    return seconds > 0 ? humanBytes(static_cast<uint64_t>(static_cast<double>(bytes) / seconds)) + "/s"
                       : std::string("-");
  };
  return fmt::format("{} | hashed {} ({}), wrote {} ({})", p.message, humanBytes(p.bytesHashed), rate(p.bytesHashed),
                     humanBytes(p.bytesWritten), rate(p.bytesWritten));
}

std::string reportJson(const CompileReport& r) {
  using Json = nlohmann::ordered_json;
  Json j;
  j["schema_version"] = kReportSchemaVersion;
  j["ok"] = true;
  j["target"] = r.target;
  j["float16_compute"] = r.float16Compute;
  j["dry_run"] = r.dryRun;
  j["files"] = Json::array();
  for (const auto& f : r.files) j["files"].push_back({{"path", f.path.string()}, {"bytes", f.bytes}});
  j["models"] = Json::array();
  for (const auto& m : r.models) {
    Json jm;
    jm["source"] = m.source.string();
    jm["output"] = m.output.string();
    jm["nodes"] = m.nodeCount;
    jm["compiled_nodes"] = m.compiledNodes;
    jm["fallback_nodes"] = m.fallbackNodes;
    jm["folded_nodes"] = m.foldedNodes;
    jm["bound_inputs"] = Json::object();
    for (const auto& [input, values] : m.boundInputs) jm["bound_inputs"][input] = values;
    jm["partitions"] = Json::array();
    for (const auto& p : m.partitions)
      jm["partitions"].push_back({{"name", p.name},
                                  {"nodes", p.nodeCount},
                                  {"ops", p.opCount},
                                  {"inputs", p.inputCount},
                                  {"outputs", p.outputCount},
                                  {"arena_bytes", p.arenaBytes},
                                  {"op_types", p.opTypes}});
    jm["fallback"] = Json::array();
    for (const auto& f : m.fallback)
      jm["fallback"].push_back({{"name", f.name}, {"op_type", f.opType}, {"reason", f.reason}});
    jm["value_dependent"] = Json::array();
    for (const auto& v : m.valueDependent)
      jm["value_dependent"].push_back({{"name", v.name},
                                       {"op_type", v.opType},
                                       {"bound", v.bound ? Json(*v.bound) : Json()},
                                       {"fallback_nodes", v.nodes},
                                       {"bounded_nodes", v.boundedNodes}});
    jm["warnings"] = m.warnings;
    j["models"].push_back(std::move(jm));
  }
  j["weights"] = {{"referenced_bytes", r.referencedWeightBytes},
                  {"unique_bytes", r.uniqueWeightBytes},
                  {"stored_bytes", r.storedWeightBytes},
                  {"unique_count", r.uniqueWeights},
                  {"sharing_ratio", ratio(r)},
                  {"weightless", r.weightless},
                  {"source_bytes", r.sourceWeightBytes},
                  {"source_count", r.sourceWeights},
                  {"hashed_bytes", r.hashedBytes}};
  Json stages = Json::object();
  for (const auto& s : r.stages) stages[s.stage] = s.milliseconds;
  j["stage_ms"] = stages;
  j["passes"] = Json::array();
  for (const auto& p : r.passes) {
    Json counts = Json::object();
    for (const auto& [what, n] : p.change.counts) counts[what] = n;
    j["passes"].push_back({{"name", p.name},
                           {"kind", ir::passKindName(p.kind)},
                           {"ms", p.milliseconds},
                           {"changed", p.changed},
                           {"counts", counts}});
  }
  if (r.tune) {
    Json convs = Json::array();
    for (const auto& c : r.tune->convs)
      convs.push_back({{"partition", c.partition},
                       {"node", c.node},
                       {"key", c.key},
                       {"heuristic", c.heuristic},
                       {"chosen", c.chosen},
                       {"heuristic_ms", c.heuristicMs},
                       {"chosen_ms", c.chosenMs},
                       {"gain", c.chosenMs > 0 ? c.heuristicMs / c.chosenMs : 1.0},
                       {"cache_hit", c.cacheHit}});
    j["tune"] = {{"cache", r.tune->cache.string()},
                 {"cpu_features", r.tune->cpuFeatures},
                 {"cache_hits", r.tune->hits},
                 {"cache_misses", r.tune->misses},
                 {"convs", convs}};
  }
  return j.dump(2) + "\n";
}

std::string failureReportJson(const std::string& error) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["ok"] = false;
  j["error"] = error;
  return j.dump(2) + "\n";
}

}  // namespace ctxkit::pipeline
