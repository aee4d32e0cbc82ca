// How an ONNX Runtime application uses ctxkit: register libctxkit_ep.so, pick ctxkit's device (explicitly, or by a
// PREFER_NPU policy), optionally compile a plain model through ORT's compile API, run the _ctx.onnx, and optionally
// compare with ORT's CPU EP on the source model and time session creation and runs both ways.
//
//   ctxkit_ort_app MODEL_ctx.onnx --ep-library PATH/libctxkit_ep.so [--device cpu|npu|prefer-npu]
//   ctxkit_ort_app MODEL.onnx --compile-to OUT_ctx.onnx --ep-library PATH/libctxkit_ep.so [...]
//                  [--source MODEL.onnx] [--bench N] [--threads N] [--shape INPUT=AxBxC] [--disable-telemetry]
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr const char* kEpName = "CtxKitExecutionProvider";

struct Args {
  std::string model, source, epLibrary, device = "cpu", threads = "1", compileTo;
  int bench = 0;
  bool telemetry = true;
  std::map<std::string, std::vector<int64_t>> shapes;  // --shape, for inputs the model leaves dynamic
};

bool parseShape(const std::string& spec, Args& a) {
  auto eq = spec.find('=');
  if (eq == std::string::npos) return false;
  std::vector<int64_t> dims;
  std::stringstream in(spec.substr(eq + 1));
  for (std::string d; std::getline(in, d, 'x');) dims.push_back(std::atoll(d.c_str()));
  a.shapes[spec.substr(0, eq)] = dims;
  return !dims.empty();
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (s == "--ep-library") a.epLibrary = next();
    else if (s == "--device") a.device = next();
    else if (s == "--source") a.source = next();
    else if (s == "--compile-to") a.compileTo = next();
    else if (s == "--threads") a.threads = next();
    else if (s == "--bench") a.bench = std::atoi(next().c_str());
    else if (s == "--disable-telemetry") a.telemetry = false;
    else if (s == "--shape") {
      if (!parseShape(next(), a)) return false;
    }
    else if (!s.empty() && s[0] != '-' && a.model.empty()) a.model = s;
    else return false;
  }
  return !a.model.empty() && !a.epLibrary.empty() &&
         (a.device == "cpu" || a.device == "npu" || a.device == "prefer-npu");
}

// Step 2: session options that put ctxkit first. ORT's CPU EP runs whatever ctxkit does not claim.
Ort::SessionOptions ctxkitOptions(Ort::Env& env, const Args& args) {
  Ort::SessionOptions options;
  options.SetIntraOpNumThreads(1);
  options.AddConfigEntry("session.intra_op.allow_spinning", "0");
  if (args.device == "prefer-npu") {
    // Automatic selection: ctxkit's factory offers a virtual NPU, so this policy picks ctxkit.
    options.SetEpSelectionPolicy(OrtExecutionProviderDevicePolicy_PREFER_NPU);
    return options;
  }
  // Explicit selection: ctxkit's EP device on the host CPU or on its virtual NPU.
  OrtHardwareDeviceType wanted = args.device == "npu" ? OrtHardwareDeviceType_NPU : OrtHardwareDeviceType_CPU;
  std::vector<Ort::ConstEpDevice> chosen;
  for (const auto& d : env.GetEpDevices())
    if (std::strcmp(d.EpName(), kEpName) == 0 && d.Device().Type() == wanted) chosen.push_back(d);
  if (chosen.empty()) throw std::runtime_error(std::string("no ") + kEpName + " device of the asked type");
  std::unordered_map<std::string, std::string> epOptions{{"threads", args.threads}};
  options.AppendExecutionProvider_V2(env, chosen, epOptions);
  return options;
}

Ort::SessionOptions cpuOptions() {
  Ort::SessionOptions options;
  options.SetIntraOpNumThreads(1);
  options.AddConfigEntry("session.intra_op.allow_spinning", "0");
  return options;
}

// Seeded float inputs with the compiled model's static shapes (floats uniform in [-1, 1)).
struct Inputs {
  std::vector<std::string> names;
  std::vector<std::vector<float>> data;
  std::vector<Ort::Value> values;
};

Inputs makeInputs(Ort::Session& session, const Args& args) {
  Inputs in;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Ort::AllocatorWithDefaultOptions allocator;
  auto cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  in.data.resize(session.GetInputCount());
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    in.names.push_back(session.GetInputNameAllocated(i, allocator).get());
    Ort::TypeInfo type = session.GetInputTypeInfo(i);
    auto info = type.GetTensorTypeAndShapeInfo();
    if (info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
      throw std::runtime_error("this sample feeds float inputs only; input '" + in.names.back() + "' is not float");
    std::vector<int64_t> shape = info.GetShape();
    if (auto it = args.shapes.find(in.names.back()); it != args.shapes.end()) shape = it->second;
    size_t n = 1;
    for (auto& d : shape) n *= static_cast<size_t>(d = std::max<int64_t>(d, 1));
    in.data[i].resize(n);
    for (auto& v : in.data[i]) v = uniform(rng);
    in.values.push_back(Ort::Value::CreateTensor<float>(cpu, in.data[i].data(), n, shape.data(), shape.size()));
  }
  return in;
}

std::vector<Ort::Value> run(Ort::Session& session, Inputs& in) {
  Ort::AllocatorWithDefaultOptions allocator;
  std::vector<std::string> outNames;
  for (size_t i = 0; i < session.GetOutputCount(); ++i) outNames.push_back(session.GetOutputNameAllocated(i, allocator).get());
  std::vector<const char*> inPtrs, outPtrs;
  for (auto& n : in.names) inPtrs.push_back(n.c_str());
  for (auto& n : outNames) outPtrs.push_back(n.c_str());
  return session.Run(Ort::RunOptions{nullptr}, inPtrs.data(), in.values.data(), inPtrs.size(), outPtrs.data(), outPtrs.size());
}

// The largest |difference| between two runs' float outputs; integer and bool outputs must be equal. Empty `why` when
// comparable, else the reason (a detector's output count depends on its scores, which float rounding may move).
template <typename T> bool sameElements(const Ort::Value& a, const Ort::Value& b, size_t n) {
  return std::equal(a.GetTensorData<T>(), a.GetTensorData<T>() + n, b.GetTensorData<T>());
}

double maxAbsDiff(const std::vector<Ort::Value>& a, const std::vector<Ort::Value>& b, std::string& why) {
  double worst = 0;
  if (a.size() != b.size()) why = std::to_string(a.size()) + " outputs against " + std::to_string(b.size());
  for (size_t i = 0; why.empty() && i < a.size(); ++i) {
    auto ia = a[i].GetTensorTypeAndShapeInfo(), ib = b[i].GetTensorTypeAndShapeInfo();
    const auto type = ia.GetElementType();
    const size_t n = ia.GetElementCount();
    if (ia.GetShape() != ib.GetShape() || type != ib.GetElementType()) {
      why = "output " + std::to_string(i) + " differs in shape or type";
    } else if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      const float* pa = a[i].GetTensorData<float>();
      const float* pb = b[i].GetTensorData<float>();
      for (size_t e = 0; e < n; ++e) worst = std::max(worst, static_cast<double>(std::fabs(pa[e] - pb[e])));
    } else if (!(type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64   ? sameElements<int64_t>(a[i], b[i], n)
                 : type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ? sameElements<int32_t>(a[i], b[i], n)
                 : type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL  ? sameElements<bool>(a[i], b[i], n)
                                                               : false)) {
      why = "output " + std::to_string(i) + " (not float) differs";
    }
  }
  return worst;
}

template <typename F>
double medianMs(int n, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::cerr << "usage: ctxkit_ort_app MODEL_ctx.onnx --ep-library PATH [--device cpu|npu|prefer-npu] "
                 "[--source MODEL.onnx] [--compile-to OUT_ctx.onnx] [--bench N] [--threads N] [--shape INPUT=AxBxC] "
                 "[--disable-telemetry]\n";
    return 2;
  }
  int status = 0;
  try {
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ctxkit_ort_app");
    // ORT's own telemetry writes an event per session creation (on Linux into a SQLite file in the user's cache
    // folder, synced to disk): about 0.1 ms of every session, whichever EP runs it.
    if (!args.telemetry) env.DisableTelemetryEvents();
    // Step 1: register the library. The ".virtual" suffix lets its factory create the virtual NPU device.
    env.RegisterExecutionProviderLibrary("ctxkit.virtual", args.epLibrary);
    for (const auto& d : env.GetEpDevices())
      if (std::strcmp(d.EpName(), kEpName) == 0)
        std::cout << "device: " << d.EpName() << " by " << d.EpVendor() << " " << d.EpMetadata().GetValue("version")
                  << " on " << (d.Device().Type() == OrtHardwareDeviceType_NPU ? "NPU (virtual)" : "CPU") << "\n";

    Ort::SessionOptions options = ctxkitOptions(env, args);
    if (!args.compileTo.empty()) {
      // Optional: compile a plain model with ctxkit through ORT's compile API (_ctx.onnx + _ctxkit.bin beside it).
      Ort::ModelCompilationOptions compile(env, options);
      compile.SetInputModelPath(args.model.c_str());
      compile.SetOutputModelPath(args.compileTo.c_str());
      compile.SetEpContextEmbedMode(false);
      Ort::Status status = Ort::CompileModel(env, compile);
      if (!status.IsOK()) throw std::runtime_error("compiling " + args.model + ": " + status.GetErrorMessage());
      std::cout << "compiled " << args.model << " -> " << args.compileTo << "\n";
      if (args.source.empty()) args.source = args.model;
      args.model = args.compileTo;
    }

    // Step 3: a session on the compiled model, and a run.
    Ort::Session session(env, args.model.c_str(), options);
    Inputs inputs = makeInputs(session, args);
    std::vector<Ort::Value> outputs = run(session, inputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto info = outputs[i].GetTensorTypeAndShapeInfo();
      std::cout << "output " << i << ": " << info.GetElementCount() << " values\n";
    }

    if (!args.source.empty()) {  // the same inputs through ORT's CPU EP on the source model
      Ort::SessionOptions cpu = cpuOptions();
      Ort::Session reference(env, args.source.c_str(), cpu);
      std::string why;
      double diff = maxAbsDiff(outputs, run(reference, inputs), why);
      if (!why.empty()) {
        // The timings below are still worth having (--bench), but the run fails.
        std::cout << "max |diff| vs ORT's CPU EP on the source: n/a (" << why << ")\n";
        std::cerr << "outputs of the two sessions cannot be compared: " << why << "\n";
        status = 3;
      } else {
        std::cout << "max |diff| vs ORT's CPU EP on the source: " << diff << "\n";
      }
      if (args.bench > 0) {
        // Session creation while another session on the model lives (the one above: ctxkit shares its loaded
        // context with it), and alone (ep.share_ep_contexts=0: each session loads its own, as the first one does).
        Ort::SessionOptions alone = ctxkitOptions(env, args);
        alone.AddConfigEntry("ep.share_ep_contexts", "0");
        double createCtx = medianMs(args.bench, [&] { Ort::Session s(env, args.model.c_str(), options); });
        double createCpu = medianMs(args.bench, [&] { Ort::Session s(env, args.source.c_str(), cpu); });
        double createAlone = medianMs(args.bench, [&] { Ort::Session s(env, args.model.c_str(), alone); });
        // Creation and the first run together (ctxkit alone, without sharing).
        double firstCtx = medianMs(args.bench, [&] {
          Ort::Session s(env, args.model.c_str(), alone);
          run(s, inputs);
        });
        double firstCpu = medianMs(args.bench, [&] {
          Ort::Session s(env, args.source.c_str(), cpu);
          run(s, inputs);
        });
        double runCtx = medianMs(args.bench * 4, [&] { run(session, inputs); });
        double runCpu = medianMs(args.bench * 4, [&] { run(reference, inputs); });
        std::cout << "session creation (median of " << args.bench << "): ctxkit " << createCtx << " ms, ORT CPU EP on the source "
                  << createCpu << " ms, ratio " << createCpu / createCtx << "x\n";
        std::cout << "session creation unshared (median of " << args.bench << "): ctxkit " << createAlone
                  << " ms, ratio " << createCpu / createAlone << "x\n";
        std::cout << "creation + first run unshared (median of " << args.bench << "): ctxkit " << firstCtx
                  << " ms, ORT CPU EP on the source " << firstCpu << " ms, ratio " << firstCpu / firstCtx << "x\n";
        std::cout << "run (median of " << args.bench * 4 << "): ctxkit " << runCtx << " ms, ORT CPU EP " << runCpu << " ms\n";
      }
    }
    return status;
  } catch (const Ort::Exception& e) {
    std::cerr << "onnxruntime: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 1;
}
