// What "the same file" means for every process-wide store and every file check: one identity, one implementation.
#pragma once

#include "support/status.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

struct stat;

namespace ctxkit {

// A file as it is now. Device and inode say which file it is (a name replaced by rename is another file, a hard link
// is the same one); size and modification time to the nanosecond say which state of it (a file rewritten in place is
// another state). The path names it in messages and takes no part in comparisons.
//
// Stores share what they made from a file (a mapping, parsed initializers, a parsed model) between lookups whose
// identity is equal, so a file replaced or rewritten between two lookups is read afresh. A rewrite in place that
// keeps the size and lands within the file system's timestamp granularity is not seen; ctxkit's own writers replace
// files by rename, which always gives a new inode.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t modifiedNs = 0;      // since the epoch
  std::filesystem::path path;  // for messages only

  // The same file, whatever it holds now.
  bool sameFile(const FileIdentity& other) const { return device == other.device && inode == other.inode; }
  // The same file in the same state: what a store shares by.
  bool operator==(const FileIdentity& other) const {
    return sameFile(other) && size == other.size && modifiedNs == other.modifiedNs;
  }
  // "'m_ctxkit.bin' (device 2049, inode 1234, 5678 bytes, modified 1700000000.123456789)"
  std::string describe() const;
};

struct FileIdentityHash {
  size_t operator()(const FileIdentity& id) const;
};

// The identity of the file at `path`, following symbolic links (stat).
Expected<FileIdentity> identifyFile(const std::filesystem::path& path);
// The identity of the file open as `fd` (fstat): what was actually opened, even if `path` was replaced since.
Expected<FileIdentity> identifyOpenFile(int fd, const std::filesystem::path& path);
// The identity a stat or fstat call returned.
FileIdentity identityFromStat(const struct ::stat& st, std::filesystem::path path);

}  // namespace ctxkit
