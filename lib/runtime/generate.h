// Greedy generation with a prefill/decode pair of sessions: the prompt through prefill, then one token at a time
// through decode, each step's present key/value state bound in place as the next step's past
// (docs/runtime.md#generate).
#pragma once

#include "ir/tensor.h"
#include "runtime/session.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ctxkit::runtime {

// One model of the pair and the name its errors give it (a file path, say).
struct PairModel {
  const Session* session = nullptr;
  std::string name;
};

// A decode past input and the present output that feeds it (prefill and decode name their presents alike).
struct KvBinding {
  std::string past;
  std::string present;
};

struct GenerateOptions {
  // The key/value pairs; empty: found by name, every decode input whose name with "past_key_values" or "past" made
  // "present" is a decode output (past_key_0 -> present_key_0, past_key_values.0.key -> present.0.key).
  std::vector<KvBinding> kv;
  // Keep each step's last-position logits in the result (GenerateResult::logits).
  bool keepLogits = false;
};

struct GenerateResult {
  std::vector<int64_t> tokens;      // token i: argmax of step i's last-position logits (step 0 is the prefill)
  std::vector<double> stepMs;       // each step's run and argmax; stepMs[0] is the time to first token
  std::vector<size_t> decodeModel;  // for each decode step (token 1 on), the index of the decode model it ran
  std::vector<ir::Tensor> logits;   // with keepLogits: each step's last-position logits, [batch 1, vocab]
  // Decode steps whose every present was written straight into the buffer the next step reads as its past (all of
  // them when the models' shapes are static, as compiled models' are).
  size_t presentsInPlace = 0;
  double ttftMs() const { return stepMs.empty() ? 0 : stepMs[0]; }
  // Decode throughput: tokens after the first per second of decode steps (0 with fewer than two tokens).
  double decodeTokensPerSecond() const;
};

// Checks a prefill/decode pair once, then generates from prompts. Decode models may be several (shape variants of
// one decode at different past lengths); each step runs the first whose inputs take the current past.
class Generator {
public:
  // Errors name the model and the input or output at fault: a decode input that is neither the token input nor a
  // past with a matching present, a present the prefill lacks, types or ranks that differ between the pair.
  static Expected<Generator> create(PairModel prefill, std::vector<PairModel> decodes, GenerateOptions options = {});

  // `prompt`: int64 [1, S]. Generates `count` tokens (count - 1 decode steps). `onStep(i, result)` is called after
  // token i. A past length no decode model takes fails the run, naming the lengths they take.
  Expected<GenerateResult> run(const ir::Tensor& prompt, size_t count,
                               const std::function<void(size_t, const GenerateResult&)>& onStep = {}) const;

  // The prompt's rule: int64 token ids of shape [1, S], S >= 1 (one sequence: the loop runs batch 1).
  static Status checkPrompt(const ir::Tensor& prompt);

  const std::vector<KvBinding>& kv() const { return kv_; }
  const std::string& tokenInput() const { return tokenInput_; }
  const std::string& logitsOutput() const { return logitsOutput_; }

  // How a model's inputs and outputs are fed and read (internal, per model of the pair).
  struct Layout {
    size_t token = 0;                     // input index of the token ids
    std::vector<size_t> pastInputs;       // per kv pair, input index (decode only)
    std::vector<size_t> presentOutputs;   // per kv pair, output index
    std::optional<size_t> attentionMask;  // int64 [1, past + S] of ones
    std::optional<size_t> positionIds;    // int64 [1, S]: past .. past + S - 1
    size_t logits = 0;                    // output index
  };

private:
  Generator() = default;
  PairModel prefill_;
  std::vector<PairModel> decodes_;
  GenerateOptions options_;
  std::vector<KvBinding> kv_;
  std::string tokenInput_, logitsOutput_;
  Layout prefillLayout_;
  std::vector<Layout> decodeLayouts_;
  std::vector<size_t> growAxis_;  // per kv pair: the axis along which the cache grows
};

}  // namespace ctxkit::runtime
