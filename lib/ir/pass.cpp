// Change reports and records of pass runs (pass.h).
#include "ir/pass.h"

#include <fmt/format.h>

#include <algorithm>

namespace ctxkit::ir {

std::string_view passKindName(PassKind kind) { return kind == PassKind::Graph ? "graph" : "lowering"; }

PassChange& PassChange::count(std::string_view what, uint64_t n) {
  if (n == 0) return *this;
  changed = true;
  auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == what; });
  if (it == counts.end()) counts.emplace_back(std::string(what), n);
  else it->second += n;
  return *this;
}

uint64_t PassChange::countOf(std::string_view what) const {
  auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == what; });
  return it == counts.end() ? 0 : it->second;
}

void PassChange::add(const PassChange& other) {
  changed = changed || other.changed;
  for (const auto& [what, n] : other.counts) count(what, n);
}

std::string PassChange::summary() const {
  if (counts.empty()) return changed ? "changed" : "no change";
  std::string out;
  for (const auto& [what, n] : counts) {
    std::string words = what;
    std::replace(words.begin(), words.end(), '_', ' ');
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, words);
  }
  return out;
}

void PassRun::add(const PassRun& other) {
  milliseconds += other.milliseconds;
  changed += other.changed;
  change.add(other.change);
}

}  // namespace ctxkit::ir
