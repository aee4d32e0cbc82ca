// SHA-256 against FIPS 180-4's examples and coreutils' sha256sum, and the model-package reader against hand-made
// packages: each broken one refused with the file and the key at fault (docs/package.md#bad-input).
#include "package/package.h"
#include "support/sha256.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace ctxkit;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void writeText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// coreutils' answer, an implementation independent of ours.
std::string sha256sum(const fs::path& p) {
  std::string cmd = "sha256sum '" + p.string() + "'";
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  char buf[65] = {};
  size_t n = fread(buf, 1, 64, f);
  pclose(f);
  REQUIRE(n == 64);
  return std::string(buf, 64);
}

struct Pkg {
  fs::path root;
  explicit Pkg(const std::string& name) : root(fs::temp_directory_path() / ("ctxkit_pkg_" + name + std::to_string(getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Pkg() { fs::remove_all(root); }
  // One component "m" with one variant "cpu" in m/cpu, model m_ctx.onnx, weights in one shared asset.
  json good() {
    writeText(root / "m/cpu/m_ctx.onnx", "model");
    writeText(root / "assets_src/m.onnx", "weights");
    auto uri = package::directoryUri(root / "assets_src");
    REQUIRE(uri);
    fs::create_directories(root / "shared_assets");
    fs::rename(root / "assets_src", root / "shared_assets" / ("sha256-" + uri->substr(7)));
    asset = *uri;
    return json{{"schema_version", "1.0"},
                {"components",
                 {{"m",
                   {{"variants",
                     {{"cpu",
                       {{"variant_directory", "m/cpu"},
                        {"ep", "CtxKitExecutionProvider"},
                        {"device", "cpu"},
                        {"compatibility_string", "x"},
                        {"executor_info",
                         {{"ort",
                           {{"model_file", "m_ctx.onnx"},
                            {"session_options", {{package::kWeightsFolderOption, asset}}}}}}},
                        {"additional_metadata", {{"ctxkit", {{"source_model", "m.onnx"}}}}}}}}}}}}}};
  }
  void write(const json& manifest) { writeText(root / "manifest.json", manifest.dump()); }
  std::string asset;
};

std::string openError(Pkg& p, const json& manifest) {
  p.write(manifest);
  auto opened = package::open(p.root);
  REQUIRE_FALSE(opened);
  return opened.error().message();
}

}  // namespace

TEST_CASE("sha256 gives FIPS 180-4's digests and sha256sum's", "[package][sha256]") {
  CHECK(sha256Hex(std::string_view("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256Hex(std::string_view("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256Hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Odd lengths around the block and padding edges, fed in uneven pieces, against coreutils.
  Pkg p("sha");
  for (size_t n : {1u, 55u, 56u, 63u, 64u, 65u, 119u, 1000u, 100003u}) {
    std::string data(n, '\0');
    for (size_t i = 0; i < n; ++i) data[i] = char((i * 131 + n) & 0xff);
    writeText(p.root / "f", data);
    Sha256 s;
    for (size_t at = 0; at < n; at += 7) s.update(std::string_view(data).substr(at, 7));
    INFO(n);
    CHECK(s.digestHex() == sha256sum(p.root / "f"));
    CHECK(*sha256File(p.root / "f") == sha256sum(p.root / "f"));
  }
}

TEST_CASE("an asset's address hashes the sorted lines of file hashes and paths", "[package][sha256]") {
  Pkg p("uri");
  writeText(p.root / "a/z.bin", "zz");
  writeText(p.root / "a/sub/b.txt", "bb");
  // The listing ONNX Runtime's model_package library hashes, written out by hand and hashed by sha256sum.
  std::string listing = sha256sum(p.root / "a/sub/b.txt") + "  sub/b.txt\n" + sha256sum(p.root / "a/z.bin") + "  z.bin\n";
  writeText(p.root / "listing", listing);
  auto uri = package::directoryUri(p.root / "a");
  REQUIRE(uri);
  CHECK(*uri == "sha256:" + sha256sum(p.root / "listing"));
}

TEST_CASE("a well-formed package opens, verifies and selects", "[package][reader]") {
  Pkg p("good");
  p.write(p.good());
  auto opened = package::open(p.root);
  REQUIRE(opened);
  REQUIRE(opened->components.size() == 1);
  const auto& v = opened->components[0].variants.at(0);
  CHECK(v.modelFile.filename() == "m_ctx.onnx");
  CHECK(v.weightsFolder->filename() == "sha256-" + p.asset.substr(7));
  CHECK(package::verifyAssets(*opened));
  auto judge = [](const package::Variant&) { return package::Suitability{100, "SUPPORTED_OPTIMAL"}; };
  CHECK(package::select(*opened, "", "auto", judge));
  CHECK(package::select(*opened, "", "cpu", judge));
  auto none = package::select(*opened, "", "gpu", judge);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message(), Catch::Contains("no variant or device 'gpu'"));
  auto unsupported = [](const package::Variant&) { return package::Suitability{std::nullopt, "UNSUPPORTED"}; };
  auto refused = package::select(*opened, "", "auto", unsupported);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message(), Catch::Contains("cpu: UNSUPPORTED"));
}

TEST_CASE("ORT's other forms: an external component.json and an external executor_info file", "[package][reader]") {
  Pkg p("forms");
  json m = p.good();
  json component = m["components"]["m"];
  json& v = component["variants"]["cpu"];
  v["variant_directory"] = "cpu";  // relative to the component's folder now
  writeText(p.root / "m/cpu/ort_info.json", v["executor_info"]["ort"].dump());
  v["executor_info"]["ort"] = "ort_info.json";
  writeText(p.root / "m/component.json", component.dump());
  m["components"]["m"] = "m";
  p.write(m);
  auto opened = package::open(p.root);
  INFO((opened ? std::string() : opened.error().message()));
  REQUIRE(opened);
  const auto& variant = opened->components.at(0).variants.at(0);
  CHECK(variant.modelFile == p.root / "m/cpu/m_ctx.onnx");
  CHECK(variant.weightsFolder);
}

TEST_CASE("a changed shared asset fails verification by name", "[package][reader]") {
  Pkg p("tamper");
  p.write(p.good());
  writeText(p.root / "shared_assets" / ("sha256-" + p.asset.substr(7)) / "m.onnx", "weightz");
  auto opened = package::open(p.root);
  REQUIRE(opened);
  auto s = package::verifyAssets(*opened);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message(), Catch::Contains("sha256-" + p.asset.substr(7)) && Catch::Contains("its name says"));
}

TEST_CASE("broken manifests are refused naming the file and the key", "[package][reader][bad-input]") {
  Pkg p("bad");
  json m = p.good();
  const std::string variant = "components.m.variants.cpu";
  SECTION("no manifest") {
    auto opened = package::open(p.root);
    REQUIRE_FALSE(opened);
    CHECK_THAT(opened.error().message(), Catch::Contains("no manifest.json"));
  }
  SECTION("not JSON") {
    writeText(p.root / "manifest.json", "{");
    auto opened = package::open(p.root);
    REQUIRE_FALSE(opened);
    CHECK_THAT(opened.error().message(), Catch::Contains("manifest.json: not valid JSON"));
  }
  SECTION("missing schema_version") {
    m.erase("schema_version");
    CHECK_THAT(openError(p, m), Catch::Contains("manifest.json: schema_version: required key is missing"));
  }
  SECTION("unsupported schema major") {
    m["schema_version"] = "2.0";
    CHECK_THAT(openError(p, m), Catch::Contains("schema_version: '2.0'"));
  }
  SECTION("missing components") {
    m.erase("components");
    CHECK_THAT(openError(p, m), Catch::Contains("manifest.json: components: required key is missing"));
  }
  SECTION("installed layout") {
    m["layout"] = "installed";
    CHECK_THAT(openError(p, m), Catch::Contains("layout: 'installed'"));
  }
  SECTION("missing variants") {
    m["components"]["m"].erase("variants");
    CHECK_THAT(openError(p, m), Catch::Contains("components.m.variants: required key is missing"));
  }
  SECTION("missing executor_info.ort.model_file") {
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"].erase("model_file");
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".executor_info.ort.model_file: required key is missing"));
  }
  SECTION("a wrong type") {
    m["components"]["m"]["variants"]["cpu"]["ep"] = 3;
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".ep: must be a string"));
  }
  SECTION("an unknown device") {
    m["components"]["m"]["variants"]["cpu"]["device"] = "tpu";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".device: 'tpu' is not one of cpu, gpu, npu"));
  }
  SECTION("a model file escaping with ..") {
    writeText(p.root.parent_path() / "outside_ctx.onnx", "x");
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"]["model_file"] = "../../../outside_ctx.onnx";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".executor_info.ort.model_file") &&
                                    Catch::Contains("escapes the package"));
    fs::remove(p.root.parent_path() / "outside_ctx.onnx");
  }
  SECTION("an absolute variant directory") {
    m["components"]["m"]["variants"]["cpu"]["variant_directory"] = (p.root / "m/cpu").string();
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".variant_directory") && Catch::Contains("absolute path"));
  }
  SECTION("a symbolic link out of the package") {
    fs::create_directory_symlink(fs::temp_directory_path(), p.root / "m/cpu/out");
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"]["model_file"] = "out/x_ctx.onnx";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".executor_info.ort.model_file"));
  }
  SECTION("a missing model file") {
    fs::remove(p.root / "m/cpu/m_ctx.onnx");
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".executor_info.ort.model_file: 'm_ctx.onnx'") &&
                                    Catch::Contains("is not a file in the package"));
  }
  SECTION("a missing variant folder") {
    m["components"]["m"]["variants"]["cpu"]["variant_directory"] = "m/npu";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".variant_directory: 'm/npu'"));
  }
  SECTION("an asset that is not there") {
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"]["session_options"][package::kWeightsFolderOption] =
        "sha256:" + std::string(64, 'a');
    CHECK_THAT(openError(p, m), Catch::Contains(std::string("session_options.") + package::kWeightsFolderOption) &&
                                    Catch::Contains("is not in the package"));
  }
  SECTION("a malformed asset address") {
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"]["session_options"][package::kWeightsFolderOption] =
        "sha256:XYZ";
    CHECK_THAT(openError(p, m), Catch::Contains("'sha256:XYZ' is not a sha256:<64 lower-case hex digits>"));
  }
  SECTION("ep.context_file_path naming another model") {
    writeText(p.root / "m/cpu/other_ctx.onnx", "x");
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"]["session_options"][package::kContextFileOption] =
        "other_ctx.onnx";
    CHECK_THAT(openError(p, m), Catch::Contains(std::string("session_options.") + package::kContextFileOption) &&
                                    Catch::Contains("not the variant's model_file"));
  }
  SECTION("executor_info.ort in an external file that is missing") {
    m["components"]["m"]["variants"]["cpu"]["executor_info"]["ort"] = "ort_info.json";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".executor_info.ort: 'ort_info.json'"));
  }
  SECTION("a source model missing from its asset") {
    m["components"]["m"]["variants"]["cpu"]["additional_metadata"]["ctxkit"]["source_model"] = "other.onnx";
    CHECK_THAT(openError(p, m), Catch::Contains(variant + ".additional_metadata.ctxkit.source_model: 'other.onnx'"));
  }
}
