// Models with If/Loop/Scan (issue 30 point 8): every _ctx.onnx ctxgen writes for them loads in ONNX Runtime, which
// infers every branch at load, and ORT + ctxkit on it matches ORT's CPU EP on the source, including silero VAD bound
// to 1x512 without its sample rate (a branch that cannot run with that shape, which ORT refused to load).
#include <catch2/catch.hpp>

#include "../common/control_flow_models.h"
#include "../common/material.h"
#include "onnx_io/onnx_io.h"
#include "ort_harness.h"
#include "tool_runner.h"

#include <algorithm>
#include <iostream>

using namespace ctxkit;
using namespace ctxkit::ort_test;
using ctxkit::testing::TempDir;
namespace fs = std::filesystem;

TEST_CASE("models with If/Loop/Scan: ctxgen's _ctx.onnx loads in ORT + ctxkit and matches ORT's CPU EP on the source",
          "[subgraphs]") {
  struct SubgraphModel {
    std::string path;                 // under the cache
    std::vector<std::string> ctxgen;  // binding options
    FeedOverrides feeds;
    // Detectors on random images: near-tied boxes decoded through exp() differ past fp32 tolerances, so only the
    // outputs' count, types and shapes are checked here; tests/oracle/torch_corpus.sh compares their detections on
    // the exported images.
    bool compareValues = true;
    // Graph inputs the compiled model must leave open: a branch that cannot run with their bound shapes reads them.
    std::vector<std::string> openInputs = {};
  };
  const fs::path cache = fs::path(CTXKIT_MODELS_DIR).parent_path().parent_path().parent_path().parent_path();
  const FeedOverrides silero{{{"input", {1, 512}}, {"state", {2, 1, 128}}}, {{"sr", 16000}}};
  const std::vector<SubgraphModel> models = {
      // The sample rate left open: the 8 kHz branch cannot run with 512 samples, and ORT checks it at load.
      {"models/silero-vad-1.0.3/package/weights/silero_vad.onnx", {"--shape", "input=1x512"}, silero, true, {"input"}},
      {"models/silero-vad-1.0.3/package/weights/silero_vad.onnx",
       {"--shape", "input=1x512", "--shape", "state=2x1x128"},
       silero,
       true,
       {"input", "state"}},
      {"models/silero-vad-1.0.3/package/weights/silero_vad_16k_op15.onnx", {"--shape", "input=1x512"}, silero},
      {"models/silero-vad-1.0.3/package/weights/silero_vad_half.onnx",
       {"--shape", "input=1x512", "--shape", "state=2x1x128"},
       silero},
      {"models/silero-vad-1.0.3/package/weights/silero_vad_op18_ifless.onnx", {"--shape", "input=1x512"}, silero},
      {"corpus-torch/ssdlite320_mobilenet_v3_large/model.onnx", {}, {}, false},
      {"corpus-torch/fasterrcnn_mobilenet_v3_large_320_fpn/model.onnx", {}, {}, false},
  };
  TempDir out("ort_ep_subgraphs");
  size_t ran = 0, n = 0;
  for (const auto& m : models)
    for (const std::string target : {"npu-sim", "cpu"}) {
    const fs::path model = cache / m.path;
    if (!fs::exists(model)) {
      if (ctxkit::test::materialRequired()) FAIL(model.string() << " is not in the cache and CI is set");
      std::cout << "ort_ep: model not in the cache (" << model << "): run scripts/fetch_test_assets.sh\n";
      continue;
    }
    const fs::path dir = out / std::to_string(n++);
    std::vector<std::string> args = {model.string(), "-o", dir.string(), "-q", "--target", target};
    args.insert(args.end(), m.ctxgen.begin(), m.ctxgen.end());
    ctxkit::testing::runToolOk(CTXKIT_CTXGEN, args);
    const fs::path ctx = dir / (model.stem().string() + "_ctx.onnx");
    std::string what = (model.parent_path().filename() / model.filename()).string() + " --target " + target;
    for (const auto& a : m.ctxgen) what += " " + a;
    INFO(what);
    std::optional<Ort::Session> ours;
    takeLogMessages();
    try {
      ours.emplace(ctxkitSession(ctx));
    } catch (const Ort::Exception& e) {
      FAIL_CHECK("ORT + ctxkit refuses " << ctx << ": " << e.what());
      continue;
    }
    // Shapes ORT infers agree with what the model declares (else it warns "Error merging shape info").
    for (const auto& line : takeLogMessages()) CHECK(line.find("Error merging shape info") == std::string::npos);
    Ort::AllocatorWithDefaultOptions allocator;
    for (size_t i = 0; i < ours->GetInputCount(); ++i) {
      const std::string name = ours->GetInputNameAllocated(i, allocator).get();
      const std::vector<int64_t> shape = ours->GetInputTypeInfo(i).GetTensorTypeAndShapeInfo().GetShape();
      const bool open = std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; });
      const bool wanted = std::find(m.openInputs.begin(), m.openInputs.end(), name) != m.openInputs.end();
      INFO("input " << name);
      if (wanted) CHECK(open);
    }
    Ort::Session reference = cpuSession(model);
    Feeds feeds = makeFeeds(*ours, 5, m.feeds);
    const std::vector<Ort::Value> actual = run(*ours, feeds), expected = run(reference, feeds);
    Comparison c = compare(actual, expected);
    INFO(c.detail);
    if (m.compareValues) {
      CHECK(c.ok);
    } else {
      REQUIRE(actual.size() == expected.size());
      for (size_t i = 0; i < actual.size(); ++i) {
        CHECK(actual[i].GetTensorTypeAndShapeInfo().GetElementType() ==
              expected[i].GetTensorTypeAndShapeInfo().GetElementType());
        CHECK(actual[i].GetTensorTypeAndShapeInfo().GetShape() == expected[i].GetTensorTypeAndShapeInfo().GetShape());
      }
    }
    std::cout << "ort_ep: " << what << ": ORT loads the _ctx.onnx, max |diff| " << c.maxAbsDiff << " over "
              << c.elements << " elements" << (m.compareValues ? "" : " (shapes checked)") << "\n";
    ++ran;
  }
  std::cout << "ort_ep: " << ran << " of " << 2 * models.size()
            << " compiles (models with subgraphs, both targets) ran in ORT + ctxkit\n";
}

// The control-flow models of the runtime tests (tests/common/control_flow_models.h), whose outputs were worked out by
// hand and which runtime_test checks ctxkit's Session against: ONNX Runtime's CPU EP gives those outputs too.
TEST_CASE("control-flow models built in tests: ORT's CPU EP gives the outputs worked out by hand", "[subgraphs]") {
  TempDir out("ort_ep_control_flow");
  Ort::MemoryInfo memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  for (const auto& c : ctxkit::testing::control_flow::cases()) {
    INFO(c.name);
    const fs::path source = out / (c.name + ".onnx");
    REQUIRE(onnx_io::saveModel(c.model, source));
    Feeds feeds;
    feeds.buffers.reserve(c.feeds.size());  // the values point into the buffers
    for (size_t i = 0; i < c.feeds.size(); ++i) {
      const ir::Tensor& t = c.feeds[i];
      feeds.names.push_back(c.model.graph.inputs[i].name);
      feeds.buffers.emplace_back(t.bytes().begin(), t.bytes().end());
      const ONNXTensorElementDataType type = t.type() == ir::ElemType::Float  ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
                                             : t.type() == ir::ElemType::Bool ? ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL
                                                                              : ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
      feeds.values.push_back(Ort::Value::CreateTensor(memory, feeds.buffers.back().data(), feeds.buffers.back().size(),
                                                      t.shape().data(), t.rank(), type));
    }
    Ort::Session reference = cpuSession(source);
    const std::vector<Ort::Value> outputs = run(reference, feeds);
    REQUIRE(outputs.size() == c.expected.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      INFO("output " << k);
      const auto info = outputs[k].GetTensorTypeAndShapeInfo();
      REQUIRE(info.GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
      const float* data = outputs[k].GetTensorData<float>();
      CHECK(std::vector<float>(data, data + info.GetElementCount()) == c.expected[k]);
    }
  }
}
