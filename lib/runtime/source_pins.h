// Weightless contexts pin the source model they were compiled from (docs/weight-sharing.md#pins): the model file and
// each external data file by size and XXH3-128. These are the pins of a model as read, and the check that refuses,
// by name, a model or data file that differs from the one compiled.
#pragma once

#include "format/container.h"
#include "runtime/source_model.h"

#include <string>
#include <vector>

namespace ctxkit::runtime {

// The pins of `source` recorded under `modelName` (its onnx_model_filename): the model, then its external data files.
std::vector<format::SourcePin> sourcePins(const std::string& modelName, const SourceInitializers& source);

// Whether `source` is the model graphs of `view` naming `modelName` were compiled from, by the container's pins (a
// container written without pins passes). The error names the file that differs and how (size, hash, missing).
Status checkSourcePins(const format::ContainerView& view, const std::string& modelName,
                       const SourceInitializers& source);

}  // namespace ctxkit::runtime
