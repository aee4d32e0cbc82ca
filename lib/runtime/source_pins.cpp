// Source model pins: made from a model as read, checked against a weightless container's pin table.
#include "runtime/source_pins.h"

#include <algorithm>

namespace ctxkit::runtime {

std::vector<format::SourcePin> sourcePins(const std::string& modelName, const SourceInitializers& source) {
  std::vector<format::SourcePin> out;
  out.push_back(format::SourcePin{modelName, "", source.model.size, source.model.hash});
  for (const SourceFilePin& f : source.externalFiles)
    out.push_back(format::SourcePin{modelName, f.file, f.size, f.hash});
  return out;
}

Status checkSourcePins(const format::ContainerView& view, const std::string& modelName,
                       const SourceInitializers& source) {
  auto differs = [&](const std::string& what, const format::SourcePin& pin, uint64_t size, const Hash128& hash) {
    std::string how = size != pin.size
                          ? fmt::format("it is {} bytes; the context pins {}", size, pin.size)
                          : fmt::format("its XXH3-128 is {}; the context pins {}", hash.toHex(), pin.hash.toHex());
    return makeError(ErrorCode::InvalidGraph,
                     "'{}': {} is not the one the context was compiled from ({}): give the source model it was "
                     "compiled from, or recompile",
                     view.displayName(), what, how);
  };
  for (const format::SourcePin& pin : view.sourcePins()) {
    if (pin.model != modelName) continue;
    if (pin.file.empty()) {
      if (pin.size != source.model.size || pin.hash != source.model.hash)
        return differs(fmt::format("source model '{}' ({})", modelName, source.displayName), pin, source.model.size,
                       source.model.hash);
      continue;
    }
    auto it = std::find_if(source.externalFiles.begin(), source.externalFiles.end(),
                           [&](const SourceFilePin& f) { return f.file == pin.file; });
    if (it == source.externalFiles.end())
      return makeError(ErrorCode::InvalidGraph,
                       "'{}': external data file '{}' of source model '{}' was compiled from, but {} names no such "
                       "file: give the source model it was compiled from, or recompile",
                       view.displayName(), pin.file, modelName, source.displayName);
    if (it->size != pin.size || it->hash != pin.hash)
      return differs(
          fmt::format("external data file '{}' of source model '{}' ({})", pin.file, modelName, source.displayName),
          pin, it->size, it->hash);
  }
  return Status::ok();
}

}  // namespace ctxkit::runtime
