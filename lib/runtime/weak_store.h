// A process-wide store of objects made from files: each is found by the identity of what it was made from while
// some user still holds it, and forgotten once the last one lets go.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <unordered_map>

namespace ctxkit::runtime {

// Not thread-safe: its owner locks around it. Lookups and insertions cost O(1) on average: expired entries are
// swept only when the store has doubled since the last sweep, so loading n objects costs O(n) in all.
template <class Key, class T, class Hash> class WeakStore {
public:
  std::shared_ptr<T> find(const Key& key) {
    ++probes_;
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second.lock();
  }
  // Keeps `object` under `key`, replacing an entry whose object is gone (or any other: the caller decides).
  void put(const Key& key, const std::shared_ptr<T>& object) {
    if (entries_.size() >= sweepAt_) {
      probes_ += entries_.size();
      std::erase_if(entries_, [](const auto& entry) { return entry.second.expired(); });
      sweepAt_ = std::max<size_t>(kFirstSweep, 2 * entries_.size());
    }
    ++probes_;
    entries_.insert_or_assign(key, object);
  }
  size_t live() const {
    size_t n = 0;
    for (const auto& entry : entries_) n += !entry.second.expired();
    return n;
  }
  // Entries looked at so far, by lookups, insertions and sweeps: what tests bound to keep loading linear.
  size_t probes() const { return probes_; }

private:
  static constexpr size_t kFirstSweep = 64;
  std::unordered_map<Key, std::weak_ptr<T>, Hash> entries_;
  size_t sweepAt_ = kFirstSweep;
  size_t probes_ = 0;
};

}  // namespace ctxkit::runtime
