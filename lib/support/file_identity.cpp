// POSIX implementation of FileIdentity.
#include "support/file_identity.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ctxkit {

std::string FileIdentity::describe() const {
  return fmt::format("'{}' (device {}, inode {}, {} bytes, modified {}.{:09})", path.string(), device, inode, size,
                     modifiedNs / 1'000'000'000, modifiedNs % 1'000'000'000);
}

size_t FileIdentityHash::operator()(const FileIdentity& id) const {
  // Inodes alone rarely collide on one device; the rest is mixed in so that a file's states spread too.
  uint64_t h = id.inode;
  for (uint64_t v : {id.device, id.size, static_cast<uint64_t>(id.modifiedNs)})
    h = (h ^ v) * 0x100000001b3ull + (h >> 29);
  return static_cast<size_t>(h);
}

FileIdentity identityFromStat(const struct ::stat& st, std::filesystem::path path) {
  FileIdentity id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  id.modifiedNs = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  id.path = std::move(path);
  return id;
}

Expected<FileIdentity> identifyFile(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return makeError(ErrorCode::NotFound, "cannot stat '{}': {}", path.string(), std::strerror(errno));
  return identityFromStat(st, path);
}

Expected<FileIdentity> identifyOpenFile(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return makeError(ErrorCode::IoError, "cannot stat the open file '{}': {}", path.string(), std::strerror(errno));
  return identityFromStat(st, path);
}

}  // namespace ctxkit
