// ORT 1.30's experimental model-package API for the tests, looked up by name through OrtApi::GetExperimentalFunction.
#pragma once

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>

#include <string>

// ORT's opaque model-package handles (declared in onnxruntime_experimental_c_api.h, whose function list the API-29
// headers in the cache lack).
struct OrtModelPackageOptions;
struct OrtModelPackageContext;
struct OrtModelPackageComponentContext;

namespace ctxkit::ort_test {

// ORT 1.30's experimental model-package API (looked up by name; its header list is not in the API-29 headers):
// the functions this test calls, with the signatures ORT declares for them.
struct ModelPackageApi {
  using CreateOptions = OrtStatus*(ORT_API_CALL*)(const OrtEnv*, const OrtSessionOptions*, OrtModelPackageOptions**);
  using ReleaseOptions = void(ORT_API_CALL*)(OrtModelPackageOptions*);
  using CreateContext = OrtStatus*(ORT_API_CALL*)(const ORTCHAR_T*, OrtModelPackageContext**);
  using ReleaseContext = void(ORT_API_CALL*)(OrtModelPackageContext*);
  using Select = OrtStatus*(ORT_API_CALL*)(const OrtModelPackageContext*, const char*, const OrtModelPackageOptions*,
                                           OrtModelPackageComponentContext**);
  using ReleaseComponent = void(ORT_API_CALL*)(OrtModelPackageComponentContext*);
  using SelectedName = OrtStatus*(ORT_API_CALL*)(const OrtModelPackageComponentContext*, const char**);
  using CreateSession = OrtStatus*(ORT_API_CALL*)(const OrtEnv*, OrtModelPackageComponentContext*,
                                                  const OrtSessionOptions*, OrtSession**);
  CreateOptions createOptions = get<CreateOptions>("OrtModelPackageApi_CreateModelPackageOptionsFromSessionOptions");
  ReleaseOptions releaseOptions = get<ReleaseOptions>("OrtModelPackageApi_ReleaseModelPackageOptions");
  CreateContext createContext = get<CreateContext>("OrtModelPackageApi_CreateModelPackageContext");
  ReleaseContext releaseContext = get<ReleaseContext>("OrtModelPackageApi_ReleaseModelPackageContext");
  Select select = get<Select>("OrtModelPackageApi_SelectComponent");
  ReleaseComponent releaseComponent = get<ReleaseComponent>("OrtModelPackageApi_ReleaseModelPackageComponentContext");
  SelectedName selectedName = get<SelectedName>("OrtModelPackageApi_ModelPackageComponent_GetSelectedVariantName");
  CreateSession createSession = get<CreateSession>("OrtModelPackageApi_CreateSession");

  template <typename F> static F get(const std::string& name) {
    return reinterpret_cast<F>(Ort::GetApi().GetExperimentalFunction((name + "_SinceV28").c_str()));
  }
  bool complete() const {
    return createOptions && releaseOptions && createContext && releaseContext && select && releaseComponent &&
           selectedName && createSession;
  }
};

}  // namespace ctxkit::ort_test
