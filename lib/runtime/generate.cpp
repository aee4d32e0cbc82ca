// The greedy generate loop over a prefill/decode pair: finding the token, logits and key/value values by name,
// choosing the decode model each past length fits, and double-buffering the key/value state.
#include "runtime/generate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

namespace ctxkit::runtime {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kAttentionMask = "attention_mask";
constexpr std::string_view kPositionIds = "position_ids";

std::string quoted(const PairModel& m, std::string_view role) { return fmt::format("{} '{}'", role, m.name); }

std::optional<size_t> findValue(const std::vector<ir::ValueInfo>& values, std::string_view name) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name) return i;
  return std::nullopt;
}

std::string names(const std::vector<ir::ValueInfo>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(fmt::format("'{}'", v.name));
  return out.empty() ? std::string("none") : fmt::format("{}", fmt::join(out, ", "));
}

std::string declared(const ir::ValueInfo& v) {
  return fmt::format("{} {}", ir::elemTypeName(v.type), ir::dimsToString(v.shape));
}

// The present output a past input feeds from, by the exporters' names: past_key_values.0.key -> present.0.key,
// past_key_0 -> present_key_0, past.0.key -> present.0.key.
std::vector<std::string> presentCandidates(const std::string& past) {
  std::vector<std::string> out;
  for (std::string_view from : {"past_key_values", "past"})
    if (auto at = past.find(from); at != std::string::npos)
      out.push_back(past.substr(0, at) + "present" + past.substr(at + from.size()));
  return out;
}

// Whether a value of `shape` may be fed to an input declared `info` (unknown dimensions take any value).
bool accepts(const ir::ValueInfo& info, std::span<const int64_t> shape) {
  if (!info.shape) return true;
  if (info.shape->size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if ((*info.shape)[d].isKnown() && (*info.shape)[d].value != shape[d]) return false;
  return true;
}

// The one axis along which a decode model's declared past and present differ (the cache's growth), if exactly one.
std::optional<size_t> growthAxis(const ir::ValueInfo& past, const ir::ValueInfo& present) {
  if (!past.shape || !present.shape || past.shape->size() != present.shape->size()) return std::nullopt;
  std::optional<size_t> axis;
  for (size_t d = 0; d < past.shape->size(); ++d) {
    const ir::Dim &a = (*past.shape)[d], &b = (*present.shape)[d];
    const bool same = a.isKnown() || b.isKnown() ? a.value == b.value : a.symbol == b.symbol && !a.symbol.empty();
    if (same) continue;
    if (axis) return std::nullopt;
    axis = d;
  }
  return axis;
}

Expected<ir::Tensor> int64Tensor(ir::Shape shape, int64_t first, int64_t step) {
  CTX_ASSIGN_OR_RETURN(ir::Tensor t, ir::Tensor::allocate(ir::ElemType::Int64, std::move(shape)));
  int64_t* p = t.mutableDataAs<int64_t>();
  for (uint64_t i = 0; i < t.elementCount(); ++i) p[i] = first + static_cast<int64_t>(i) * step;
  return t;
}

// The index of the largest of the last `vocab` values (the first of equal ones; NaN never wins).
int64_t argmaxLast(const ir::Tensor& logits, size_t vocab) {
  const float* row = logits.dataAs<float>() + (logits.elementCount() - vocab);
  size_t best = 0;
  for (size_t i = 1; i < vocab; ++i)
    if (row[i] > row[best] || (row[best] != row[best] && row[i] == row[i])) best = i;
  return static_cast<int64_t>(best);
}

}  // namespace

double GenerateResult::decodeTokensPerSecond() const {
  double ms = 0;
  for (size_t i = 1; i < stepMs.size(); ++i) ms += stepMs[i];
  return stepMs.size() < 2 || ms <= 0 ? 0 : 1000.0 * static_cast<double>(stepMs.size() - 1) / ms;
}

Expected<Generator> Generator::create(PairModel prefill, std::vector<PairModel> decodes, GenerateOptions options) {
  if (!prefill.session) return makeError(ErrorCode::InvalidArgument, "generate: no prefill model");
  if (decodes.empty()) return makeError(ErrorCode::InvalidArgument, "generate: no decode model");
  for (const auto& d : decodes)
    if (!d.session) return makeError(ErrorCode::InvalidArgument, "generate: decode '{}' is not loaded", d.name);
  Generator g;
  g.prefill_ = std::move(prefill);
  g.decodes_ = std::move(decodes);
  g.options_ = std::move(options);
  const PairModel& first = g.decodes_[0];
  const auto& firstIn = first.session->inputs();
  const auto& firstOut = first.session->outputs();

  // The key/value pairs: given, or every past input of the first decode whose present it outputs.
  if (!g.options_.kv.empty()) {
    for (const auto& kv : g.options_.kv) {
      if (!findValue(firstIn, kv.past))
        return makeError(ErrorCode::InvalidArgument, "{} has no input '{}' (inputs: {})", quoted(first, "decode"),
                         kv.past, names(firstIn));
      if (!findValue(firstOut, kv.present))
        return makeError(ErrorCode::InvalidArgument, "{} has no output '{}' (outputs: {})", quoted(first, "decode"),
                         kv.present, names(firstOut));
    }
    g.kv_ = g.options_.kv;
  } else {
    for (const auto& in : firstIn)
      for (const auto& present : presentCandidates(in.name))
        if (findValue(firstOut, present)) {
          g.kv_.push_back({in.name, present});
          break;
        }
    if (g.kv_.empty())
      return makeError(ErrorCode::InvalidGraph,
                       "{} has no past key/value input with a present output of the matching name (past_key_0 -> "
                       "present_key_0, past_key_values.0.key -> present.0.key; inputs: {}; outputs: {}): name the "
                       "pairs (ctxrun --kv PAST=PRESENT)",
                       quoted(first, "decode"), names(firstIn), names(firstOut));
  }
  auto isPast = [&](const std::string& name) {
    return std::any_of(g.kv_.begin(), g.kv_.end(), [&](const KvBinding& kv) { return kv.past == name; });
  };
  auto isPresent = [&](const std::string& name) {
    return std::any_of(g.kv_.begin(), g.kv_.end(), [&](const KvBinding& kv) { return kv.present == name; });
  };

  // The token input: input_ids, else the first decode's only other int64 input.
  if (findValue(firstIn, "input_ids")) {
    g.tokenInput_ = "input_ids";
  } else {
    std::vector<std::string> candidates;
    for (const auto& in : firstIn)
      if (in.type == ir::ElemType::Int64 && !isPast(in.name) && in.name != kAttentionMask && in.name != kPositionIds)
        candidates.push_back(in.name);
    if (candidates.size() != 1)
      return makeError(ErrorCode::InvalidGraph,
                       "{} has no input 'input_ids' and {} other int64 inputs to take the token ids from (inputs: {})",
                       quoted(first, "decode"), candidates.size(), names(firstIn));
    g.tokenInput_ = candidates[0];
  }
  // The logits: the output named so, else the first decode's first output that is not a present.
  if (findValue(firstOut, "logits")) {
    g.logitsOutput_ = "logits";
  } else {
    for (const auto& out : firstOut)
      if (!isPresent(out.name)) {
        g.logitsOutput_ = out.name;
        break;
      }
    if (g.logitsOutput_.empty())
      return makeError(ErrorCode::InvalidGraph, "{} has no output besides its presents to read the logits from",
                       quoted(first, "decode"));
  }

  // Each model's layout; a model that lacks one of the values, or has an input the loop cannot feed, is refused.
  auto layoutOf = [&](const PairModel& m, bool decode) -> Expected<Layout> {
    const std::string who = quoted(m, decode ? "decode" : "prefill");
    const auto& ins = m.session->inputs();
    const auto& outs = m.session->outputs();
    Layout l;
    auto token = findValue(ins, g.tokenInput_);
    if (!token)
      return makeError(ErrorCode::InvalidGraph, "{} has no token input '{}' (inputs: {})", who, g.tokenInput_,
                       names(ins));
    if (ins[*token].type != ir::ElemType::Int64)
      return makeError(ErrorCode::InvalidGraph, "{}: token input '{}' is {}, expected int64", who, g.tokenInput_,
                       declared(ins[*token]));
    l.token = *token;
    auto logits = findValue(outs, g.logitsOutput_);
    if (!logits)
      return makeError(ErrorCode::InvalidGraph, "{} has no logits output '{}' (outputs: {})", who, g.logitsOutput_,
                       names(outs));
    if (outs[*logits].type != ir::ElemType::Float)
      return makeError(ErrorCode::Unsupported, "{}: logits output '{}' is {}; the generate loop reads float32", who,
                       g.logitsOutput_, declared(outs[*logits]));
    l.logits = *logits;
    for (const auto& kv : g.kv_) {
      auto present = findValue(outs, kv.present);
      if (!present)
        return makeError(ErrorCode::InvalidGraph, "{} has no output '{}' for the decode input '{}' (outputs: {})", who,
                         kv.present, kv.past, names(outs));
      l.presentOutputs.push_back(*present);
      if (!decode) continue;
      auto past = findValue(ins, kv.past);
      if (!past)
        return makeError(ErrorCode::InvalidGraph, "{} has no past input '{}', which {} takes (inputs: {})", who,
                         kv.past, quoted(first, "decode"), names(ins));
      l.pastInputs.push_back(*past);
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      const auto& in = ins[i];
      if (i == l.token || (decode && isPast(in.name))) continue;
      if (in.name == kAttentionMask || in.name == kPositionIds) {
        if (in.type != ir::ElemType::Int64)
          return makeError(ErrorCode::Unsupported, "{}: input '{}' is {}; the generate loop feeds it as int64", who,
                           in.name, declared(in));
        (in.name == kAttentionMask ? l.attentionMask : l.positionIds) = i;
        continue;
      }
      std::vector<std::string> pasts;
      for (const auto& kv : g.kv_) pasts.push_back(fmt::format("'{}'", kv.past));
      return makeError(ErrorCode::InvalidGraph,
                       "{}: input '{}' ({}) is none of what the generate loop feeds: the token ids ('{}'), {}, '{}' "
                       "and '{}'",
                       who, in.name, declared(in), g.tokenInput_,
                       decode ? fmt::format("the past key/value inputs ({}{})", fmt::join(pasts, ", "),
                                            g.options_.kv.empty() ? "" : ", as given")
                              : std::string("no past (a prefill starts from none)"),
                       kAttentionMask, kPositionIds);
    }
    return l;
  };
  CTX_ASSIGN_OR_RETURN(g.prefillLayout_, layoutOf(g.prefill_, false));
  for (const auto& d : g.decodes_) {
    CTX_ASSIGN_OR_RETURN(Layout l, layoutOf(d, true));
    g.decodeLayouts_.push_back(std::move(l));
  }

  // Each decode past must take what the prefill and the decodes present: the same element type and rank.
  const auto& prefillOut = g.prefill_.session->outputs();
  for (size_t k = 0; k < g.kv_.size(); ++k) {
    const ir::ValueInfo& fromPrefill = prefillOut[g.prefillLayout_.presentOutputs[k]];
    for (size_t d = 0; d < g.decodes_.size(); ++d) {
      const Layout& l = g.decodeLayouts_[d];
      const ir::ValueInfo& past = g.decodes_[d].session->inputs()[l.pastInputs[k]];
      for (const ir::ValueInfo* present : {&fromPrefill, &g.decodes_[d].session->outputs()[l.presentOutputs[k]]}) {
        const bool fromDecode = present != &fromPrefill;
        const std::string source = fromDecode ? quoted(g.decodes_[d], "decode") : quoted(g.prefill_, "prefill");
        if (present->type != past.type ||
            (present->shape && past.shape && present->shape->size() != past.shape->size()))
          return makeError(
              ErrorCode::InvalidGraph, "{}: past input '{}' is {} but {} output '{}', which feeds it, is {}",
              quoted(g.decodes_[d], "decode"), past.name, declared(past), source, present->name, declared(*present));
      }
    }
    // The growth axis: where a decode's declared past and present differ (the first decode that says).
    std::optional<size_t> axis;
    for (size_t d = 0; d < g.decodes_.size() && !axis; ++d)
      axis = growthAxis(g.decodes_[d].session->inputs()[g.decodeLayouts_[d].pastInputs[k]],
                        g.decodes_[d].session->outputs()[g.decodeLayouts_[d].presentOutputs[k]]);
    g.growAxis_.push_back(axis ? *axis : std::numeric_limits<size_t>::max());
  }
  return g;
}

Status Generator::checkPrompt(const ir::Tensor& prompt) {
  if (prompt.type() != ir::ElemType::Int64 || prompt.rank() != 2 || prompt.shape()[0] != 1 || prompt.shape()[1] < 1)
    return makeError(ErrorCode::InvalidArgument,
                     "the prompt must be int64 token ids of shape [1, S] (one sequence, S >= 1) but is {} of shape {}",
                     ir::elemTypeName(prompt.type()), ir::shapeToString(prompt.shape()));
  return Status::ok();
}

Expected<GenerateResult> Generator::run(const ir::Tensor& prompt, size_t count,
                                        const std::function<void(size_t, const GenerateResult&)>& onStep) const {
  CTX_RETURN_IF_ERROR(checkPrompt(prompt));
  if (count == 0) return makeError(ErrorCode::InvalidArgument, "generate: asked for 0 tokens");
  const int64_t promptLength = prompt.shape()[1];
  GenerateResult result;
  const size_t kvCount = kv_.size();

  // Two buffers per key/value pair, each large enough for the last step's present: step i reads its past from one
  // and writes its present into the other. They are sized once the prefill's present shapes are known.
  struct Buffers {
    ir::Tensor side[2];
    ir::ElemType type = ir::ElemType::Undefined;
  };
  std::vector<Buffers> buffers(kvCount);
  std::vector<int> current(kvCount, -1);  // which buffer holds the current past (-1: none, the runtime's tensor)
  auto reserve = [&](size_t k, const ir::Shape& firstShape, ir::ElemType type) -> Status {
    if (!buffers[k].side[0].empty()) return Status::ok();
    const size_t axis = growAxis_[k];
    ir::Shape last = firstShape;
    if (axis < last.size()) last[axis] += static_cast<int64_t>(count - 1);
    auto elements = ir::elementCount(last);
    auto bytes = elements ? ir::storageBytes(type, *elements) : std::nullopt;
    if (!bytes) return Status::ok();  // not a shape a buffer can hold: the runtime allocates each present
    for (auto& side : buffers[k].side) {
      CTX_ASSIGN_OR_RETURN(side, ir::Tensor::allocate(ir::ElemType::Uint8, {static_cast<int64_t>(*bytes)}));
    }
    buffers[k].type = type;
    return Status::ok();
  };
  // The output tensor for present k of shape `shape`: a view of the buffer the current past is not in, when that
  // shape is known and fits; else an empty tensor, which the run replaces with one of its own.
  auto presentTarget = [&](size_t k, const std::optional<ir::Shape>& shape, int& side) -> ir::Tensor {
    side = current[k] == 0 ? 1 : 0;
    ir::Tensor& buffer = buffers[k].side[side];
    if (!shape || buffer.empty()) return {};
    auto elements = ir::elementCount(*shape);
    auto bytes = elements ? ir::storageBytes(buffers[k].type, *elements) : std::nullopt;
    if (!bytes || *bytes > buffer.byteSize()) return {};
    auto view = ir::Tensor::mutableView(buffers[k].type, *shape, buffer.mutableData(), *bytes);
    return view ? std::move(view).value() : ir::Tensor{};
  };

  std::vector<ir::Tensor> kv(kvCount);  // the current past
  auto finishStep = [&](const ir::Tensor& logits, size_t vocab, Clock::time_point start) -> Status {
    result.tokens.push_back(argmaxLast(logits, vocab));
    result.stepMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (options_.keepLogits) {
      const size_t bytes = vocab * sizeof(float);
      CTX_ASSIGN_OR_RETURN(ir::Tensor row,
                           ir::Tensor::copyOf(ir::ElemType::Float, {1, static_cast<int64_t>(vocab)},
                                              logits.bytes().subspan(logits.byteSize() - bytes, bytes)));
      result.logits.push_back(std::move(row));
    }
    if (onStep) onStep(result.tokens.size() - 1, result);
    return Status::ok();
  };
  auto vocabOf = [](const ir::Tensor& logits, const PairModel& m, const std::string& name) -> Expected<size_t> {
    if (logits.type() != ir::ElemType::Float || logits.rank() < 1 || logits.shape().back() < 1 ||
        logits.elementCount() < static_cast<uint64_t>(logits.shape().back()))
      return makeError(ErrorCode::InvalidGraph,
                       "'{}': logits output '{}' is {} {}, expected float32 [..., vocab] with a row of logits", m.name,
                       name, ir::elemTypeName(logits.type()), ir::shapeToString(logits.shape()));
    return static_cast<size_t>(logits.shape().back());
  };
  // Feeds for a model: the token ids, then attention_mask and position_ids for `past` earlier tokens.
  auto fill = [&](const Layout& l, const Session& s, const ir::Tensor& tokens, int64_t past,
                  std::vector<ir::Tensor>& feeds) -> Status {
    feeds.resize(s.inputs().size());
    const int64_t length = tokens.shape()[1];
    feeds[l.token] = tokens;
    if (l.attentionMask) {
      CTX_ASSIGN_OR_RETURN(feeds[*l.attentionMask], int64Tensor({1, past + length}, 1, 0));
    }
    if (l.positionIds) {
      CTX_ASSIGN_OR_RETURN(feeds[*l.positionIds], int64Tensor({1, length}, past, 1));
    }
    return Status::ok();
  };

  // The decode model for token `step`: the first whose inputs take the past shapes `pastShape(k)`.
  CTX_ASSIGN_OR_RETURN(ir::Tensor token, ir::Tensor::allocate(ir::ElemType::Int64, {1, 1}));
  auto chooseDecode = [&](size_t step, auto&& pastShape) -> Expected<size_t> {
    for (size_t d = 0; d < decodes_.size(); ++d) {
      const auto& ins = decodes_[d].session->inputs();
      bool fits = accepts(ins[decodeLayouts_[d].token], token.shape());
      for (size_t k = 0; k < kvCount && fits; ++k) fits = accepts(ins[decodeLayouts_[d].pastInputs[k]], pastShape(k));
      if (fits) return d;
    }
    std::vector<std::string> taken;
    for (size_t d = 0; d < decodes_.size(); ++d)
      taken.push_back(
          fmt::format("'{}' takes {}", decodes_[d].name,
                      ir::dimsToString(decodes_[d].session->inputs()[decodeLayouts_[d].pastInputs[0]].shape)));
    return makeError(ErrorCode::NotFound,
                     "generate: token {} needs a decode model for a past of {} tokens ('{}' of shape {}), and no "
                     "decode model given takes it: {}",
                     step, promptLength + static_cast<int64_t>(step) - 1, kv_[0].past, ir::shapeToString(pastShape(0)),
                     fmt::join(taken, "; "));
  };
  // When the prefill declares its presents' shapes (compiled models do), every step's past shape is known before
  // anything runs: a length no decode model takes fails now, not after the tokens before it.
  {
    std::vector<ir::Shape> shapes;
    for (size_t k = 0; k < kvCount; ++k) {
      auto shape = prefill_.session->outputs()[prefillLayout_.presentOutputs[k]].staticShape();
      if (!shape || growAxis_[k] >= shape->size()) break;
      shapes.push_back(std::move(*shape));
    }
    for (size_t step = 1; shapes.size() == kvCount && step < count; ++step) {
      auto chosen = chooseDecode(step, [&](size_t k) -> const ir::Shape& { return shapes[k]; });
      if (!chosen) return chosen.takeError();
      for (size_t k = 0; k < kvCount; ++k) shapes[k][growAxis_[k]] += 1;
    }
  }

  // Step 0: the prompt through prefill.
  {
    const Session& s = *prefill_.session;
    const Layout& l = prefillLayout_;
    std::vector<ir::Tensor> feeds;
    CTX_RETURN_IF_ERROR(fill(l, s, prompt, 0, feeds));
    std::vector<ir::Tensor> outs(s.outputs().size());
    // Compiled prefills declare their presents' shapes: those go straight into the first buffers.
    for (size_t k = 0; k < kvCount; ++k) {
      const ir::ValueInfo& info = s.outputs()[l.presentOutputs[k]];
      auto shape = info.staticShape();
      if (!shape) continue;
      CTX_RETURN_IF_ERROR(reserve(k, *shape, info.type));
      int side = 0;
      outs[l.presentOutputs[k]] = presentTarget(k, shape, side);
    }
    std::vector<ir::Tensor*> ptrs;
    for (auto& t : outs) ptrs.push_back(&t);
    const auto start = Clock::now();
    if (auto st = s.runInto(feeds, ptrs); !st)
      return st.takeError().addContext(
          fmt::format("generate: prefill '{}' on the prompt of {}", prefill_.name,
                      promptLength == 1 ? "1 token" : fmt::format("{} tokens", promptLength)));
    CTX_ASSIGN_OR_RETURN(size_t vocab, vocabOf(outs[l.logits], prefill_, logitsOutput_));
    CTX_RETURN_IF_ERROR(finishStep(outs[l.logits], vocab, start));
    for (size_t k = 0; k < kvCount; ++k) {
      ir::Tensor& present = outs[l.presentOutputs[k]];
      if (!buffers[k].side[0].empty() && present.data() == buffers[k].side[0].data()) current[k] = 0;
      kv[k] = std::move(present);
      // Presents of shapes the prefill does not declare: the buffers are sized from the first ones computed.
      if (count > 1) CTX_RETURN_IF_ERROR(reserve(k, kv[k].shape(), kv[k].type()));
    }
  }

  // Steps 1..count-1: the last token through the decode model that takes the current past.
  std::vector<std::vector<ir::Tensor>> decodeOuts(decodes_.size());  // kept per model: logits written in place
  std::vector<ir::Tensor> feeds;
  std::vector<ir::Tensor*> ptrs;
  std::vector<int> sides(kvCount, 0);  // the buffer each present is bound into
  for (size_t step = 1; step < count; ++step) {
    const int64_t past = promptLength + static_cast<int64_t>(step) - 1;
    auto chosen = chooseDecode(step, [&](size_t k) -> const ir::Shape& { return kv[k].shape(); });
    if (!chosen) return chosen.takeError();
    const size_t d = *chosen;
    const Session& s = *decodes_[d].session;
    const Layout& l = decodeLayouts_[d];
    token.mutableDataAs<int64_t>()[0] = result.tokens.back();
    CTX_RETURN_IF_ERROR(fill(l, s, token, past, feeds));
    for (size_t k = 0; k < kvCount; ++k) feeds[l.pastInputs[k]] = kv[k];
    std::vector<ir::Tensor>& outs = decodeOuts[d];
    outs.resize(s.outputs().size());
    for (size_t k = 0; k < kvCount; ++k) {
      const ir::ValueInfo& info = s.outputs()[l.presentOutputs[k]];
      std::optional<ir::Shape> shape = info.staticShape();
      if (!shape && growAxis_[k] < kv[k].rank()) {
        shape = kv[k].shape();
        (*shape)[growAxis_[k]] += 1;
      }
      outs[l.presentOutputs[k]] = presentTarget(k, shape, sides[k]);
    }
    ptrs.clear();
    for (auto& t : outs) ptrs.push_back(&t);
    const auto start = Clock::now();
    if (auto st = s.runInto(feeds, ptrs); !st)
      return st.takeError().addContext(fmt::format("generate: token {}: decode '{}'", step, decodes_[d].name));
    CTX_ASSIGN_OR_RETURN(size_t vocab, vocabOf(outs[l.logits], decodes_[d], logitsOutput_));
    bool inPlace = true;
    for (size_t k = 0; k < kvCount; ++k) {
      ir::Tensor& present = outs[l.presentOutputs[k]];
      const ir::Tensor& target = buffers[k].side[sides[k]];
      const bool here = !target.empty() && present.data() == target.data();
      inPlace = inPlace && here;
      current[k] = here ? sides[k] : -1;
      kv[k] = std::move(present);
      present = ir::Tensor{};
    }
    result.presentsInPlace += inPlace ? 1 : 0;
    result.decodeModel.push_back(d);
    CTX_RETURN_IF_ERROR(finishStep(outs[l.logits], vocab, start));
  }
  return result;
}

}  // namespace ctxkit::runtime
