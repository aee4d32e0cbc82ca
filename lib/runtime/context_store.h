// The process-wide store of mapped context binaries: sessions that use the same .bin share one mapping.
#pragma once

#include "format/container.h"

#include <filesystem>
#include <memory>

namespace ctxkit::runtime {

// Maps and validates the container at `path`; with `share`, a container this process already maps under the
// same canonical path is returned instead of a second mapping (ep.share_ep_contexts).
Expected<std::shared_ptr<const format::ContainerView>> openSharedContainer(const std::filesystem::path& path,
                                                                           bool share);
// Shared containers alive now.
size_t liveSharedContainers();
// Containers mapped from files and alive now, shared or not.
size_t liveContainerMappings();

}  // namespace ctxkit::runtime
