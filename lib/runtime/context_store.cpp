// Shared container mappings and source models keyed by the identity of the file they were read from (FileIdentity),
// and a count of every live mapping.
#include "runtime/context_store.h"

#include "runtime/weak_store.h"
#include "support/file_identity.h"
#include "support/file_io.h"

#include <atomic>
#include <mutex>

namespace ctxkit::runtime {

namespace {
std::mutex gMutex;
WeakStore<FileIdentity, const format::ContainerView, FileIdentityHash> gContainers;  // under gMutex
WeakStore<FileIdentity, const SourceInitializers, FileIdentityHash> gSources;        // under gMutex
std::atomic<size_t> gLiveMappings{0};

std::shared_ptr<const format::ContainerView> counted(format::ContainerView view) {
  auto* owned = new format::ContainerView(std::move(view));
  ++gLiveMappings;
  return std::shared_ptr<const format::ContainerView>(owned, [](const format::ContainerView* v) {
    delete v;
    --gLiveMappings;
  });
}

// What `store` holds for the file at `path` as it is now; nothing if the file cannot be examined (opening it then
// gives the error).
template <class Store> auto findCurrent(Store& store, const std::filesystem::path& path) {
  auto id = identifyFile(path);
  return id ? store.find(*id) : nullptr;
}
}  // namespace

Expected<std::shared_ptr<const format::ContainerView>> openSharedContainer(const std::filesystem::path& canonical,
                                                                           bool share) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (share)
    if (auto live = findCurrent(gContainers, canonical)) return live;
  CTX_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(canonical));
  // Kept under the identity of what was mapped: the file may have been replaced since it was looked up.
  const FileIdentity opened = mapped->identity();
  if (share)
    if (auto live = gContainers.find(opened)) return live;
  const std::span<const std::byte> bytes = mapped->bytes();
  CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::open(bytes, std::move(mapped), canonical.string()));
  auto shared = counted(std::move(view));
  if (share) gContainers.put(opened, shared);
  return shared;
}

Expected<std::shared_ptr<const SourceInitializers>> openSharedSourceModel(const std::filesystem::path& canonical,
                                                                          bool share) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (share)
    if (auto live = findCurrent(gSources, canonical)) return live;
  CTX_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(canonical));
  const FileIdentity opened = mapped->identity();
  if (share)
    if (auto live = gSources.find(opened)) return live;
  CTX_ASSIGN_OR_RETURN(auto source, readSourceInitializers(std::move(mapped)));
  if (share) gSources.put(opened, source);
  return source;
}

size_t liveSharedContainers() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gContainers.live();
}

size_t liveContainerMappings() { return gLiveMappings.load(); }

}  // namespace ctxkit::runtime
