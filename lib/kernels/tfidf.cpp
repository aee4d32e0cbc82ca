// TfIdfVectorizer over integer tokens: per row of the input ([C] or [N, C]), counts each n-gram of the pool
// (lengths min_gram_length..max_gram_length, tokens taken every skip+1 positions for skip 0..max_skip_count;
// 1-grams once per position) into its output coordinate, then applies TF, IDF or TFIDF weighting.
#include "kernels/ops.h"

#include <map>

namespace ctxkit::kernels::detail {

namespace {

struct TfIdfPlan {
  int64_t minGram = 1, maxGram = 1, maxSkip = 0, width = 0;
  enum class Mode { Tf, Idf, TfIdf } mode = Mode::Tf;
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams;  // per length - 1: n-gram -> output coordinate
  std::vector<float> weights;                                  // per output coordinate (empty: all 1)
};

Expected<TfIdfPlan> planTfIdf(const OpContext& ctx) {
  TfIdfPlan p;
  p.minGram = ctx.attrs.getInt("min_gram_length", 1);
  p.maxGram = ctx.attrs.getInt("max_gram_length", 1);
  p.maxSkip = ctx.attrs.getInt("max_skip_count", 0);
  if (p.minGram < 1 || p.maxGram < p.minGram || p.maxSkip < 0)
    return invalid(ctx, "min_gram_length {}, max_gram_length {} and max_skip_count {} are not a valid range", p.minGram,
                   p.maxGram, p.maxSkip);
  const std::string mode = ctx.attrs.getString("mode", "TF");
  if (mode == "TF") p.mode = TfIdfPlan::Mode::Tf;
  else if (mode == "IDF") p.mode = TfIdfPlan::Mode::Idf;
  else if (mode == "TFIDF") p.mode = TfIdfPlan::Mode::TfIdf;
  else return invalid(ctx, "mode is '{}' but must be TF, IDF or TFIDF", mode);
  if (ctx.attrs.has("pool_strings")) return unsupported(ctx, "pool_strings (string tokens) is not supported");
  const std::vector<int64_t> pool = ctx.attrs.getInts("pool_int64s");
  const std::vector<int64_t> starts = ctx.attrs.getInts("ngram_counts");  // first pool element of each length
  const std::vector<int64_t> coords = ctx.attrs.getInts("ngram_indexes");
  p.weights = ctx.attrs.getFloats("weights");
  p.grams.resize(starts.size());
  size_t gram = 0;  // the n-gram's position in the pool, indexing ngram_indexes
  for (size_t level = 0; level < starts.size(); ++level) {
    const auto n = static_cast<int64_t>(level + 1);
    const int64_t begin = starts[level];
    const int64_t end = level + 1 < starts.size() ? starts[level + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end || (end - begin) % n != 0)
      return invalid(ctx, "ngram_counts {} does not split pool_int64s of {} values into {}-grams", begin, pool.size(),
                     n);
    for (int64_t i = begin; i < end; i += n, ++gram) {
      if (gram >= coords.size())
        return invalid(ctx, "ngram_indexes has {} values, fewer than the pool's n-grams", coords.size());
      p.grams[level][std::vector<int64_t>(pool.begin() + i, pool.begin() + i + n)] = coords[gram];
      p.width = std::max(p.width, coords[gram] + 1);
    }
  }
  if (!p.weights.empty() && static_cast<int64_t>(p.weights.size()) < p.width)
    return invalid(ctx, "weights has {} values but the output has {} coordinates", p.weights.size(), p.width);
  return p;
}

}  // namespace

InferResult inferTfIdfVectorizer(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kIndexTypes));
  CTX_ASSIGN_OR_RETURN(TfIdfPlan p, planTfIdf(ctx));
  const ir::Shape& x = inputs[0].shape;
  if (x.empty() || x.size() > 2) return invalid(ctx, "input 0 has shape {} but expected [C] or [N, C]", shapeStr(x));
  return single(ElemType::Float, x.size() == 1 ? ir::Shape{p.width} : ir::Shape{x[0], p.width});
}

Status runTfIdfVectorizer(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  CTX_ASSIGN_OR_RETURN(TfIdfPlan p, planTfIdf(ctx));
  const ir::Tensor& x = *inputs[0];
  const std::vector<int64_t> tokens = tensorInts(x);
  const int64_t rows = x.rank() == 1 ? 1 : x.shape()[0], columns = x.shape().back();
  float* y = outputs[0]->mutableDataAs<float>();
  std::fill(y, y + rows * p.width, 0.0f);
  const auto levels = std::min<int64_t>(p.maxGram, static_cast<int64_t>(p.grams.size()));
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tokens.data() + r * columns;
    float* counts = y + r * p.width;
    for (int64_t start = 0; start < columns; ++start)
      for (int64_t skip = 0; skip <= p.maxSkip; ++skip) {
        gram.clear();
        for (int64_t n = 1; n <= levels; ++n) {
          const int64_t at = start + (n - 1) * (skip + 1);
          if (at >= columns) break;
          gram.push_back(row[at]);
          if (n < p.minGram || (n == 1 && skip > 0)) continue;  // a 1-gram counts once per position
          const auto& pool = p.grams[static_cast<size_t>(n - 1)];
          if (auto it = pool.find(gram); it != pool.end()) counts[it->second] += 1;
        }
      }
    for (int64_t k = 0; k < p.width; ++k) {
      const float w = p.weights.empty() ? 1.0f : p.weights[static_cast<size_t>(k)];
      if (p.mode == TfIdfPlan::Mode::Idf) counts[k] = counts[k] > 0 ? w : 0.0f;
      else if (p.mode == TfIdfPlan::Mode::TfIdf) counts[k] *= w;
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
