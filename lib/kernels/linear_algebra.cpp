// Linear algebra: Einsum (explicit "ab,bc->ac" and implicit "ab,bc" forms, repeated labels for diagonals, "..."
// broadcast dims) and Det (LU with partial pivoting). A float Einsum of two operands whose labels are each batch,
// row, column or contracted (no diagonal, no label summed out of one operand alone) runs as batched GEMMs; every
// other form by direct summation over every label, in double.
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <cmath>
#include <cstring>
#include <map>

namespace ctxkit::kernels::detail {

namespace {

constexpr int kEllipsisBase = 1000;  // labels of "..." dims: kEllipsisBase + position within the ellipsis

struct EinsumPlan {
  std::vector<std::vector<int>> operands;  // labels per operand dim
  std::vector<int> output;                 // labels per output dim
  std::map<int, int64_t> sizes;            // size per label
};

Expected<std::vector<int>> parseTerm(const OpContext& ctx, std::string_view term, size_t rank, size_t& ellRank,
                                     bool isOutput) {
  std::vector<int> labels;
  size_t letters = 0;
  for (char c : term)
    if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
  bool seenEllipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (term.substr(i, 3) != "..." || seenEllipsis) return invalid(ctx, "equation term '{}' is malformed", term);
      seenEllipsis = true;
      i += 2;
      size_t n = isOutput ? ellRank : rank - letters;
      if (!isOutput) {
        if (rank < letters) return invalid(ctx, "term '{}' has more labels than its operand's rank {}", term, rank);
        ellRank = std::max(ellRank, n);
      }
      for (size_t k = 0; k < n; ++k)
        labels.push_back(kEllipsisBase + static_cast<int>(k + (isOutput ? 0 : ellRank - n)));
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      labels.push_back(static_cast<unsigned char>(c));
    } else {
      return invalid(ctx, "equation term '{}' has an unexpected character '{}'", term, c);
    }
  }
  if (!isOutput && labels.size() != rank)
    return invalid(ctx, "term '{}' names {} dims but its operand has rank {}", term, labels.size(), rank);
  return labels;
}

Expected<EinsumPlan> planEinsum(const OpContext& ctx, InDescs inputs) {
  std::string eq = attrsOf<ops::EinsumAttrs>(ctx).equation;
  std::string lhs = eq, rhs;
  bool explicitOut = false;
  if (auto arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicitOut = true;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  if (terms.size() != inputs.size())
    return invalid(ctx, "equation '{}' has {} operands but the node has {} inputs", eq, terms.size(), inputs.size());
  EinsumPlan p;
  // Ellipsis rank first (the widest), then labels right-aligned within it.
  size_t ellRank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t letters = 0;
    bool ell = terms[i].find("...") != std::string::npos;
    for (char c : terms[i]) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    if (ell && inputs[i].shape.size() >= letters) ellRank = std::max(ellRank, inputs[i].shape.size() - letters);
  }
  std::map<int, int> counts;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t er = ellRank;
    CTX_ASSIGN_OR_RETURN(std::vector<int> labels, parseTerm(ctx, terms[i], inputs[i].shape.size(), er, false));
    for (size_t d = 0; d < labels.size(); ++d) {
      int64_t size = inputs[i].shape[d];
      auto [it, fresh] = p.sizes.emplace(labels[d], size);
      if (!fresh && it->second != size) {
        if (labels[d] >= kEllipsisBase && (size == 1 || it->second == 1)) it->second = std::max(it->second, size);
        else return invalid(ctx, "label sizes disagree ({} and {}) in '{}'", it->second, size, eq);
      }
      ++counts[labels[d]];
    }
    p.operands.push_back(std::move(labels));
  }
  if (explicitOut) {
    CTX_ASSIGN_OR_RETURN(p.output, parseTerm(ctx, rhs, 0, ellRank, true));
    for (int l : p.output)
      if (!p.sizes.count(l)) return invalid(ctx, "output label of '{}' appears in no operand", eq);
  } else {
    for (size_t k = 0; k < ellRank; ++k) p.output.push_back(kEllipsisBase + static_cast<int>(k));
    for (const auto& [l, c] : counts)
      if (l < kEllipsisBase && c == 1) p.output.push_back(l);
  }
  return p;
}

}  // namespace

InferResult inferEinsum(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  if (inputs.empty()) return invalid(ctx, "has no inputs");
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kNumericTypes));
  for (size_t i = 1; i < inputs.size(); ++i) CTX_RETURN_IF_ERROR(checkSameType(ctx, inputs, 0, i));
  CTX_ASSIGN_OR_RETURN(EinsumPlan p, planEinsum(ctx, inputs));
  ir::Shape out;
  for (int l : p.output) out.push_back(p.sizes[l]);
  return single(inputs[0].type, std::move(out));
}

namespace {

// The labels of an Einsum with each label's size, and the stride of each label in an operand or the output (0 where
// the label is absent or broadcast; summed where it repeats: a diagonal).
struct EinsumLabels {
  std::vector<int> labels;
  std::vector<int64_t> sizes;

  explicit EinsumLabels(const EinsumPlan& p) {
    for (const auto& [l, s] : p.sizes) {
      labels.push_back(l);
      sizes.push_back(s);
    }
  }
  size_t indexOf(int l) const {
    return static_cast<size_t>(std::find(labels.begin(), labels.end(), l) - labels.begin());
  }
  std::vector<int64_t> strides(const std::vector<int>& dims, std::span<const int64_t> shape) const {
    std::vector<int64_t> st(labels.size(), 0);
    int64_t s = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      if (shape[d] != 1 || sizes[indexOf(dims[d])] == 1) st[indexOf(dims[d])] += s;
      s *= shape[d];
    }
    return st;
  }
};

// Calls f(offset, n) for the n-th element (row-major, last index fastest) of the index space `sizes`, at `offset`
// = the sum of each index times its stride.
template <typename F> void walkStrided(std::span<const int64_t> sizes, std::span<const int64_t> strides, F&& f) {
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  if (total == 0) return;
  if (sizes.empty()) return f(int64_t{0}, int64_t{0});
  const size_t rank = sizes.size();
  const int64_t inner = sizes[rank - 1], innerStride = strides[rank - 1];
  std::vector<int64_t> pos(rank, 0);
  int64_t off = 0;
  for (int64_t n = 0; n < total; n += inner) {
    for (int64_t i = 0; i < inner; ++i) f(off + i * innerStride, n + i);
    for (size_t d = rank - 1; d-- > 0;) {
      off += strides[d];
      if (++pos[d] < sizes[d]) break;
      off -= strides[d] * sizes[d];
      pos[d] = 0;
    }
  }
}

// True when `strides` lay the index space `sizes` out densely, row-major (dims of size 1 read nothing).
bool denseStrides(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != s) return false;
    s *= sizes[d];
  }
  return true;
}

// A float two-operand Einsum as nB GEMMs of [nM x nK] by [nK x nN]: each label is a batch label (both operands and
// the output), a row label (the first operand and the output), a column label (the second and the output) or a
// contracted one (both operands only). Operands are gathered into that order (broadcast dims read with stride 0),
// the products written in it, then scattered to the output's order. False when the equation has another form.
Expected<bool> einsumAsGemm(const OpContext& ctx, const EinsumPlan& p, RunIns inputs, ir::Tensor& out) {
  if (inputs.size() != 2 || inputs[0]->type() != ElemType::Float) return false;
  const EinsumLabels L(p);
  auto countIn = [](const std::vector<int>& dims, int l) { return std::count(dims.begin(), dims.end(), l); };
  std::vector<int> batch, rows, cols, depth;
  for (int l : p.output) {
    const auto a = countIn(p.operands[0], l), b = countIn(p.operands[1], l);
    if (a > 1 || b > 1 || countIn(p.output, l) > 1) return false;
    (a && b ? batch : a ? rows : cols).push_back(l);
  }
  for (int l : p.operands[0]) {
    if (countIn(p.output, l)) continue;
    if (countIn(p.operands[0], l) > 1 || countIn(p.operands[1], l) != 1) return false;  // diagonal or summed alone
    depth.push_back(l);
  }
  for (int l : p.operands[1])
    if (!countIn(p.output, l) && !countIn(p.operands[0], l)) return false;
  auto product = [&](const std::vector<int>& ls) {
    int64_t n = 1;
    for (int l : ls) n *= L.sizes[L.indexOf(l)];
    return n;
  };
  const int64_t nB = product(batch), nM = product(rows), nN = product(cols), nK = product(depth);
  float* y = out.mutableDataAs<float>();
  if (out.elementCount() == 0) return true;
  // Gathers one operand (or the output) in the order of the label groups given.
  auto layout = [&](const std::vector<int64_t>& st, std::initializer_list<const std::vector<int>*> groups) {
    std::pair<std::vector<int64_t>, std::vector<int64_t>> sz;
    for (const auto* g : groups)
      for (int l : *g) {
        sz.first.push_back(L.sizes[L.indexOf(l)]);
        sz.second.push_back(st[L.indexOf(l)]);
      }
    return sz;
  };
  const auto [aSizes, aStrides] = layout(L.strides(p.operands[0], inputs[0]->shape()), {&batch, &rows, &depth});
  const auto [bSizes, bStrides] = layout(L.strides(p.operands[1], inputs[1]->shape()), {&batch, &depth, &cols});
  const auto [cSizes, cStrides] = layout(L.strides(p.output, out.shape()), {&batch, &rows, &cols});
  const bool aDense = denseStrides(aSizes, aStrides), bDense = denseStrides(bSizes, bStrides);
  const bool cDense = denseStrides(cSizes, cStrides);
  const size_t aSize = aDense ? 0 : static_cast<size_t>(nB * nM * nK);
  const size_t bSize = bDense ? 0 : static_cast<size_t>(nB * nK * nN);
  const size_t cSize = static_cast<size_t>(nB * nM * nN);
  thread_local std::vector<float> scratch;  // grows once; the pool threads below only read and write through pointers
  float* buf = scratchAtLeast(scratch, aSize + bSize + (cDense ? 0 : cSize));
  const float* pa = inputs[0]->dataAs<float>();
  const float* pb = inputs[1]->dataAs<float>();
  if (!aDense) {
    walkStrided(aSizes, aStrides, [&](int64_t off, int64_t n) { buf[n] = pa[off]; });
    pa = buf;
  }
  if (!bDense) {
    float* packed = buf + aSize;
    walkStrided(bSizes, bStrides, [&](int64_t off, int64_t n) { packed[n] = pb[off]; });
    pb = packed;
  }
  float* pc = cDense ? y : buf + aSize + bSize;
  if (nK == 0) {
    std::fill(pc, pc + cSize, 0.0f);
  } else {
    auto one = [&](size_t i, ThreadPool* pool) {
      cpu::sgemm(false, false, static_cast<size_t>(nM), static_cast<size_t>(nN), static_cast<size_t>(nK), 1.0f,
                 pa + static_cast<int64_t>(i) * nM * nK, static_cast<size_t>(nK),
                 pb + static_cast<int64_t>(i) * nK * nN, static_cast<size_t>(nN), 0.0f,
                 pc + static_cast<int64_t>(i) * nM * nN, static_cast<size_t>(nN), pool);
    };
    const int threads = ctx.pool ? ctx.pool->threads() : 1;
    if (nB >= 2 * threads) {
      parallelForWork(ctx, static_cast<size_t>(nB), static_cast<size_t>(nM * nN * nK), [&](size_t b0, size_t b1) {
        for (size_t i = b0; i < b1; ++i) one(i, nullptr);
      });
    } else {
      for (size_t i = 0; i < static_cast<size_t>(nB); ++i) one(i, ctx.pool);
    }
  }
  if (!cDense) walkStrided(cSizes, cStrides, [&](int64_t off, int64_t n) { y[off] = pc[n]; });
  return true;
}

}  // namespace

Status runEinsum(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(EinsumPlan p, planEinsum(ctx, descs));
  CTX_ASSIGN_OR_RETURN(bool done, einsumAsGemm(ctx, p, inputs, *outputs[0]));
  if (done) return Status::ok();
  const EinsumLabels L(p);
  const std::vector<int64_t>& sizes = L.sizes;
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < inputs.size(); ++i) strides.push_back(L.strides(p.operands[i], inputs[i]->shape()));
  std::vector<int64_t> outStrides = L.strides(p.output, outputs[0]->shape());
  std::vector<double> acc(static_cast<size_t>(outputs[0]->elementCount()), 0.0);
  std::vector<std::vector<double>> vals;
  for (const ir::Tensor* t : inputs) {
    std::vector<double> v(static_cast<size_t>(t->elementCount()));
    CTX_RETURN_IF_ERROR(cpu::convertElements(t->type(), t->data(), ElemType::Double, v.data(), v.size()));
    vals.push_back(std::move(v));
  }
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  const size_t labelCount = sizes.size();
  std::vector<int64_t> pos(labelCount, 0);
  for (int64_t n = 0; n < total; ++n) {
    double prod = 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int64_t off = 0;
      for (size_t l = 0; l < labelCount; ++l) off += pos[l] * strides[i][l];
      prod *= vals[i][static_cast<size_t>(off)];
    }
    int64_t o = 0;
    for (size_t l = 0; l < labelCount; ++l) o += pos[l] * outStrides[l];
    acc[static_cast<size_t>(o)] += prod;
    for (size_t l = labelCount; l-- > 0;) {
      if (++pos[l] < sizes[l]) break;
      pos[l] = 0;
    }
  }
  return cpu::convertElements(ElemType::Double, acc.data(), outputs[0]->type(), outputs[0]->mutableData(), acc.size());
}

// ---- Det ---------------------------------------------------------------------------------------------------

InferResult inferDet(const OpContext& ctx, InDescs inputs, size_t outputCount) {
  CTX_RETURN_IF_ERROR(checkInputs(ctx, inputs, 1, 1));
  CTX_RETURN_IF_ERROR(checkOutputs(ctx, outputCount, 1, 1));
  CTX_RETURN_IF_ERROR(checkType(ctx, inputs, 0, kFloatTypes));
  const auto& x = inputs[0].shape;
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    return invalid(ctx, "input 0 has shape {} but expected [..., M, M]", shapeStr(x));
  return single(inputs[0].type, ir::Shape(x.begin(), x.end() - 2));
}

// LU decomposition with partial pivoting, in double.
Status runDet(const OpContext&, RunIns inputs, RunOuts outputs) {
  const ir::Tensor& x = *inputs[0];
  const int64_t m = x.shape().back();
  const size_t count = static_cast<size_t>(outputs[0]->elementCount());
  std::vector<double> all(static_cast<size_t>(x.elementCount())), dets(count);
  CTX_RETURN_IF_ERROR(cpu::convertElements(x.type(), x.data(), ElemType::Double, all.data(), all.size()));
  for (size_t k = 0; k < count; ++k) {
    double* a = all.data() + k * static_cast<size_t>(m * m);
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
      if (a[pivot * m + col] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t c = 0; c < m; ++c) std::swap(a[pivot * m + c], a[col * m + c]);
        det = -det;
      }
      det *= a[col * m + col];
      for (int64_t r = col + 1; r < m; ++r) {
        double f = a[r * m + col] / a[col * m + col];
        for (int64_t c = col; c < m; ++c) a[r * m + c] -= f * a[col * m + c];
      }
    }
    dets[k] = det;
  }
  return cpu::convertElements(ElemType::Double, dets.data(), outputs[0]->type(), outputs[0]->mutableData(), count);
}

}  // namespace ctxkit::kernels::detail
