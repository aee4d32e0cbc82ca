// The process-wide store of mapped context binaries (sessions that use the same .bin share one mapping) and of the
// source models weightless contexts read their weights from.
#pragma once

#include "format/container.h"
#include "runtime/source_model.h"

#include <filesystem>
#include <memory>

namespace ctxkit::runtime {

// Maps and validates the container at `canonicalPath` (as std::filesystem::canonical gives it); with `share`, a
// container this process already maps from the same file in the same state (FileIdentity) is returned instead of a
// second mapping (ep.share_ep_contexts). A file replaced or rewritten since is mapped afresh; holders of the old
// mapping keep it.
Expected<std::shared_ptr<const format::ContainerView>> openSharedContainer(const std::filesystem::path& canonicalPath,
                                                                           bool share);
// The initializers of the source model at `canonicalPath` (weightless contexts); with `share`, a source model this
// process already reads from the same file in the same state is returned instead of being read again.
Expected<std::shared_ptr<const SourceInitializers>> openSharedSourceModel(const std::filesystem::path& canonicalPath,
                                                                          bool share);
// Shared containers alive now.
size_t liveSharedContainers();
// Containers mapped from files and alive now, shared or not.
size_t liveContainerMappings();

}  // namespace ctxkit::runtime
