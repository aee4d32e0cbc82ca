// ONNX Runtime's model-selection APIs with ctxkit (issue 30 point 10, docs/ort-ep.md#model-selection):
// GetModelCompatibilityForEpDevices gives ctxinspect's verdict on every case of the compatibility tests, and the
// factory's SelectBestModelCandidate, called through the plugin library's entry point as ORT calls it, picks the best
// of several compiled candidates.
#include <catch2/catch.hpp>

#include "../common/material.h"
#include "epcontext/contract.h"
#include "format/container.h"
#include "onnx_io/onnx_io.h"
#include "model_package_api.h"
#include "ort_harness.h"
#include "tool_runner.h"

#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>

using namespace ctxkit;
using namespace ctxkit::ort_test;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void ctxgen(const std::vector<std::string>& args) { ctxkit::testing::runToolOk(CTXKIT_CTXGEN, args); }

const char* verdictName(OrtCompiledModelCompatibility c) {
  switch (c) {
    case OrtCompiledModelCompatibility_EP_NOT_APPLICABLE: return "NOT_APPLICABLE";
    case OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL: return "SUPPORTED_OPTIMAL";
    case OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION: return "PREFER_RECOMPILATION";
    case OrtCompiledModelCompatibility_EP_UNSUPPORTED: return "UNSUPPORTED";
  }
  return "?";
}

std::string compatibilityInfoOf(const fs::path& model) {
  auto m = onnx_io::loadModel(model);
  REQUIRE(m);
  const std::string* info = m->findMetadata(epcontext::compatibilityMetadataKey());
  REQUIRE(info != nullptr);
  return *info;
}

// ctxkit's factory as ONNX Runtime gets it: the library's CreateEpFactories with ORT's API base (the library ORT
// loaded already), released with ReleaseEpFactory.
class OurFactory {
public:
  OurFactory() {
    void* ort = dlopen(ortLibrary().c_str(), RTLD_NOW | RTLD_NOLOAD);
    library_ = dlopen(CTXKIT_EP_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(ort != nullptr);
    REQUIRE(library_ != nullptr);
    auto apiBase = reinterpret_cast<const OrtApiBase* (*)()>(dlsym(ort, "OrtGetApiBase"));
    create_ = reinterpret_cast<Create>(dlsym(library_, "CreateEpFactories"));
    release_ = reinterpret_cast<Release>(dlsym(library_, "ReleaseEpFactory"));
    REQUIRE(apiBase);
    REQUIRE(create_);
    REQUIRE(release_);
    size_t n = 0;
    OrtStatus* st = create_("ctxkit.selection", apiBase(), nullptr, &factory_, 1, &n);
    REQUIRE(st == nullptr);
    REQUIRE(n == 1);
    REQUIRE(factory_->SelectBestModelCandidate != nullptr);
  }
  ~OurFactory() {
    if (factory_) release_(factory_);
    dlclose(library_);
  }
  OurFactory(const OurFactory&) = delete;
  OurFactory& operator=(const OurFactory&) = delete;

  // The index SelectBestModelCandidate picks (SIZE_MAX: none), or what its error says.
  struct Pick {
    size_t index = std::numeric_limits<size_t>::max();
    std::string error;
    OrtErrorCode code = ORT_OK;
  };
  Pick select(const std::vector<Ort::KeyValuePairs>& candidates, const OrtSessionOptions* options = nullptr) {
    std::vector<const OrtKeyValuePairs*> raw;
    for (const auto& c : candidates) raw.push_back(c);
    const OrtHardwareDevice* device = ctxkitDevice(OrtHardwareDeviceType_CPU).Device();
    Pick pick;
    OrtStatus* st =
        factory_->SelectBestModelCandidate(factory_, device, raw.data(), raw.size(), options, &pick.index);
    if (st != nullptr) {
      Ort::Status status(st);
      pick.error = status.GetErrorMessage();
      pick.code = status.GetErrorCode();
    }
    return pick;
  }

private:
  using Create = OrtStatus* (*)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t, size_t*);
  using Release = OrtStatus* (*)(OrtEpFactory*);
  void* library_ = nullptr;
  Create create_ = nullptr;
  Release release_ = nullptr;
  OrtEpFactory* factory_ = nullptr;
};

// A candidate of ORT 1.30's form: num_models and <i>.ep_compatibility_info.
Ort::KeyValuePairs candidate(const std::vector<std::string>& infos) {
  Ort::KeyValuePairs kv;
  kv.Add("num_models", std::to_string(infos.size()).c_str());
  for (size_t i = 0; i < infos.size(); ++i) kv.Add((std::to_string(i) + ".ep_compatibility_info").c_str(), infos[i].c_str());
  return kv;
}

}  // namespace

TEST_CASE("GetModelCompatibilityForEpDevices gives ctxinspect's verdict on every case of the compatibility tests",
          "[compatibility]") {
  TempDir out("ort_ep_compat_agree");
  ctxgen({sample("tiny_cnn"), "-o", out.path().string(), "-q"});
  const fs::path ctx = out / "tiny_cnn_ctx.onnx";
  auto parsed = epcontext::parseCompatibilityInfo(compatibilityInfoOf(ctx));
  REQUIRE(parsed);
  const epcontext::CompatibilityInfo base = *parsed;
  // The cases of tests/runtime/compat_test.cpp and of this suite's compatibility section, with the verdict both
  // sides must give.
  struct Case {
    std::string name;
    std::function<void(epcontext::CompatibilityInfo&)> doctor;
    OrtCompiledModelCompatibility expected;
    std::string raw = {};  // a value that is no compatibility string at all
  };
  std::vector<Case> cases = {
      {"as written", [](auto&) {}, OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL},
      {"another revision of the target", [](auto& i) { i.targetRevision = "99"; },
       OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION},
      {"another format major", [](auto& i) { ++i.formatMajor; }, OrtCompiledModelCompatibility_EP_UNSUPPORTED},
      {"another producer", [](auto& i) { i.producer = "otherkit"; }, OrtCompiledModelCompatibility_EP_UNSUPPORTED},
      {"a newer format minor", [](auto& i) { ++i.formatMinor; }, OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL},
      {"the first released minor (1.4)", [](auto& i) { i.formatMinor = 4; },
       OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION},
      {"a user's target, any revision",
       [](auto& i) {
         i.targetId = "my-board";
         i.targetRevision = "7";
       },
       OrtCompiledModelCompatibility_EP_SUPPORTED_OPTIMAL},
      {"target cpu of another revision",
       [](auto& i) {
         i.targetId = "cpu";
         i.targetRevision = "7";
       },
       OrtCompiledModelCompatibility_EP_SUPPORTED_PREFER_RECOMPILATION},
      {"not a compatibility string", [](auto&) {}, OrtCompiledModelCompatibility_EP_UNSUPPORTED,
       "not a compatibility string"},
  };
  for (uint16_t minor = 0; minor < format::kFirstReleasedMinor; ++minor)
    cases.push_back({"development format 1." + std::to_string(minor), [minor](auto& i) { i.formatMinor = minor; },
                     OrtCompiledModelCompatibility_EP_UNSUPPORTED});
  size_t n = 0;
  for (const Case& c : cases) {
    epcontext::CompatibilityInfo info = base;
    c.doctor(info);
    const std::string value = c.raw.empty() ? epcontext::formatCompatibilityInfo(info) : c.raw;
    const fs::path model = withCompatibilityInfo(ctx, value, out / ("case" + std::to_string(n++) + "_ctx.onnx"));
    OrtCompiledModelCompatibility ort = Ort::GetModelCompatibilityForEpDevices(ctxkitDevices(), value.c_str());
    auto inspected = ctxkit::testing::runTool(CTXKIT_CTXINSPECT, {model.string(), "--json"});
    INFO(c.name << ": " << value << "\n" << inspected.out << inspected.err);
    auto report = nlohmann::json::parse(inspected.out);
    REQUIRE(report["model_compatibility"].size() == 1);
    const auto& verdict = report["model_compatibility"][0];
    CHECK(verdict["info"] == value);
    CHECK(verdict["verdict"] == verdictName(ort));
    CHECK(ort == c.expected);
    // The .bin is untouched: its own compatibility block stays optimal.
    REQUIRE(report["context_binaries"].size() == 1);
    CHECK(report["context_binaries"][0]["compatibility"]["verdict"] == "SUPPORTED_OPTIMAL");
    std::cout << "ort_ep: compatibility, " << c.name << ": ORT " << verdictName(ort) << ", ctxinspect "
              << verdict["verdict"].get<std::string>() << "\n";
  }
}

TEST_CASE("SelectBestModelCandidate: the best of several compiled candidates by verdict, target, format and revision",
          "[selection]") {
  TempDir out("ort_ep_selection");
  ctxgen({sample("tiny_cnn"), "-o", (out / "npu").string(), "-q"});
  ctxgen({sample("tiny_cnn"), "--target", "cpu", "-o", (out / "cpu").string(), "-q"});
  const fs::path npuModel = out / "npu" / "tiny_cnn_ctx.onnx";
  const std::string npu = compatibilityInfoOf(npuModel);
  const std::string cpu = compatibilityInfoOf(out / "cpu" / "tiny_cnn_ctx.onnx");
  auto doctored = [&](const std::function<void(epcontext::CompatibilityInfo&)>& f) {
    auto info = epcontext::parseCompatibilityInfo(npu);
    REQUIRE(info);
    f(*info);
    return epcontext::formatCompatibilityInfo(*info);
  };
  const std::string otherProducer = doctored([](auto& i) { i.producer = "otherkit"; });
  const std::string otherRevision = doctored([](auto& i) { i.targetRevision = "99"; });
  const std::string olderFormat = doctored([](auto& i) { i.formatMinor = 4; });
  const std::string newerFormat = doctored([](auto& i) { ++i.formatMinor; });
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  OurFactory factory;
  auto pick = [&](const std::vector<std::vector<std::string>>& candidates, const OrtSessionOptions* options = nullptr) {
    std::vector<Ort::KeyValuePairs> kvs;
    for (const auto& c : candidates) kvs.push_back(candidate(c));
    OurFactory::Pick p = factory.select(kvs, options);
    INFO(p.error);
    CHECK(p.error.empty());
    return p.index;
  };

  SECTION("verdicts: optimal over prefer-recompilation over a model to compile; unsupported never") {
    CHECK(pick({{otherProducer}, {otherRevision}, {npu}}) == 2);
    CHECK(pick({{otherRevision}, {otherProducer}}) == 0);
    CHECK(pick({{""}, {otherRevision}}) == 1);  // "": a plain model, compiled at session creation
    CHECK(pick({{otherProducer}, {""}}) == 1);
    CHECK(pick({{otherProducer}, {"not a compatibility string"}}) == kNone);
    CHECK(pick({}) == kNone);
  }
  SECTION("a candidate of several models counts its worst") {
    CHECK(pick({{npu, otherProducer}, {otherRevision, otherRevision}}) == 1);
    CHECK(pick({{npu, otherRevision}, {npu, npu}}) == 1);
  }
  SECTION("the session's target, else npu-sim, ranks first among equal verdicts") {
    CHECK(pick({{cpu}, {npu}}) == 1);
    Ort::SessionOptions wantsCpu;
    wantsCpu.AddConfigEntry("ep.ctxkitexecutionprovider.target", "cpu");
    CHECK(pick({{npu}, {cpu}}, wantsCpu) == 1);
    Ort::SessionOptions wantsNpu;
    wantsNpu.AddConfigEntry("ep.ctxkitexecutionprovider.target", "npu-sim");
    CHECK(pick({{cpu}, {npu}}, wantsNpu) == 1);
  }
  SECTION("then the format (a newer minor counts as this runtime's), then the revision; ties go to the first") {
    CHECK(pick({{olderFormat}, {otherRevision}}) == 1);  // both prefer recompilation: 1.4 is the older format
    CHECK(pick({{newerFormat}, {npu}}) == 0);
    CHECK(pick({{npu}, {npu}}) == 0);
    const std::string revision7 = doctored([](auto& i) { i.targetRevision = "7"; });
    CHECK(pick({{revision7}, {otherRevision}}) == 1);  // both prefer recompilation: 99 is the later revision
  }
  SECTION("ORT 1.28's form: a single ep_compatibility_info key") {
    Ort::KeyValuePairs a, b;
    a.Add("ep_compatibility_info", otherRevision.c_str());
    b.Add("ep_compatibility_info", npu.c_str());
    std::vector<Ort::KeyValuePairs> kvs;
    kvs.push_back(std::move(a));
    kvs.push_back(std::move(b));
    CHECK(factory.select(kvs).index == 1);
  }
  SECTION("malformed candidates are an invalid argument that names the candidate and key") {
    std::vector<Ort::KeyValuePairs> kvs;
    kvs.push_back(candidate({npu}));
    kvs.emplace_back();
    OurFactory::Pick p = factory.select(kvs);
    CHECK(p.code == ORT_INVALID_ARGUMENT);
    CHECK(p.error == "CtxKitExecutionProvider: SelectBestModelCandidate: candidate 1 has no num_models");
    Ort::KeyValuePairs missing;
    missing.Add("num_models", "2");
    missing.Add("0.ep_compatibility_info", npu.c_str());
    kvs.clear();
    kvs.push_back(std::move(missing));
    p = factory.select(kvs);
    CHECK(p.code == ORT_INVALID_ARGUMENT);
    CHECK(p.error == "CtxKitExecutionProvider: SelectBestModelCandidate: candidate 0 has no 1.ep_compatibility_info");
  }
  SECTION("the pick runs: the chosen compiled model in ORT + ctxkit matches ORT's CPU EP") {
    size_t chosen = pick({{otherRevision}, {npu}});
    REQUIRE(chosen == 1);
    Comparison c = matchesCpu(npuModel, sample("tiny_cnn"));
    INFO(c.detail);
    CHECK(c.ok);
  }
}


TEST_CASE("ORT's model-package API picks the optimal of several ctxkit variants by ctxkit's verdicts and runs it",
          "[selection]") {
  ModelPackageApi mp;
  CTX_REQUIRE_MATERIAL(mp.complete(), "ONNX Runtime offers no experimental model-package API (OrtModelPackageApi_*)");
  TempDir pkg("ort_ep_model_package");
  // Three variants of tiny_cnn compiled by ctxgen: another revision (PREFER_RECOMPILATION), another producer
  // (UNSUPPORTED) and as written (SUPPORTED_OPTIMAL), in that order.
  const fs::path tiny = pkg / "tiny";
  ctxgen({sample("tiny_cnn"), "-o", (tiny / "optimal").string(), "-q"});
  const std::string info = compatibilityInfoOf(tiny / "optimal" / "tiny_cnn_ctx.onnx");
  auto doctor = [&](const std::string& variant, const std::function<void(epcontext::CompatibilityInfo&)>& f) {
    ctxgen({sample("tiny_cnn"), "-o", (tiny / variant).string(), "-q"});
    auto parsed = epcontext::parseCompatibilityInfo(info);
    REQUIRE(parsed);
    f(*parsed);
    const std::string value = epcontext::formatCompatibilityInfo(*parsed);
    const fs::path model = tiny / variant / "tiny_cnn_ctx.onnx";
    withCompatibilityInfo(model, value, model);
    return value;
  };
  const std::string revision = doctor("revision", [](auto& i) { i.targetRevision = "99"; });
  const std::string producer = doctor("producer", [](auto& i) { i.producer = "otherkit"; });
  const std::map<std::string, std::string> values = {{"revision", revision}, {"producer", producer}, {"optimal", info}};
  std::ofstream(pkg / "manifest.json") << nlohmann::json{{"schema_version", "1.0"},
                                                          {"components", {{"tiny", "tiny"}}}}.dump(2);
  Ort::SessionOptions options = ctxkitOptions({});
  OrtModelPackageOptions* packageOptions = nullptr;
  Ort::ThrowOnError(mp.createOptions(env(), options, &packageOptions));
  // The package with `names` as its variants, in that order: the variant ORT selects (and its component context),
  // or why it selects none.
  auto select = [&](const std::vector<std::string>& names, OrtModelPackageComponentContext** component) {
    nlohmann::ordered_json variants = nlohmann::ordered_json::object();
    for (const auto& name : names)
      variants[name] = {{"ep", epcontext::kEpName},
                        {"device", "cpu"},
                        {"compatibility_string", values.at(name)},
                        {"executor_info", {{"ort", {{"model_file", "tiny_cnn_ctx.onnx"}}}}}};
    std::ofstream(tiny / "component.json", std::ios::trunc) << nlohmann::ordered_json{{"variants", variants}}.dump(2);
    OrtModelPackageContext* context = nullptr;
    Ort::ThrowOnError(mp.createContext(pkg.path().c_str(), &context));
    std::string chosen;
    if (OrtStatus* st = mp.select(context, "tiny", packageOptions, component)) {
      chosen = "error: " + Ort::Status(st).GetErrorMessage();
    } else {
      const char* name = nullptr;
      Ort::ThrowOnError(mp.selectedName(*component, &name));
      chosen = name;
    }
    mp.releaseContext(context);
    return chosen;
  };
  OrtModelPackageComponentContext* component = nullptr;
  const std::string chosen = select({"revision", "producer", "optimal"}, &component);
  CHECK(chosen == "optimal");
  REQUIRE(component != nullptr);
  OrtSession* raw = nullptr;
  Ort::ThrowOnError(mp.createSession(env(), component, nullptr, &raw));
  Ort::Session session(raw);
  Ort::Session reference = cpuSession(sample("tiny_cnn"));
  Feeds feeds = makeFeeds(session, 3);
  Comparison c = compare(run(session, feeds), run(reference, feeds));
  INFO(c.detail);
  CHECK(c.ok);
  std::cout << "ort_ep: model package of 3 ctxkit variants: ORT chose '" << chosen << "', max |diff| " << c.maxAbsDiff
            << "\n";
  mp.releaseComponent(component);
  // Without the optimal one, the one to recompile; an UNSUPPORTED variant never.
  component = nullptr;
  CHECK(select({"producer", "revision"}, &component) == "revision");
  mp.releaseComponent(component);
  component = nullptr;
  const std::string none = select({"producer"}, &component);
  INFO(none);
  CHECK(none.find("No suitable model variant") != std::string::npos);
  mp.releaseComponent(component);
  mp.releaseOptions(packageOptions);
}
