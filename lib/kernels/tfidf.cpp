// TfIdfVectorizer over integer tokens: per row of the input ([C] or [N, C]), counts each n-gram of the pool
// (lengths min_gram_length..max_gram_length, tokens taken every skip+1 positions for skip 0..max_skip_count;
// 1-grams once per position) into its output coordinate, then applies TF, IDF or TFIDF weighting.
#include "kernels/ops.h"

#include <map>

namespace ctxkit::kernels::detail {

namespace {

struct TfIdfPlan {
  int64_t minGram = 1, maxGram = 1, maxSkip = 0, width = 0;
  ops::TfIdfMode mode = ops::TfIdfMode::Tf;
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams;  // per length - 1: n-gram -> output coordinate
  std::span<const float> weights;                              // per output coordinate (empty: all 1)
};

std::span<const int64_t> listOf(const std::optional<ops::IntList>& list) {
  return list ? std::span<const int64_t>(*list) : std::span<const int64_t>();
}

Expected<TfIdfPlan> planTfIdf(const OpContext& ctx) {
  const auto& attrs = attrsOf<ops::TfIdfAttrs>(ctx);  // ranges and mode checked by the decoder
  TfIdfPlan p;
  p.minGram = attrs.minGram;
  p.maxGram = attrs.maxGram;
  p.maxSkip = attrs.maxSkip;
  p.mode = attrs.mode;
  const std::span<const int64_t> pool = listOf(attrs.pool);
  const std::span<const int64_t> starts = listOf(attrs.ngramCounts);  // first pool element of each length
  const std::span<const int64_t> coords = listOf(attrs.ngramIndexes);
  if (attrs.weights) p.weights = *attrs.weights;
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
      // An output coordinate: a negative one would be written before the row; the output's width is the largest
      // plus one, which must not overflow (the output's size is then checked like any other's).
      if (coords[gram] < 0 || !(CheckedInt(coords[gram]) + 1).ok())
        return invalid(ctx, "ngram_indexes has value {} at {}, not an output coordinate", coords[gram], gram);
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
  // A skip that puts an n-gram's second token past the row's end finds nothing: larger ones are not tried (the
  // attribute may be anything up to INT64_MAX).
  const int64_t maxSkip = std::min(p.maxSkip, std::max<int64_t>(columns - 1, 0));
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tokens.data() + r * columns;
    float* counts = y + r * p.width;
    for (int64_t start = 0; start < columns; ++start)
      for (int64_t skip = 0; skip <= maxSkip; ++skip) {
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
      if (p.mode == ops::TfIdfMode::Idf) counts[k] = counts[k] > 0 ? w : 0.0f;
      else if (p.mode == ops::TfIdfMode::TfIdf) counts[k] *= w;
    }
  }
  return Status::ok();
}

}  // namespace ctxkit::kernels::detail
