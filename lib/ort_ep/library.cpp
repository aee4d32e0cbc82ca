// The two symbols libctxkit_ep.so exports (ONNX Runtime's plugin EP library entry points); nothing else is visible.
#include "ort_ep/factory.h"

#include "epcontext/contract.h"

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(const char* /*registrationName*/,
                                                                    const OrtApiBase* apiBase, const OrtLogger* logger,
                                                                    OrtEpFactory** factories, size_t maxFactories,
                                                                    size_t* numFactories) {
  *numFactories = 0;
  const OrtApi* ort = apiBase->GetApi(ORT_API_VERSION);
  if (ort == nullptr) return nullptr;  // an ONNX Runtime older than the API ctxkit was built for: offer nothing
  const OrtEpApi* ep = ort->GetEpApi();
  if (maxFactories < 1)
    return ort->CreateStatus(ORT_INVALID_ARGUMENT, "CtxKitExecutionProvider: no room for its one EP factory");
  try {
    factories[0] = new ctxkit::ort_ep::CtxKitEpFactory(ctxkit::ort_ep::Api{*ort, *ep}, logger);
  } catch (const std::exception& e) {
    return ort->CreateStatus(ORT_FAIL, e.what());
  }
  *numFactories = 1;
  return nullptr;
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  delete static_cast<ctxkit::ort_ep::CtxKitEpFactory*>(factory);
  return nullptr;
}

}  // extern "C"
