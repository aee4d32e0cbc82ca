// POSIX implementation of mapped reads and atomic writes.
#include "support/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace ctxkit {

namespace fs = std::filesystem;

namespace {
std::string osError() { return std::strerror(errno); }
}  // namespace

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return makeError(ErrorCode::NotFound, "cannot open '{}': {}", path.string(), osError());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError(ErrorCode::IoError, "'{}' is not a regular file", path.string());
  }
  size_t size = static_cast<size_t>(st.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return makeError(ErrorCode::IoError, "cannot map '{}': {}", path.string(), osError());
    }
    data = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

Expected<std::string> readFile(const fs::path& path) {
  CTX_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  return std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size());
}

Expected<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const fs::path& finalPath) {
  fs::path folder = finalPath.parent_path();
  if (folder.empty()) folder = ".";
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path temp = folder / fmt::format(".{}.tmp{:08x}", finalPath.filename().string(), rd());
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(finalPath, temp, fd));
    if (errno != EEXIST)
      return makeError(ErrorCode::IoError, "cannot create a temporary file in '{}': {}", folder.string(), osError());
  }
  return makeError(ErrorCode::IoError, "cannot create a temporary file in '{}'", folder.string());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ec;
    fs::remove(tempPath_, ec);
  }
}

Status AtomicFileWriter::write(std::span<const std::byte> data) {
  const std::byte* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return makeError(ErrorCode::IoError, "writing '{}': {}", finalPath_.string(), osError());
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  written_ += data.size();
  return Status::ok();
}

Status AtomicFileWriter::writeZeros(uint64_t count) {
  static const std::byte zeros[4096] = {};
  while (count > 0) {
    size_t n = count < sizeof(zeros) ? static_cast<size_t>(count) : sizeof(zeros);
    CTX_RETURN_IF_ERROR(write(std::span(zeros, n)));
    count -= n;
  }
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) return makeError(ErrorCode::IoError, "syncing '{}': {}", finalPath_.string(), osError());
  if (::close(fd_) != 0) {
    fd_ = -1;
    return makeError(ErrorCode::IoError, "closing '{}': {}", finalPath_.string(), osError());
  }
  fd_ = -1;
  if (::rename(tempPath_.c_str(), finalPath_.c_str()) != 0)
    return makeError(ErrorCode::IoError, "renaming into '{}': {}", finalPath_.string(), osError());
  committed_ = true;
  // Make the rename itself durable.
  fs::path folder = finalPath_.parent_path();
  int dfd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status writeFileAtomically(const fs::path& path, std::span<const std::byte> data) {
  CTX_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::create(path));
  CTX_RETURN_IF_ERROR(writer->write(data));
  return writer->commit();
}

Expected<fs::path> resolveInside(const fs::path& folder, std::string_view relative) {
  if (relative.empty()) return makeError(ErrorCode::InvalidGraph, "empty path");
  if (relative.find('\0') != std::string_view::npos)
    return makeError(ErrorCode::InvalidGraph, "path contains a NUL byte");
  fs::path rel(relative);
  if (rel.is_absolute() || relative.front() == '/' || relative.front() == '\\')
    return makeError(ErrorCode::InvalidGraph, "path '{}' is absolute; expected a path relative to '{}'", relative,
                     folder.string());
  int depth = 0;
  for (const auto& part : rel) {
    if (part == "..") {
      if (--depth < 0)
        return makeError(ErrorCode::InvalidGraph, "path '{}' escapes the model folder '{}'", relative,
                         folder.string());
    } else if (part != "." && !part.empty()) {
      ++depth;
    }
  }
  return (folder / rel).lexically_normal();
}

}  // namespace ctxkit
