// The EP factory (docs/ort-ep.md#factory): name, vendor and version from the EPContext contract; the host CPU plus a
// virtual NPU device standing for the simulated target; EPs per session; compatibility of compiled models.
#pragma once

#include "ort_ep/ort_api.h"

#include <mutex>

namespace ctxkit::ort_ep {

class CtxKitEpFactory : public OrtEpFactory {
public:
  CtxKitEpFactory(const Api& api, const OrtLogger* logger);
  ~CtxKitEpFactory();
  CtxKitEpFactory(const CtxKitEpFactory&) = delete;
  CtxKitEpFactory& operator=(const CtxKitEpFactory&) = delete;

  const Api& api() const { return api_; }
  // The virtual NPU, made on first request when ORT allows virtual devices; null otherwise.
  Expected<const OrtHardwareDevice*> virtualNpu();
  // ORT's logger for the library; null when the factory was made without one.
  const OrtLogger* logger() const { return logger_; }

private:
  Api api_;
  const OrtLogger* logger_;
  std::mutex mutex_;
  OrtHardwareDevice* virtualNpu_ = nullptr;
  bool virtualNpuAsked_ = false;
};

}  // namespace ctxkit::ort_ep
