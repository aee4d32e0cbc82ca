// Helpers for the loader-rule tests (docs/bad-input.md#loader-rules): a real deployment made by ctxgen, copied per
// case, whose `.bin` (or `_ctx.onnx`) is broken on purpose and then fed to the real ctxinspect and ctxrun.
#pragma once

#include "../e2e/tool_runner.h"
#include "../format/container_test_util.h"
#include "../format/rebind_util.h"
#include "onnx_io/onnx_io.h"
#include "program/program.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace ctxkit::loader_rules {

namespace fs = std::filesystem;
using testing::runTool;
using testing::TempDir;
using testing::ToolResult;

inline const std::string kPrefillModel = "tiny_prefill_ctx.onnx";
inline const std::string kDecodeModel = "tiny_decode_ctx.onnx";
inline const std::string kBinName = "tiny_prefill_ctxkit.bin";

inline std::string sampleModel(const std::string& stem) {
  return (fs::path(CTXKIT_SAMPLES_DIR) / (stem + ".onnx")).string();
}

// The sample pair compiled with --share, made once per test process and never modified.
inline const fs::path& pristineDeployment() {
  static TempDir dir("loader_rules_pristine");
  static const bool made = [] {
    auto r = runTool(CTXKIT_CTXGEN, {sampleModel("tiny_prefill") + "," + sampleModel("tiny_decode"), "--share", "-o",
                                     dir.path().string()});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    return true;
  }();
  (void)made;
  return dir.path();
}

inline void writeBytes(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Runs a tool and expects a clean rejection: exit code 1 (not a crash, not a usage error) and every fragment
// somewhere in its output.
inline void expectToolRejects(const std::string& tool, const std::vector<std::string>& args,
                              const std::vector<std::string>& fragments) {
  ToolResult r = runTool(tool, args);
  std::string all = r.out + r.err;
  INFO(fs::path(tool).filename().string() << " output:\n" << all);
  CHECK(r.exitCode == 1);
  for (const auto& f : fragments) CHECK_THAT(all, Catch::Contains(f));
}

inline void expectToolAccepts(const std::string& tool, const std::vector<std::string>& args) {
  ToolResult r = runTool(tool, args);
  INFO(fs::path(tool).filename().string() << " output:\n" << r.out << r.err);
  CHECK(r.exitCode == 0);
}

// One case: a private copy of the pristine deployment whose `.bin` bytes the test breaks.
class Crafted {
public:
  Crafted() : dir_("loader_rule") {
    for (const auto& e : fs::directory_iterator(pristineDeployment())) fs::copy(e.path(), dir_ / e.path().filename().string());
    bytes = format::testing::readAll(bin());
  }

  fs::path bin() const { return dir_ / kBinName; }
  fs::path model(const std::string& name = kPrefillModel) const { return dir_ / name; }
  const fs::path& dir() const { return dir_.path(); }

  // Writes `bytes` over the `.bin`, and binds the models to it as ctxgen would have (format::testing::rebind), so
  // that a load reaches the rule under test instead of stopping at "not the binary this model was written with".
  void writeBin() const {
    writeBytes(bin(), bytes);
    for (const auto& m : {kPrefillModel, kDecodeModel}) format::testing::rebind(model(m), bytes, kBinName);
  }

  // Writes `bytes` over the `.bin` and expects both tools to refuse the deployment with a message that names
  // the file and contains every fragment (what and where, the value found and the one expected).
  void expectRejected(std::vector<std::string> fragments) const {
    writeBin();
    fragments.push_back(kBinName);
    expectToolRejects(CTXKIT_CTXINSPECT, {model().string(), "--verify"}, fragments);
    expectToolRejects(CTXKIT_CTXRUN, {model().string()}, fragments);
  }

  // Field edits of the `.bin` bytes that return the edited entry. Each re-seals the checksum where the header
  // still allows computing it, so the reader gets past the checksum to the rule under test.
  template <typename Edit>
  format::layout::FileHeader editHeader(Edit edit) {
    return editEntry([](auto& b) { return format::testing::getHeader(b); },
                     [](auto& b, const auto& h) { format::testing::setHeader(b, h); }, edit);
  }
  template <typename Edit>
  format::layout::WeightEntry editWeight(size_t i, Edit edit) {
    return editEntry([i](auto& b) { return format::testing::getWeight(b, i); },
                     [i](auto& b, const auto& w) { format::testing::setWeight(b, i, w); }, edit);
  }
  template <typename Edit>
  format::layout::GraphEntry editGraph(size_t i, Edit edit) {
    return editEntry([i](auto& b) { return format::testing::getGraph(b, i); },
                     [i](auto& b, const auto& g) { format::testing::setGraph(b, i, g); }, edit);
  }

  std::vector<std::byte> bytes;

private:
  template <typename Get, typename Set, typename Edit>
  auto editEntry(Get get, Set set, Edit edit) {
    auto entry = get(bytes);
    edit(entry);
    set(bytes, entry);
    format::testing::reseal(bytes);
    return entry;
  }

  TempDir dir_;
};

// The real container re-written through the library writer with the same compatibility block, alignment,
// weights and graphs, after `edit` had its way with each graph (name, source model, program bytes).
struct GraphEdit {
  size_t index;
  std::string name;
  std::string source;
  std::vector<std::byte> program;
};
inline std::vector<std::byte> rebuild(const std::vector<std::byte>& real, const std::function<void(GraphEdit&)>& edit) {
  auto view = format::testing::openBytes(real, "real.bin");
  REQUIRE(view.isOk());
  // A weightless container stays one: its weights in source models and its pins are kept.
  format::ContainerWriter writer(view->compat(), format::WriterOptions{view->alignment(), view->weightless()});
  for (size_t i = 0; i < view->weights().size(); ++i) {
    const format::WeightInfo& w = view->weights()[i];
    if (w.inSource()) REQUIRE(writer.addSourceWeight(w.type, w.shape, w.hash, w.sources).isOk());
    else REQUIRE(writer.addWeight(w.type, w.shape, view->weightBytes(i), w.hash).isOk());
  }
  for (const auto& pin : view->sourcePins()) REQUIRE(writer.addSourcePin(pin).isOk());
  for (size_t g = 0; g < view->graphs().size(); ++g) {
    auto program = view->programBytes(g);
    GraphEdit e{g, view->graphs()[g].name, view->graphs()[g].sourceModel, {program.begin(), program.end()}};
    edit(e);
    // A program that holds load-time tensors keeps the container's flag for them (an edited one may not decode).
    auto decoded = program::deserialize(e.program, view->weights().size(), e.name);
    const bool loadTime = view->loadTimeTensors() && (!decoded || program::hasLoadTimeTensors(*decoded));
    REQUIRE(writer.addGraph(e.name, e.source, std::move(e.program), loadTime).isOk());
  }
  auto out = writer.serialize();
  REQUIRE(out.isOk());
  return std::move(out).value();
}

// Index of the last graph that came from `sourceModel`.
inline size_t lastGraphOf(const std::vector<std::byte>& real, const std::string& sourceModel) {
  auto view = format::testing::openBytes(real, "real.bin");
  REQUIRE(view.isOk());
  std::optional<size_t> found;
  for (size_t g = 0; g < view->graphs().size(); ++g)
    if (view->graphs()[g].sourceModel == sourceModel) found = g;
  REQUIRE(found.has_value());
  return *found;
}

// Replaces one attribute string of every EPContext node of a `_ctx.onnx` in place.
inline void editContextNodes(const fs::path& model, const std::function<void(ir::Node&)>& edit) {
  auto m = onnx_io::loadModel(model, onnx_io::LoadOptions{false});
  REQUIRE(m.isOk());
  for (auto& n : m->graph.nodes)
    if (n.opType == "EPContext") edit(n);
  REQUIRE(onnx_io::saveModel(*m, model).isOk());
}

}  // namespace ctxkit::loader_rules
