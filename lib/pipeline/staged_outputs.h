// A run's outputs as one unit: every file prepared under a temporary name, then committed together under the output
// folders' locks, so two runs into one folder never interleave and a failure leaves the old deployment or the new one.
#pragma once

#include "support/file_io.h"
#include "support/status.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ctxkit::pipeline {

// Refuses an output of the deployment (a _ctx.onnx, a context binary, external data) that exists as anything but a
// regular file: a symbolic link would be replaced by a file, a device or FIFO is no place for a deployment.
[[nodiscard]] Status checkDeploymentOutput(const std::filesystem::path& path, const std::string& role);

class StagedOutputs {
public:
  // A file of the deployment, written and flushed under its temporary name; committed in the order added.
  void addDeployment(std::unique_ptr<AtomicFileWriter> file);
  // A report (depfile, JSON): a new name or a regular file is staged like the deployment and committed after it; a
  // device or FIFO is written through at commit; a symbolic link or other file is refused now (reportTarget).
  [[nodiscard]] Status addReport(const std::filesystem::path& path, std::string text, const std::string& role);
  // Takes an exclusive lock (flock) on every output folder that supports one, in one order, then: without `force`,
  // refuses when a deployment file exists already (another run was faster); checks every final name again; renames
  // every file into place; releases the locks. A rename that fails still leaves each file whole under one name or
  // the other.
  [[nodiscard]] Status commit(bool force);

private:
  std::vector<std::unique_ptr<AtomicFileWriter>> deployment_;
  std::vector<std::unique_ptr<AtomicFileWriter>> reports_;
  std::vector<std::pair<std::filesystem::path, std::string>> writeThrough_;
};

}  // namespace ctxkit::pipeline
