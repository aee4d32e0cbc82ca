// Helpers private to the format library: string rules shared by writer and reader, message formatting.
#pragma once

#include "format/layout.h"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ctxkit::format::detail {

// Container strings are well-formed UTF-8 without control characters (U+0000..U+001F, U+007F), so they
// print safely in terminals, JSON and error messages. Returns why `s` breaks the rule, or empty when it
// does not.
std::string_view stringProblem(std::string_view s);

// "89 43 54 58" for messages about raw bytes.
std::string hexBytes(std::span<const std::byte> bytes);

// Program and weight blobs in data-region order: programs in graph-table order, then weights in
// weight-table order.
struct BlobRef {
  bool isWeight;
  size_t index;
  uint64_t offset;
  uint64_t size;
};
std::string blobName(const BlobRef& blob);  // "graph 2 program", "weight 5"

}  // namespace ctxkit::format::detail
