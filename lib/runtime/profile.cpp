// Per-op run profiles (profile.h).
#include "runtime/profile.h"

#include <algorithm>

namespace ctxkit::runtime {

namespace {
thread_local RunProfile* tActive = nullptr;
}  // namespace

void RunProfile::record(const void* owner, size_t index, Clock::duration elapsed,
                        const std::function<ProfiledOp()>& describe) {
  auto [it, added] = index_.emplace(std::make_pair(owner, index), entries_.size());
  if (added) entries_.push_back(ProfileEntry{describe(), 0, 0});
  ProfileEntry& e = entries_[it->second];
  e.milliseconds += std::chrono::duration<double, std::milli>(elapsed).count();
  ++e.calls;
}

std::vector<ProfileEntry> RunProfile::entries() const {
  std::vector<ProfileEntry> sorted = entries_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ProfileEntry& a, const ProfileEntry& b) { return a.milliseconds > b.milliseconds; });
  return sorted;
}

RunProfile* activeProfile() { return tActive; }

ProfileScope::ProfileScope(RunProfile* profile) : previous_(tActive) { tActive = profile; }
ProfileScope::~ProfileScope() { tActive = previous_; }

}  // namespace ctxkit::runtime
