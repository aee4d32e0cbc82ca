// Shared container mappings and source models keyed by canonical path, and a count of every live mapping.
#include "runtime/context_store.h"

#include <atomic>
#include <map>
#include <mutex>

namespace ctxkit::runtime {

namespace {
std::mutex gMutex;
std::map<std::string, std::weak_ptr<const format::ContainerView>> gStore;
std::atomic<size_t> gLiveMappings{0};
std::map<std::string, std::weak_ptr<const SourceInitializers>> gSources;  // under gMutex

std::shared_ptr<const format::ContainerView> counted(format::ContainerView view) {
  auto* owned = new format::ContainerView(std::move(view));
  ++gLiveMappings;
  return std::shared_ptr<const format::ContainerView>(owned, [](const format::ContainerView* v) {
    delete v;
    --gLiveMappings;
  });
}
}  // namespace

Expected<std::shared_ptr<const format::ContainerView>> openSharedContainer(const std::filesystem::path& canonical,
                                                                           bool share) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (share)
    if (auto it = gStore.find(canonical.string()); it != gStore.end())
      if (auto live = it->second.lock()) return live;
  CTX_ASSIGN_OR_RETURN(auto view, format::ContainerView::openFile(canonical));
  auto shared = counted(std::move(view));
  if (share) gStore[canonical.string()] = shared;
  return shared;
}

Expected<std::shared_ptr<const SourceInitializers>> openSharedSourceModel(const std::filesystem::path& canonical,
                                                                          bool share) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (share)
    if (auto it = gSources.find(canonical.string()); it != gSources.end())
      if (auto live = it->second.lock()) return live;
  CTX_ASSIGN_OR_RETURN(auto source, readSourceInitializers(canonical));
  if (share) {
    std::erase_if(gSources, [](const auto& entry) { return entry.second.expired(); });
    gSources[canonical.string()] = source;
  }
  return source;
}

size_t liveSharedContainers() {
  std::lock_guard<std::mutex> lock(gMutex);
  size_t n = 0;
  for (const auto& [path, weak] : gStore) n += !weak.expired();
  return n;
}

size_t liveContainerMappings() { return gLiveMappings.load(); }

}  // namespace ctxkit::runtime
