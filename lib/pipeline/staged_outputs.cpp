// Staged outputs committed under flock(2) locks on their folders.
#include "pipeline/staged_outputs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace ctxkit::pipeline {

namespace fs = std::filesystem;

namespace {

// Exclusive locks on folders (flock on the folder itself, so no lock file is left behind), released on destruction.
class FolderLocks {
public:
  ~FolderLocks() {
    for (int fd : fds_) ::close(fd);  // closing releases the lock
  }
  Status lock(const fs::path& folder) {
    int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
      return makeError(ErrorCode::IoError, "cannot open output folder '{}' to lock it: {}", folder.string(),
                       std::strerror(errno));
    fds_.push_back(fd);
    while (::flock(fd, LOCK_EX) != 0) {
      // A file system without locks (some network mounts): the commit goes on unlocked; a folder mixed by two runs
      // is still refused at load, where each model's recorded .bin checksum is compared.
      if (errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL) return Status::ok();
      if (errno != EINTR)
        return makeError(ErrorCode::IoError, "cannot lock output folder '{}': {}", folder.string(),
                         std::strerror(errno));
    }
    return Status::ok();
  }

private:
  std::vector<int> fds_;
};

fs::path folderOf(const fs::path& file) {
  fs::path folder = file.parent_path();
  return folder.empty() ? fs::path(".") : folder;
}

}  // namespace

Status checkDeploymentOutput(const fs::path& path, const std::string& role) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return Status::ok();
  if (S_ISLNK(st.st_mode))
    return makeError(ErrorCode::InvalidArgument,
                     "{} '{}' is a symbolic link; ctxgen never replaces a link with a file (remove the link, or write "
                     "the output elsewhere)",
                     role, path.string());
  return makeError(ErrorCode::InvalidArgument,
                   "{} '{}' exists and is not a regular file (a device, FIFO or folder); expected a file name to write "
                   "the deployment to",
                   role, path.string());
}

void StagedOutputs::addDeployment(std::unique_ptr<AtomicFileWriter> file) { deployment_.push_back(std::move(file)); }

Status StagedOutputs::addReport(const fs::path& path, std::string text, const std::string& role) {
  CTX_ASSIGN_OR_RETURN(ReportTarget how, reportTarget(path, role));
  if (how == ReportTarget::WriteThrough) {
    writeThrough_.emplace_back(path, std::move(text));
    return Status::ok();
  }
  CTX_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::create(path));
  CTX_RETURN_IF_ERROR(file->write(text));
  CTX_RETURN_IF_ERROR(file->finish());
  reports_.push_back(std::move(file));
  return Status::ok();
}

Status StagedOutputs::commit(bool force) {
  // Canonical folder paths, sorted: every run takes the locks in one order, so two runs never wait on each other.
  std::set<fs::path> folders;
  for (const auto* files : {&deployment_, &reports_})
    for (const auto& f : *files) {
      std::error_code ec;
      fs::path folder = fs::canonical(folderOf(f->finalPath()), ec);
      folders.insert(ec ? folderOf(f->finalPath()) : folder);
    }
  FolderLocks locks;
  for (const auto& folder : folders) CTX_RETURN_IF_ERROR(locks.lock(folder));
  // Under the locks nothing else of ctxkit changes these names: what is checked now holds until the renames.
  for (const auto& f : deployment_) {
    std::error_code ec;
    if (!force && fs::exists(fs::symlink_status(f->finalPath(), ec)))
      return makeError(ErrorCode::InvalidArgument,
                       "output '{}' already exists (use --force to overwrite); another run wrote it while this one "
                       "compiled, and this run's files were not written",
                       f->finalPath().string());
    CTX_RETURN_IF_ERROR(checkDeploymentOutput(f->finalPath(), "output"));
  }
  for (const auto* files : {&deployment_, &reports_})
    for (const auto& f : *files) CTX_RETURN_IF_ERROR(f->commit());
  for (const auto& [path, text] : writeThrough_) CTX_RETURN_IF_ERROR(writeThrough(path, text));
  return Status::ok();
}

}  // namespace ctxkit::pipeline
