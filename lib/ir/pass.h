// What a compiler pass is: one interface for the graph passes (lib/analysis/passes) and the lowering passes
// (lib/codegen/passes), the change report a run gives, the one record of a pass run that codegen, analysis, the
// driver and ctxgen's report share, and the loop that runs a list of passes with --dump-after/--stop-after.
#pragma once

#include "support/status.h"

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ctxkit::ir {

enum class PassKind { Graph, Lowering };
std::string_view passKindName(PassKind kind);  // "graph", "lowering"

// What one run of a pass changed, as counts of what it did ("ops_removed", "constants_made", ...) in the order the
// pass reports them. Zero counts are left out; `changed` also holds for a change no count names.
struct PassChange {
  bool changed = false;
  std::vector<std::pair<std::string, uint64_t>> counts;

  // Adds n to the count `what`; a nonzero n marks the run as a change.
  PassChange& count(std::string_view what, uint64_t n);
  uint64_t countOf(std::string_view what) const;
  // Sums another report into this one (counts by name, new names last).
  void add(const PassChange& other);
  // "2 ops removed, 1 constant made", or "no change".
  std::string summary() const;
};

// One run of a pass over one unit (a graph, or a partition), or, summed with add(), over every unit of a compile.
struct PassRun {
  std::string name;
  PassKind kind = PassKind::Lowering;
  double milliseconds = 0;
  size_t changed = 0;  // units it changed: 0 or 1 for one run; summed, the graphs or partitions it changed
  PassChange change;

  void add(const PassRun& other);
};

// A pass over some state: the graph passes' (analysis::GraphPassState) or the lowering passes'
// (codegen::LoweringState). A pass holds no state of its own, so one object serves every run.
template <typename State> class Pass {
public:
  virtual ~Pass() = default;
  // Stable: --dump-after, --stop-after, --json and the tests name the pass by it.
  virtual std::string_view name() const = 0;
  // A required pass makes the result (emit-program, plan-memory): it is never skipped.
  virtual bool required() const { return false; }
  [[nodiscard]] virtual Expected<PassChange> run(State& state) const = 0;
};

// The names of a list of passes, in its order.
template <typename State> std::vector<std::string_view> passNames(const std::vector<const Pass<State>*>& passes) {
  std::vector<std::string_view> names;
  for (const Pass<State>* p : passes) names.push_back(p->name());
  return names;
}

// Which passes of a list to leave out, dump after and stop after (names of other lists' passes match nothing).
struct PassControl {
  const std::set<std::string>* skip = nullptr;
  std::string_view dumpAfter;
  std::string_view stopAfter;
};

// Runs `passes` in order on `state`, one record each in `runs`; after the pass control.dumpAfter or
// control.stopAfter names, `dump` gets dumpState(name). Returns whether control.stopAfter ended the list.
template <typename State, typename DumpFn>
Expected<bool> runPasses(const std::vector<const Pass<State>*>& passes, PassKind kind, State& state,
                         const PassControl& control, std::vector<PassRun>& runs, std::string& dump,
                         DumpFn&& dumpState) {
  for (const Pass<State>* pass : passes) {
    const std::string_view name = pass->name();
    if (!pass->required() && control.skip && control.skip->count(std::string(name))) continue;
    const auto start = std::chrono::steady_clock::now();
    CTX_ASSIGN_OR_RETURN(PassChange change, pass->run(state));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const size_t changed = change.changed ? 1 : 0;
    runs.push_back(PassRun{std::string(name), kind, ms, changed, std::move(change)});
    if (control.dumpAfter == name || control.stopAfter == name) dump += dumpState(name);
    if (control.stopAfter == name) return true;
  }
  return false;
}

}  // namespace ctxkit::ir
