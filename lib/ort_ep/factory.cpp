// The EP factory's functions, as ORT calls them.
#include "ort_ep/factory.h"

#include "epcontext/contract.h"
#include "ort_ep/ep.h"
#include "ort_ep/model_selection.h"
#include "runtime/compatibility.h"

#include <onnxruntime_ep_device_ep_metadata_keys.h>

#include <memory>

namespace ctxkit::ort_ep {

namespace {

// ORT's environment config key that lets factories create virtual devices (set when a library is registered under
// a name ending in ".virtual").
constexpr const char* kAllowVirtualDevices = "allow_virtual_devices";
// Metadata on our EP devices: the target each stands for.
constexpr const char* kTargetMetadataKey = "ctxkit.target";

CtxKitEpFactory& self(OrtEpFactory* f) { return *static_cast<CtxKitEpFactory*>(f); }

template <typename F> OrtStatus* guarded(const Api& api, const char* what, F&& body) noexcept {
  try {
    Status st = body();
    return st ? nullptr : toOrtStatus(api, st.error());
  } catch (const std::exception& e) {
    return api.ort.CreateStatus(ORT_FAIL, fmt::format("{}: {}: {}", epcontext::kEpName, what, e.what()).c_str());
  }
}

const char* ORT_API_CALL getName(const OrtEpFactory*) noexcept { return epcontext::kEpName; }
const char* ORT_API_CALL getVendor(const OrtEpFactory*) noexcept { return epcontext::kProducer; }
uint32_t ORT_API_CALL getVendorId(const OrtEpFactory*) noexcept { return 0; }
const char* ORT_API_CALL getVersion(const OrtEpFactory*) noexcept { return epcontext::kVersion; }

Status addEpDevice(CtxKitEpFactory& factory, const OrtHardwareDevice& device, const char* target, OrtEpDevice** out) {
  const Api& api = factory.api();
  OrtKeyValuePairs* metadata = nullptr;
  api.ort.CreateKeyValuePairs(&metadata);
  api.ort.AddKeyValuePair(metadata, kTargetMetadataKey, target);
  // Applications read it before asking for weightless compilation (ModelCompilationOptions_SetWeightlessEnabled).
  api.ort.AddKeyValuePair(metadata, kOrtEpDevice_EpMetadataKey_WeightlessSupport, "all");
  // No default EP options: ORT would copy them into every session and warn when the application sets its own.
  OrtStatus* status = api.ep.CreateEpDevice(&factory, &device, metadata, nullptr, out);
  api.ort.ReleaseKeyValuePairs(metadata);  // the device copies it
  return fromOrtStatus(api, status, "CreateEpDevice");
}

OrtStatus* ORT_API_CALL getSupportedDevices(OrtEpFactory* f, const OrtHardwareDevice* const* devices, size_t numDevices,
                                            OrtEpDevice** epDevices, size_t maxEpDevices,
                                            size_t* numEpDevices) noexcept {
  CtxKitEpFactory& factory = self(f);
  return guarded(factory.api(), "GetSupportedDevices", [&]() -> Status {
    *numEpDevices = 0;
    const Api& api = factory.api();
    for (size_t i = 0; i < numDevices && *numEpDevices < maxEpDevices; ++i)
      if (api.ort.HardwareDevice_Type(devices[i]) == OrtHardwareDeviceType_CPU) {
        CTX_RETURN_IF_ERROR(addEpDevice(factory, *devices[i], epcontext::kNpuSim.id, &epDevices[*numEpDevices]));
        ++*numEpDevices;
        break;  // one host CPU device is enough
      }
    CTX_ASSIGN_OR_RETURN(const OrtHardwareDevice* npu, factory.virtualNpu());
    if (npu && *numEpDevices < maxEpDevices) {
      CTX_RETURN_IF_ERROR(addEpDevice(factory, *npu, epcontext::kNpuSim.id, &epDevices[*numEpDevices]));
      ++*numEpDevices;
    }
    return Status::ok();
  });
}

OrtStatus* ORT_API_CALL createEp(OrtEpFactory* f, const OrtHardwareDevice* const*, const OrtKeyValuePairs* const*,
                                 size_t, const OrtSessionOptions* sessionOptions, const OrtLogger* logger,
                                 OrtEp** ep) noexcept {
  CtxKitEpFactory& factory = self(f);
  *ep = nullptr;
  return guarded(factory.api(), "CreateEp", [&]() -> Status {
    auto config = readEpConfig(factory.api(), *sessionOptions);
    if (!config) {
      endSharedGroupOfFailedSession(factory.api(), *sessionOptions);
      return config.error();
    }
    *ep = new CtxKitEp(factory.api(), std::move(config).value(), logger);
    return Status::ok();
  });
}

void ORT_API_CALL releaseEp(OrtEpFactory*, OrtEp* ep) noexcept { delete static_cast<CtxKitEp*>(ep); }

OrtStatus* ORT_API_CALL validateCompatibility(OrtEpFactory* f, const OrtHardwareDevice* const*, size_t,
                                              const char* info, OrtCompiledModelCompatibility* result) noexcept {
  CtxKitEpFactory& factory = self(f);
  return guarded(factory.api(), "ValidateCompiledModelCompatibilityInfo", [&]() -> Status {
    runtime::CompatibilityVerdict verdict = runtime::assessCompatibilityInfo(info ? info : "");
    *result = static_cast<OrtCompiledModelCompatibility>(static_cast<int>(verdict.level));
    // The reasons, as ctxinspect --check gives them, through ORT's logger (dropped when it cannot take them).
    const OrtLogger* logger = factory.logger();
    for (const runtime::CompatibilityReason& r : verdict.reasons) {
      if (logger == nullptr) break;
      const std::string message =
          fmt::format("CtxKitExecutionProvider: {}: {}: {} is '{}', this runtime expects '{}': {}",
                      runtime::compatibilityName(verdict.level), r.code, r.field, r.found, r.expected, r.action);
      if (OrtStatus* st =
              factory.api().ort.Logger_LogMessage(logger, ORT_LOGGING_LEVEL_WARNING, message.c_str(), ORT_FILE,
                                                  __LINE__, "ValidateCompiledModelCompatibilityInfo"))
        factory.api().ort.ReleaseStatus(st);
    }
    return Status::ok();
  });
}

// ctxkit runs on the host: ORT's own CPU allocator, no data transfer, no streams, no custom op domains.
OrtStatus* ORT_API_CALL createAllocator(OrtEpFactory*, const OrtMemoryInfo*, const OrtKeyValuePairs*,
                                        OrtAllocator** allocator) noexcept {
  *allocator = nullptr;
  return nullptr;
}
void ORT_API_CALL releaseAllocator(OrtEpFactory*, OrtAllocator*) noexcept {}
OrtStatus* ORT_API_CALL createDataTransfer(OrtEpFactory*, OrtDataTransferImpl** transfer) noexcept {
  *transfer = nullptr;
  return nullptr;
}
bool ORT_API_CALL isStreamAware(const OrtEpFactory*) noexcept { return false; }
OrtStatus* ORT_API_CALL createSyncStream(OrtEpFactory*, const OrtMemoryDevice*, const OrtKeyValuePairs*,
                                         OrtSyncStreamImpl** stream) noexcept {
  *stream = nullptr;
  return nullptr;
}
OrtStatus* ORT_API_CALL getNumCustomOpDomains(OrtEpFactory*, size_t* count) noexcept {
  *count = 0;
  return nullptr;
}
OrtStatus* ORT_API_CALL getCustomOpDomains(OrtEpFactory*, OrtCustomOpDomain**, size_t) noexcept { return nullptr; }

}  // namespace

CtxKitEpFactory::CtxKitEpFactory(const Api& api, const OrtLogger* logger) : OrtEpFactory{}, api_(api), logger_(logger) {
  ort_version_supported = ORT_API_VERSION;
  GetName = getName;
  GetVendor = getVendor;
  GetVendorId = getVendorId;
  GetVersion = getVersion;
  GetSupportedDevices = getSupportedDevices;
  CreateEp = createEp;
  ReleaseEp = releaseEp;
  ValidateCompiledModelCompatibilityInfo = validateCompatibility;
  CreateAllocator = createAllocator;
  ReleaseAllocator = releaseAllocator;
  CreateDataTransfer = createDataTransfer;
  IsStreamAware = isStreamAware;
  CreateSyncStreamForDevice = createSyncStream;
  GetNumCustomOpDomains = getNumCustomOpDomains;
  GetCustomOpDomains = getCustomOpDomains;
  SelectBestModelCandidate = selectBestModelCandidate;
}

CtxKitEpFactory::~CtxKitEpFactory() {
  if (virtualNpu_) api_.ep.ReleaseHardwareDevice(virtualNpu_);
}

Expected<const OrtHardwareDevice*> CtxKitEpFactory::virtualNpu() {
  std::lock_guard lock(mutex_);
  if (virtualNpuAsked_) return static_cast<const OrtHardwareDevice*>(virtualNpu_);
  virtualNpuAsked_ = true;
  OrtKeyValuePairs* env = nullptr;
  CTX_ORT_RETURN_IF_ERROR(api_, api_.ep.GetEnvConfigEntries(&env));
  const char* allowed = env ? api_.ort.GetKeyValue(env, kAllowVirtualDevices) : nullptr;
  bool allow = allowed && std::string_view(allowed) == "1";
  if (env) api_.ort.ReleaseKeyValuePairs(env);
  if (!allow) return static_cast<const OrtHardwareDevice*>(nullptr);
  OrtKeyValuePairs* metadata = nullptr;
  api_.ort.CreateKeyValuePairs(&metadata);
  api_.ort.AddKeyValuePair(metadata, kOrtHardwareDevice_MetadataKey_IsVirtual, "1");
  api_.ort.AddKeyValuePair(metadata, kTargetMetadataKey, epcontext::kNpuSim.id);
  OrtStatus* status =
      api_.ep.CreateHardwareDevice(OrtHardwareDeviceType_NPU, 0, 0, epcontext::kProducer, metadata, &virtualNpu_);
  api_.ort.ReleaseKeyValuePairs(metadata);
  CTX_RETURN_IF_ERROR(fromOrtStatus(api_, status, "CreateHardwareDevice (virtual NPU)"));
  return static_cast<const OrtHardwareDevice*>(virtualNpu_);
}

}  // namespace ctxkit::ort_ep
