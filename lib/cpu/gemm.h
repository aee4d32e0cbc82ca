// Cache-blocked float32 GEMM used by MatMul, Gemm and Conv; callable by the compiler for constant folding.
#pragma once

#include "cpu/thread_pool.h"
#include "cpu/weight_layout.h"
#include "ir/tensor.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace ctxkit::cpu {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is M x K (A is K x M when transA), op(B) is
// K x N (B is N x K when transB); lda/ldb/ldc are row strides in elements. beta == 0 ignores C's old
// contents (NaN included). `pool` may be null. C must not overlap A or B.
void sgemm(bool transA, bool transB, size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
           const float* B, size_t ldb, float beta, float* C, size_t ldc, ThreadPool* pool);

// The name of the micro-kernel sgemm picked for this CPU ("avx512", "avx2", "sse2"), for logs and tests.
const char* sgemmKernelName();

// ---- B pre-packed in panels (cpu::WeightLayoutKind::GemmPanels, docs/format/program.md) ----

// op(B), K x N, cut into blocks of `depth` rows and panels of `width` columns, as the micro-kernel reads it.
struct PanelsB {
  const float* data = nullptr;
  size_t k = 0, n = 0;
  size_t width = 0, depth = 0;
  // The weight's logical shape when it is not B itself (a Conv's [M, C, taps...], B = its [M, C x taps]
  // transposed), which the op plans with since the packed weight is bound as its stored 1-D tensor; else empty.
  std::span<const int64_t> weightShape;
};

// A Conv (group 1, float32, constant weight) with at most this many output positions per image (a 1-D audio front
// end, a 1x1 feature map) multiplies the unfolded input by its weight as B in panels: the compiler stores such
// weights in GemmPanelsTransposed of [M, C x taps], and a prepared op packs a plain one once.
inline constexpr int64_t kSmallConvOutputs = 16;

// Floats op(B) occupies in panels of `width` columns: K x ceil(N / width) x width.
size_t panelElements(size_t k, size_t n, size_t width);

// Packs op(B) (B is K x N, or N x K when transB; rows ldb apart) into panels at `out` (panelElements floats):
// the one definition of the layout's bytes, used by the compiler and by prepared ops alike.
void packPanels(bool transB, const float* B, size_t ldb, size_t k, size_t n, size_t width, size_t depth, float* out);

// C = alpha * op(A) * op(B) + beta * C with op(B) in panels. Every x86-64 CPU has a kernel for widths 8, 16
// and 32; the fastest runs at sgemmNaturalPanelWidth().
void sgemmPanels(bool transA, size_t M, float alpha, const float* A, size_t lda, const PanelsB& B, float beta, float* C,
                 size_t ldc, ThreadPool* pool);

// sgemmPanels for the columns of panels [panel0, panel1) of op(B) only (the first of them at C's column 0), on the
// calling thread: for callers that split a product over threads themselves, by ranges of panels, and run more work
// in the same task (a Conv unfolds its input and transposes its result there: one hand-off per op, not three per
// depth block).
void sgemmPanelsRange(bool transA, size_t M, float alpha, const float* A, size_t lda, const PanelsB& B, size_t panel0,
                      size_t panel1, float beta, float* C, size_t ldc);

// The rows of one strip of A as the micro-kernel for panels `width` wide reads it (its MR: 8 with AVX-512).
size_t panelStripRows(size_t width);

// sgemmPanelsRange for B's depth block [p0, p0 + kc) alone (kc = min(B.depth, B.k - p0)), with op(A) packed by the
// caller: ceil(M / panelStripRows(B.width)) strips of that many rows, each kc deep and k-major (a strip's rows at
// one depth side by side), the last strip's missing rows zero. C = alpha * A x B, or C + alpha * A x B when
// `accumulate`. For callers that make A's rows as they pack them (a Conv unfolding its input straight into strips),
// so that A is not written once and then copied into strips.
void sgemmPanelsPackedA(size_t M, float alpha, const float* aPacked, const PanelsB& B, size_t p0, size_t panel0,
                        size_t panel1, bool accumulate, float* C, size_t ldc);

// How a product on panels is split over threads: rows of op(A) (output positions, for a Conv) in blocks of `block`
// (whole strips of 8, the micro-kernel's rows) and B's panels in `ranges` ranges of `perRange`.
struct PanelsSplit {
  size_t block = 0;
  size_t ranges = 1, perRange = 0;
};

// The split of `batch` products of `rows` rows by `panelCount` panels of `width` columns, in at least `minBlocks`
// row blocks each, whose busiest of `threads` threads does least by a cost model: a task packs its rows (each row x
// depth once, `packCost` as much as multiplying it by one panel of 32 columns; a Conv also unfolds them) and reads
// its panels' weights (each as much as multiplying it by 24 rows: a small product's weights come from memory), and
// the tasks run in rounds of `threads`. Splitting rows rounds them to strips and has every task read all its
// panels; splitting panels packs the same rows again in every range.
PanelsSplit splitPanelsWork(size_t rows, size_t minBlocks, size_t batch, size_t panelCount, size_t width,
                            size_t threads, double packCost);

// The depth ctxkit packs panels with (the kernel's K block).
inline constexpr size_t kPanelDepth = 256;

// The panel width of this CPU's widest micro-kernel (32 with AVX-512, 16 with AVX2 + FMA, 8 otherwise).
size_t sgemmNaturalPanelWidth();

// Reserves this thread's GEMM packing buffers at their largest (a few MB of address space, touched only as used),
// so that later GEMMs on it allocate nothing. Pool threads call it when they start; other threads on first use.
void reserveGemmScratch();

// True for the panel widths sgemmPanels runs (8, 16, 32).
bool isPanelWidth(size_t width);

// A 2-D float32 weight in `layout` (a GEMM panel layout; in GemmPanelsTransposed also a weight of higher rank, viewed
// as [shape[0], the product of the rest]): the 1-D tensor of its layout's elements, as a context binary stores it.
// Fails for other layouts, types or ranks.
Expected<ir::Tensor> packWeight(const cpu::WeightLayout& layout, const ir::Tensor& weight);

// packWeight's bytes a few panels at a time, in order, so that a large weight is hashed, compared or written
// without a packed copy in memory. Keeps `weight`'s bytes alive. One thread at a time may call next(), but a piece
// stays valid through one more call, so it may be consumed on one thread while the next is packed on another.
class PackedWeightStream {
public:
  // Fails as packWeight does. Each piece is at most about `chunkBytes` (at least one panel of one block).
  static Expected<PackedWeightStream> open(const cpu::WeightLayout& layout, const ir::Tensor& weight,
                                           size_t chunkBytes = size_t{1} << 20);
  uint64_t byteSize() const { return uint64_t{k_} * panels_ * width_ * sizeof(float); }
  // The next piece of the packed bytes, empty at the end; valid until the second call after this one.
  std::span<const std::byte> next();
  // The same packed into `out`, which holds maxPieceElements() floats, instead of the stream's own buffers.
  std::span<const std::byte> next(float* out);
  // Moves past the next piece without packing it (another thread packs it); false at the end.
  bool skip();
  size_t maxPieceElements() const { return panelsPerPiece_ * std::min(depth_, k_) * width_; }
  // The packed float at `index` (< byteSize() / 4) without packing anything: a weight is sampled cheaply.
  float element(uint64_t index) const;

private:
  PackedWeightStream(ir::Tensor weight, bool transposed, size_t k, size_t n, size_t ldb, size_t width, size_t depth,
                     size_t chunkBytes);
  // The next piece's rows and panels; false at the end.
  bool advance(size_t& rows, size_t& count);
  ir::Tensor weight_;
  bool transposed_ = false;
  size_t k_ = 0, n_ = 0, ldb_ = 0, width_ = 0, depth_ = 0, panels_ = 0, panelsPerPiece_ = 1;
  size_t block_ = 0, panel_ = 0;         // where the next piece starts: K block (first row) and panel
  std::unique_ptr<float[]> buffers_[2];  // pieces alternate between them
  int current_ = 0;
};

}  // namespace ctxkit::cpu
