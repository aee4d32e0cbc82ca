// Small helpers for text meant for people.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ctxkit {

// "node" for 1, "nodes" otherwise; `many` for irregular plurals ("binary", "binaries").
inline std::string noun(uint64_t n, std::string_view one, std::string_view many = {}) {
  if (n == 1) return std::string(one);
  return many.empty() ? fmt::format("{}s", one) : std::string(many);
}

// "1 node", "2 nodes".
inline std::string counted(uint64_t n, std::string_view one, std::string_view many = {}) {
  return fmt::format("{} {}", n, noun(n, one, many));
}

}  // namespace ctxkit
