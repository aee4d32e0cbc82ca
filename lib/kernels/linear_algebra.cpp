// Linear algebra: Einsum (explicit "ab,bc->ac" and implicit "ab,bc" forms, repeated labels for diagonals, "..."
// broadcast dims) by direct summation over every label, and Det (LU with partial pivoting).
#include "cpu/convert.h"
#include "kernels/ops.h"

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

Status runEinsum(const OpContext& ctx, RunIns inputs, RunOuts outputs) {
  std::vector<ValueDesc> descs = describeInputs(inputs, false);
  CTX_ASSIGN_OR_RETURN(EinsumPlan p, planEinsum(ctx, descs));
  std::vector<int> labels;
  std::vector<int64_t> sizes;
  for (const auto& [l, s] : p.sizes) {
    labels.push_back(l);
    sizes.push_back(s);
  }
  auto indexOf = [&](int l) {
    return static_cast<size_t>(std::find(labels.begin(), labels.end(), l) - labels.begin());
  };
  // Per operand and output: the stride of each label (0 where absent; summed for repeated labels: a diagonal).
  auto strideTable = [&](const std::vector<int>& dims, std::span<const int64_t> shape) {
    std::vector<int64_t> st(labels.size(), 0);
    int64_t s = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      if (shape[d] != 1 || sizes[indexOf(dims[d])] == 1) st[indexOf(dims[d])] += s;
      s *= shape[d];
    }
    return st;
  };
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < inputs.size(); ++i) strides.push_back(strideTable(p.operands[i], inputs[i]->shape()));
  std::vector<int64_t> outStrides = strideTable(p.output, outputs[0]->shape());
  std::vector<double> acc(static_cast<size_t>(outputs[0]->elementCount()), 0.0);
  std::vector<std::vector<double>> vals;
  for (const ir::Tensor* t : inputs) {
    std::vector<double> v(static_cast<size_t>(t->elementCount()));
    CTX_RETURN_IF_ERROR(cpu::convertElements(t->type(), t->data(), ElemType::Double, v.data(), v.size()));
    vals.push_back(std::move(v));
  }
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  std::vector<int64_t> pos(labels.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    double prod = 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int64_t off = 0;
      for (size_t l = 0; l < labels.size(); ++l) off += pos[l] * strides[i][l];
      prod *= vals[i][static_cast<size_t>(off)];
    }
    int64_t o = 0;
    for (size_t l = 0; l < labels.size(); ++l) o += pos[l] * outStrides[l];
    acc[static_cast<size_t>(o)] += prod;
    for (size_t l = labels.size(); l-- > 0;) {
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
