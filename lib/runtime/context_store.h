// The process-wide store of mapped context binaries: sessions that use the same .bin share one mapping.
#pragma once

#include "format/container.h"

#include <filesystem>
#include <memory>

namespace ctxkit::runtime {

Expected<std::shared_ptr<const format::ContainerView>> openSharedContainer(const std::filesystem::path& path, bool share);
size_t liveSharedContainers();

}  // namespace ctxkit::runtime
