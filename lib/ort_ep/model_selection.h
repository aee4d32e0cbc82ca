// Picking the best of several compiled variants of one model (OrtEpFactory::SelectBestModelCandidate,
// docs/ort-ep.md#model-selection): every model of a candidate gets the runtime's compatibility verdict, and candidates
// are ranked by their worst verdict, then by target, format and revision.
#pragma once

#include "ort_ep/ort_api.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctxkit::ort_ep {

// One candidate: the ep_compatibility_info value of each of its models ("" for a model without one: a plain model
// ctxkit would compile at session creation).
using ModelCandidate = std::vector<std::string>;

// The index of the best candidate, nullopt when every candidate has an UNSUPPORTED model. `wantedTarget` is the
// target a session would compile for (EP option `target`); a candidate compiled for it ranks above one that is not.
// Ties go to the earlier candidate.
std::optional<size_t> selectBestCandidate(const std::vector<ModelCandidate>& candidates, std::string_view wantedTarget);

// The factory function ORT calls. Each candidate is a key-value list: "num_models" and "<i>.ep_compatibility_info"
// for i < num_models (ORT 1.30's header); a list with only "ep_compatibility_info" is one model (ORT 1.28's form).
OrtStatus* ORT_API_CALL selectBestModelCandidate(OrtEpFactory* factory, const OrtHardwareDevice* device,
                                                 const OrtKeyValuePairs* const* candidates, size_t numCandidates,
                                                 const OrtSessionOptions* sessionOptions,
                                                 size_t* selectedIndex) noexcept;

}  // namespace ctxkit::ort_ep
