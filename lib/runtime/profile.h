// Per-op run profiles (ctxrun --profile, docs/runtime.md#profiles): the time each compiled op and each fallback node
// takes, summed over the runs made while a profile is active on the calling thread. Without an active profile a run
// pays one thread-local read per op.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctxkit::runtime {

// What one profiled op is, said once, when it is first timed.
struct ProfiledOp {
  std::string graph;  // the compiled program's name, or "fallback" for a node ctxkit interprets
  size_t index = 0;   // the op's index in its program, or the node's index in the model
  std::string name;   // the op's (source node's) name
  std::string kind;   // the ONNX op type
  std::string shape;  // its first output's shape, as [1,64,56,56]
};

struct ProfileEntry {
  ProfiledOp op;
  double milliseconds = 0;  // summed over every timed run
  uint64_t calls = 0;
};

class RunProfile {
public:
  using Clock = std::chrono::steady_clock;

  // Adds `elapsed` to op `index` of `owner` (a program or session), described by `describe` on its first call.
  void record(const void* owner, size_t index, Clock::duration elapsed, const std::function<ProfiledOp()>& describe);
  // Marks the end of one run (the per-run figures divide by this count).
  void endRun() { ++runs_; }

  uint64_t runs() const { return runs_; }
  // Every op timed, slowest first.
  std::vector<ProfileEntry> entries() const;

private:
  struct KeyHash {
    size_t operator()(const std::pair<const void*, size_t>& k) const {
      return std::hash<const void*>()(k.first) ^ (std::hash<size_t>()(k.second) * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<std::pair<const void*, size_t>, size_t, KeyHash> index_;  // (owner, op) -> entries_ index
  std::vector<ProfileEntry> entries_;
  uint64_t runs_ = 0;
};

// The profile runs on this thread record into (null: none).
RunProfile* activeProfile();

// Makes `profile` the calling thread's active profile for the scope's life.
class ProfileScope {
public:
  explicit ProfileScope(RunProfile* profile);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

private:
  RunProfile* previous_;
};

}  // namespace ctxkit::runtime
