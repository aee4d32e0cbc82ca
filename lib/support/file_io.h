// Files: read-only memory maps, whole-file reads, atomic writes and paths confined to a folder.
#pragma once

#include "support/file_identity.h"
#include "support/status.h"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace ctxkit {

// A read-only mapping of a whole file. Shared so that tensors viewing it keep it alive.
class MappedFile {
public:
  // Maps the file read-only; a file of at most kReadLimit bytes is read into page-aligned memory instead, since
  // mapping and unmapping it would cost more (syscalls, a page fault, a TLB flush) than copying its few pages.
  // Every file ctxkit reads comes through here: anything but a regular file (a FIFO, a device, a folder) is refused
  // by name before it is opened for reading, so that no input can block or feed a read forever.
  static Expected<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);
  static constexpr size_t kReadLimit = 64 * 1024;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }
  // The file that was opened, as it was when opened (fstat of the descriptor read or mapped).
  const FileIdentity& identity() const { return identity_; }

private:
  MappedFile(std::filesystem::path path, FileIdentity identity, const std::byte* data, size_t size, bool mapped)
      : path_(std::move(path)), identity_(std::move(identity)), data_(data), size_(size), mapped_(mapped) {}
  std::filesystem::path path_;
  FileIdentity identity_;
  const std::byte* data_;
  size_t size_;
  bool mapped_;  // else data_ came from std::aligned_alloc
};

// The whole file, through MappedFile::open (regular files only).
Expected<std::string> readFile(const std::filesystem::path& path);

// Writes to a temporary name in the destination folder; `commit()` fsyncs and renames it into place.
// Destroying an uncommitted writer removes the temporary file, so a failure never leaves a final name.
// The temporary name is `.<stem>.tmp<pid>-<8 hex digits>`, where the stem is the final name or, when that would
// take the temporary name past 255 bytes, the final name's start and a hash of it. The temporary carries the sticky
// bit until commit() clears it. A process killed before it could clean up leaves such a file behind; creating a
// writer for the same final path removes those whose process is gone, if they carry that mark and are the user's
// own: a file of that name that a writer did not create is never removed.
class AtomicFileWriter {
public:
  static Expected<std::unique_ptr<AtomicFileWriter>> create(const std::filesystem::path& finalPath);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status write(std::span<const std::byte> data);
  Status write(std::string_view data) { return write(std::as_bytes(std::span(data.data(), data.size()))); }
  Status writeZeros(uint64_t count);
  // Tells the file system the final size up front, so that it allocates the blocks at once instead of page by page
  // as they are written. A hint: the file still grows by the bytes written only.
  void reserve(uint64_t size);
  // Overwrites bytes already written (a header patched once the data behind it is known); the end stays put.
  Status writeAt(uint64_t offset, std::span<const std::byte> data);
  uint64_t bytesWritten() const { return written_; }
  // Flushes the file to disk and closes it, leaving it under its temporary name: what commit() does before its
  // rename, for callers that prepare several files before the first of them is renamed. Idempotent.
  Status finish();
  // finish(), then renames the file into place.
  Status commit();
  const std::filesystem::path& tempPath() const { return tempPath_; }
  const std::filesystem::path& finalPath() const { return finalPath_; }

private:
  class Writeback;
  AtomicFileWriter(std::filesystem::path finalPath, std::filesystem::path tempPath, int fd);
  std::filesystem::path finalPath_;
  std::filesystem::path tempPath_;
  int fd_;
  FileIdentity identity_;  // of the temporary, once finished
  uint64_t written_ = 0;
  bool committed_ = false;
  std::unique_ptr<Writeback> writeback_;  // started by the first complete stretch (Linux)
};

Status writeFileAtomically(const std::filesystem::path& path, std::span<const std::byte> data);
inline Status writeFileAtomically(const std::filesystem::path& path, std::string_view data) {
  return writeFileAtomically(path, std::as_bytes(std::span(data.data(), data.size())));
}

// A report (a depfile, a JSON report, a picture) goes to `path` without ever replacing what is not a plain file: a
// character device or FIFO, also reached through symbolic links (/dev/null, /dev/stdout), is opened and written;
// a regular file or a new name is replaced atomically; anything else, a symbolic link to a regular file or to
// nothing included, is refused (replacing it would turn the link into a file). `role` names the file in messages.
enum class ReportTarget { Replace, WriteThrough };
Expected<ReportTarget> reportTarget(const std::filesystem::path& path, std::string_view role);
// Opens `path` (an existing device or FIFO) and writes `text` to it.
Status writeThrough(const std::filesystem::path& path, std::string_view text);
Status writeReportFile(const std::filesystem::path& path, std::string_view text, std::string_view role);

// Resolves `relative` inside `folder`; rejects empty, absolute and escaping (`..`) paths, and paths that
// leave the folder through a symbolic link (the resolved path is checked, so a link to a place inside the
// folder is fine). Returns the lexical path `folder/relative`, normalized.
Expected<std::filesystem::path> resolveInside(const std::filesystem::path& folder, std::string_view relative);

// The pid in `tempName` if it is exactly a temporary name AtomicFileWriter uses for `finalName` (whatever its mark).
std::optional<long> atomicTempOwner(std::string_view tempName, std::string_view finalName);

}  // namespace ctxkit
