// ctxinspect DIR: a model package's manifest, shared assets and every variant's deployment, checked.
#pragma once

#include <filesystem>

namespace ctxkit::ctxinspect {

// Prints each component's variants (device, compatibility, this machine's verdict) and, with `verify`, checks every
// shared asset's content address and every variant's context binaries; exit code 1 on any problem.
int inspectPackage(const std::filesystem::path& root, bool verify, bool json);

}  // namespace ctxkit::ctxinspect
