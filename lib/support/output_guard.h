// Guards a run's outputs before anything is written: no output may land on an input, no two outputs on one file.
#pragma once

#include "support/status.h"

#include <filesystem>
#include <string>
#include <vector>

namespace ctxkit {

// A file a run reads or writes, with what it is ("input model", "expected output", ...) for messages.
struct RunFile {
  std::filesystem::path path;
  std::string role;
};

// Compares every output with every input and with every other output, by resolved path (symlinks followed)
// and, for files that exist, by device and inode (hard links). A clash is an error naming both files; it is
// never overridden by --force, because --force only permits replacing earlier outputs. Reports may share a character
// device (--depfile /dev/null --json /dev/null): it is written into, never replaced.
[[nodiscard]] Status checkRunFiles(const std::vector<RunFile>& inputs, const std::vector<RunFile>& outputs);

}  // namespace ctxkit
