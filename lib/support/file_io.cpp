// POSIX implementation of mapped reads and atomic writes.
#include "support/file_io.h"

#include "support/hash.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace ctxkit {

namespace fs = std::filesystem;

namespace {
std::string osError() { return std::strerror(errno); }

constexpr std::string_view kTempMarker = ".tmp";
constexpr size_t kTempRandomDigits = 8;
constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;
// A file name's limit on Linux file systems; a temporary name adds at most kTempExtra bytes to its stem: the dot,
// the marker, a pid of up to 10 digits, the dash and the random digits.
constexpr size_t kNameMax = 255;
constexpr size_t kTempExtra = 1 + kTempMarker.size() + 10 + 1 + kTempRandomDigits;
constexpr size_t kTempHashDigits = 16;
// A temporary is created with the sticky bit, which commit() clears once it is renamed: it is how a writer tells its
// own leftovers from a user's file that happens to have such a name (a user's regular file has no reason to carry
// it).
constexpr mode_t kTempMode = 0644 | S_ISVTX;

// The part of a temporary name that stands for the final name: the name itself or, when that would take the
// temporary past kNameMax, the name's start and a hash of all of it.
std::string tempStem(std::string_view finalName) {
  if (finalName.size() + kTempExtra <= kNameMax) return std::string(finalName);
  const std::string digest =
      hash128(std::as_bytes(std::span(finalName.data(), finalName.size()))).toHex().substr(0, kTempHashDigits);
  size_t keep = kNameMax - kTempExtra - 1 - kTempHashDigits;
  while (keep > 0 && (static_cast<unsigned char>(finalName[keep]) & 0xc0) == 0x80) --keep;  // whole UTF-8 sequences
  return fmt::format("{}~{}", finalName.substr(0, keep), digest);
}

// Removes temporary files a killed writer left for `finalName` in `folder`: only names that match the
// writer's pattern exactly, only regular files of this user that carry a writer's marker (kTempMode's sticky bit),
// and only when the recorded process no longer exists. A process that exists but is not ours (EPERM) is alive too;
// our own pid's temporaries may be live writers.
void removeStaleTemps(const fs::path& folder, const std::string& finalName) {
  std::error_code ec;
  std::vector<fs::path> stale;
  const long self = static_cast<long>(::getpid());
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    auto owner = atomicTempOwner(it->path().filename().string(), finalName);
    if (!owner || *owner == self) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((st.st_mode & S_ISVTX) == 0 || st.st_uid != ::geteuid()) continue;
    if (::kill(static_cast<pid_t>(*owner), 0) == 0 || errno != ESRCH) continue;
    stale.push_back(it->path());
  }
  for (const fs::path& p : stale) (void)::unlink(p.c_str());
}

// Follows every symbolic link in `p` as open() would, including links whose target does not exist yet;
// components that do not exist are taken literally. The result is absolute and has no `.` or `..`.
Expected<fs::path> followLinks(const fs::path& p) {
  constexpr int kMaxLinks = 40;  // Linux's own limit for one lookup
  std::error_code ec;
  fs::path start = p.is_absolute() ? p : fs::current_path(ec) / p;
  if (ec) return makeError(ErrorCode::IoError, "cannot determine the current folder: {}", ec.message());
  std::vector<fs::path> pending;  // components still to walk, the next one last
  auto push = [&pending](const fs::path& q) {
    std::vector<fs::path> parts(q.begin(), q.end());
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  push(start.relative_path());
  fs::path out = "/";
  int links = 0;
  while (!pending.empty()) {
    fs::path part = std::move(pending.back());
    pending.pop_back();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      out = out.parent_path();
      continue;
    }
    fs::path next = out / part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      out = std::move(next);
      continue;
    }
    if (++links > kMaxLinks)
      return makeError(ErrorCode::InvalidGraph, "'{}' goes through more than {} symbolic links", p.string(), kMaxLinks);
    fs::path target = fs::read_symlink(next, ec);
    if (ec) return makeError(ErrorCode::IoError, "cannot read the symbolic link '{}': {}", next.string(), ec.message());
    if (target.is_absolute()) out = "/";
    push(target.relative_path());
  }
  return out;
}

// realpath(3) for a path that exists (the common case, and much cheaper); followLinks otherwise (a file not
// written yet, a dangling link).
Expected<fs::path> resolvedPath(const fs::path& p) {
  if (char* real = ::realpath(p.c_str(), nullptr)) {
    fs::path out(real);
    std::free(real);
    return out;
  }
  return followLinks(p);
}

bool isWithin(const fs::path& inner, const fs::path& outer) {
  const std::string& in = inner.native();
  const std::string& out = outer.native();
  if (out == "/") return true;
  return in.compare(0, out.size(), out) == 0 && (in.size() == out.size() || in[out.size()] == '/');
}
}  // namespace

std::optional<long> atomicTempOwner(std::string_view tempName, std::string_view finalName) {
  // `.<stem>.tmp<pid>-<8 lowercase hex>`, pid in decimal without leading zeros.
  const std::string stem = tempStem(finalName);
  finalName = stem;
  if (tempName.size() < 1 + finalName.size() + kTempMarker.size() || tempName.front() != '.' ||
      tempName.substr(1, finalName.size()) != finalName ||
      tempName.substr(1 + finalName.size(), kTempMarker.size()) != kTempMarker)
    return std::nullopt;
  std::string_view rest = tempName.substr(1 + finalName.size() + kTempMarker.size());
  size_t dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 10 || rest[0] == '0') return std::nullopt;
  long pid = 0;
  for (char c : rest.substr(0, dash)) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  if (pid > INT_MAX) return std::nullopt;
  std::string_view random = rest.substr(dash + 1);
  if (random.size() != kTempRandomDigits || !std::all_of(random.begin(), random.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      }))
    return std::nullopt;
  return pid;
}

namespace {
const char* fileKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

Error notRegular(const fs::path& path, mode_t mode) {
  return makeError(ErrorCode::IoError, "'{}' is not a regular file ({}); only regular files are read", path.string(),
                   fileKind(mode));
}

// Opens `path` for reading if it is a regular file, and only then (docs/bad-input.md#regular-files): a FIFO would block
// open() until a writer comes, and a device may act on being opened. The type is checked before the open; the open does
// not block (a file swapped for a FIFO in between cannot hang it either) and what it opened is checked again.
Expected<std::pair<int, struct stat>> openRegularFile(const fs::path& path) {
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0)
    return makeError(ErrorCode::NotFound, "cannot open '{}': {}", path.string(), osError());
  if (!S_ISREG(before.st_mode)) return notRegular(path, before.st_mode);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return makeError(ErrorCode::NotFound, "cannot open '{}': {}", path.string(), osError());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return notRegular(path, st.st_mode);
  }
  return std::make_pair(fd, st);  // O_NONBLOCK changes nothing for a regular file
}
}  // namespace

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const fs::path& path) {
  CTX_ASSIGN_OR_RETURN(auto opened, openRegularFile(path));
  const int fd = opened.first;
  const struct stat& st = opened.second;
  size_t size = static_cast<size_t>(st.st_size);
  const std::byte* data = nullptr;
  if (size > 0 && size <= kReadLimit) {
    constexpr size_t kPage = 4096;  // what a mapping would give: containers' weight alignments up to a page hold
    auto* p = static_cast<std::byte*>(std::aligned_alloc(kPage, (size + kPage - 1) / kPage * kPage));
    size_t got = 0;
    std::string problem = p ? "" : "out of memory";
    while (p && got < size && problem.empty()) {
      ssize_t n = ::read(fd, p + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) problem = osError();
      else if (n == 0) problem = fmt::format("the file shrank to {} bytes while it was read ({} expected)", got, size);
      else got += static_cast<size_t>(n);
    }
    ::close(fd);
    if (!problem.empty()) {
      std::free(p);
      return makeError(ErrorCode::IoError, "cannot read '{}': {}", path.string(), problem);
    }
    return std::shared_ptr<const MappedFile>(new MappedFile(path, identityFromStat(st, path), p, size, false));
  }
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return makeError(ErrorCode::IoError, "cannot map '{}': {}", path.string(), osError());
    }
    data = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(new MappedFile(path, identityFromStat(st, path), data, size, true));
}

MappedFile::~MappedFile() {
  if (!data_) return;
  if (mapped_) {
    ::munmap(const_cast<std::byte*>(data_), size_);
  } else {
    std::free(const_cast<std::byte*>(data_));
  }
}

Expected<std::string> readFile(const fs::path& path) {
  CTX_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
  return std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size());
}

// Starts the disk writes of each complete stretch of a large file on a thread of its own: the kernel does much of
// that work (block allocation, I/O submission) in the caller, which would then stop writing meanwhile. A hint: if
// it falls behind or has no thread, commit's fsync does the rest.
class AtomicFileWriter::Writeback {
public:
  explicit Writeback(int fd) : fd_(fd), thread_([this] { run(); }) {}
  ~Writeback() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void upTo(uint64_t end) {
    {
      std::lock_guard lock(mutex_);
      requested_ = end;
    }
    changed_.notify_all();
  }

private:
  void run() {
    uint64_t done = 0;
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return quit_ || requested_ > done; });
      if (quit_) return;
      const uint64_t end = requested_;
      lock.unlock();
#ifdef __linux__
      (void)::sync_file_range(fd_, static_cast<off_t>(done), static_cast<off_t>(end - done), SYNC_FILE_RANGE_WRITE);
#endif
      done = end;
      lock.lock();
    }
  }
  int fd_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t requested_ = 0;
  bool quit_ = false;
  std::thread thread_;  // last: it starts once the rest is set up
};

AtomicFileWriter::AtomicFileWriter(fs::path finalPath, fs::path tempPath, int fd)
    : finalPath_(std::move(finalPath)), tempPath_(std::move(tempPath)), fd_(fd) {}

Expected<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const fs::path& finalPath) {
  fs::path folder = finalPath.parent_path();
  if (folder.empty()) folder = ".";
  const std::string finalName = finalPath.filename().string();
  removeStaleTemps(folder, finalName);
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path temp = folder / fmt::format(".{}{}{}-{:08x}", tempStem(finalName), kTempMarker, ::getpid(), rd());
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kTempMode);
    if (fd >= 0) return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(finalPath, temp, fd));
    if (errno != EEXIST)
      return makeError(ErrorCode::IoError, "cannot create a temporary file in '{}': {}", folder.string(), osError());
  }
  return makeError(ErrorCode::IoError, "cannot create a temporary file in '{}'", folder.string());
}

AtomicFileWriter::~AtomicFileWriter() {
  writeback_.reset();  // before the file it writes back is closed
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ec;
    fs::remove(tempPath_, ec);
  }
}

// Writes all of `data` at the file position (`offset` < 0) or at `offset`, retrying short writes.
static Status writeAll(int fd, std::span<const std::byte> data, int64_t offset, const fs::path& name) {
  const std::byte* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = offset < 0 ? ::write(fd, p, left) : ::pwrite(fd, p, left, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return makeError(ErrorCode::IoError, "writing '{}': {}", name.string(), osError());
    }
    p += n;
    if (offset >= 0) offset += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status AtomicFileWriter::write(std::span<const std::byte> data) {
  CTX_RETURN_IF_ERROR(writeAll(fd_, data, -1, finalPath_));
  const uint64_t before = written_;
  written_ += data.size();
#ifdef __linux__
  // Each complete stretch goes to the disk at once, in the background: commit's fsync then waits for the tail
  // only, and a large file never piles up gigabytes of dirty pages.
  const uint64_t start = before / kWritebackBytes * kWritebackBytes, end = written_ / kWritebackBytes * kWritebackBytes;
  if (end > start) {
    if (!writeback_) try {
        writeback_ = std::make_unique<Writeback>(fd_);
      } catch (const std::system_error&) {  // no thread: fsync does it all
      }
    if (writeback_) writeback_->upTo(end);
  }
#endif
  return Status::ok();
}

Status AtomicFileWriter::writeAt(uint64_t offset, std::span<const std::byte> data) {
  if (offset > written_ || data.size() > written_ - offset)
    return makeError(ErrorCode::Internal, "writing '{}': bytes {}..{} are not written yet (the file has {})",
                     finalPath_.string(), offset, offset + data.size(), written_);
  return writeAll(fd_, data, static_cast<int64_t>(offset), finalPath_);
}

void AtomicFileWriter::reserve(uint64_t size) {
#ifdef __linux__
  if (size > 0 && size <= static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    (void)::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
#else
  (void)size;
#endif
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

Status AtomicFileWriter::finish() {
  if (fd_ < 0) return Status::ok();
  writeback_.reset();
  if (::fsync(fd_) != 0) return makeError(ErrorCode::IoError, "syncing '{}': {}", finalPath_.string(), osError());
  if (auto id = identifyOpenFile(fd_, tempPath_)) identity_ = std::move(*id);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return makeError(ErrorCode::IoError, "closing '{}': {}", finalPath_.string(), osError());
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  CTX_RETURN_IF_ERROR(finish());
  if (::rename(tempPath_.c_str(), finalPath_.c_str()) != 0)
    return makeError(ErrorCode::IoError, "renaming into '{}': {}", finalPath_.string(), osError());
  committed_ = true;
  // The temporary's mark goes only now: a writer killed before the rename leaves a marked temporary the next writer
  // removes. Killed in between, the final file keeps the sticky bit, which Linux ignores on a regular file. The file
  // is opened without following links and checked to be the one written, so nothing else's mode is ever changed.
  const int fd = ::open(finalPath_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && identityFromStat(st, finalPath_).sameFile(identity_))
      (void)::fchmod(fd, st.st_mode & 0777);
    ::close(fd);
  }
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

Expected<ReportTarget> reportTarget(const fs::path& path, std::string_view role) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return ReportTarget::Replace;
    return makeError(ErrorCode::IoError, "{} '{}': {}", role, path.string(), osError());
  }
  if (S_ISREG(st.st_mode)) return ReportTarget::Replace;
  const bool link = S_ISLNK(st.st_mode);
  struct stat target {};
  const bool reached = ::stat(path.c_str(), &target) == 0;
  if (reached && (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode))) return ReportTarget::WriteThrough;
  if (link)
    return makeError(
        ErrorCode::InvalidArgument,
        "{} '{}' is a symbolic link{}; a report never replaces a link (name the file itself, or remove the "
        "link)",
        role, path.string(), reached ? fmt::format(" to '{}'", fs::read_symlink(path).string()) : " to nothing");
  return makeError(ErrorCode::InvalidArgument,
                   "{} '{}' is neither a regular file nor a device or FIFO (a folder?); expected a file to write", role,
                   path.string());
}

Status writeThrough(const fs::path& path, std::string_view text) {
  // No O_CREAT: the device or FIFO exists; no O_TRUNC: a device is not a file to empty.
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return makeError(ErrorCode::IoError, "cannot open '{}' for writing: {}", path.string(), osError());
  Status status = writeAll(fd, std::as_bytes(std::span(text.data(), text.size())), -1, path);
  if (::close(fd) != 0 && status.isOk())
    status = makeError(ErrorCode::IoError, "closing '{}': {}", path.string(), osError());
  return status;
}

Status writeReportFile(const fs::path& path, std::string_view text, std::string_view role) {
  CTX_ASSIGN_OR_RETURN(ReportTarget how, reportTarget(path, role));
  return how == ReportTarget::WriteThrough ? writeThrough(path, text) : writeFileAtomically(path, text);
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
        return makeError(ErrorCode::InvalidGraph, "path '{}' escapes the model folder '{}'", relative, folder.string());
    } else if (part != "." && !part.empty()) {
      ++depth;
    }
  }
  // Rule 11 holds for what open() will reach: a symbolic link inside the folder may point anywhere. Links
  // in the folder's own path do not matter, so the common case (no link below the folder) costs one lstat
  // per component of `relative`; only a path through a link is resolved in full.
  fs::path joined = (folder / rel).lexically_normal();
  fs::path walked = folder.empty() ? fs::path(".") : folder;
  bool throughLink = false;
  for (const auto& part : rel.lexically_normal()) {
    if (part.empty() || part == ".") continue;
    walked /= part;
    struct stat st {};
    if (::lstat(walked.c_str(), &st) != 0) break;  // missing: nothing below it exists either
    if (S_ISLNK(st.st_mode)) {
      throughLink = true;
      break;
    }
  }
  if (!throughLink) return joined;
  CTX_ASSIGN_OR_RETURN(fs::path realFolder, resolvedPath(folder.empty() ? fs::path(".") : folder));
  CTX_ASSIGN_OR_RETURN(fs::path realTarget, resolvedPath(joined));
  if (!isWithin(realTarget, realFolder))
    return makeError(ErrorCode::InvalidGraph,
                     "path '{}' escapes the model folder '{}' through a symbolic link: it resolves to '{}'; expected "
                     "a place inside '{}'",
                     relative, folder.string(), realTarget.string(), realFolder.string());
  return joined;
}

}  // namespace ctxkit
