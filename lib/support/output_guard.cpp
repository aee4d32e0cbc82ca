// Output/input clash detection by resolved path and by device+inode.
#include "support/output_guard.h"

#include "support/file_identity.h"

#include <optional>
#include <sys/stat.h>

namespace ctxkit {

namespace fs = std::filesystem;

namespace {

struct RunFileId {
  fs::path resolved;  // absolute, symlinks of existing parts resolved, normalized
  std::optional<FileIdentity> existing;
  bool device = false;  // a character device (/dev/null): reports are written into it, several may share it
};

RunFileId identify(const fs::path& path) {
  RunFileId id;
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  id.resolved = fs::weakly_canonical(absolute, ec);
  if (ec) id.resolved = absolute.lexically_normal();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.existing = identityFromStat(st, path);
    id.device = S_ISCHR(st.st_mode);
  }
  return id;
}

bool sameFile(const RunFileId& a, const RunFileId& b) {
  return a.resolved == b.resolved || (a.existing && b.existing && a.existing->sameFile(*b.existing));
}

std::string describe(const RunFile& f) { return fmt::format("{} '{}'", f.role, f.path.string()); }

}  // namespace

Status checkRunFiles(const std::vector<RunFile>& inputs, const std::vector<RunFile>& outputs) {
  std::vector<RunFileId> in, out;
  for (const auto& f : inputs) in.push_back(identify(f.path));
  for (const auto& f : outputs) out.push_back(identify(f.path));
  for (size_t o = 0; o < outputs.size(); ++o) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (sameFile(out[o], in[i]))
        return makeError(ErrorCode::InvalidArgument,
                         "{} would overwrite {}; an input is never overwritten: choose another output name or folder",
                         describe(outputs[o]), describe(inputs[i]));
    for (size_t p = 0; p < o; ++p)
      if (sameFile(out[o], out[p]) && !out[o].device)
        return makeError(ErrorCode::InvalidArgument,
                         "{} and {} are the same file; two outputs of one run never share a file name",
                         describe(outputs[p]), describe(outputs[o]));
  }
  return Status::ok();
}

}  // namespace ctxkit
