// Winograd F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016) with the
// interpolation points 0, +-1, +-2 and infinity: Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A for a 6x6 input tile d and a 3x3
// filter g. The 36 element-wise products summed over the input channels are 36 GEMMs (tiles x channels by
// channels x output channels), run on the panels kernel with the input transform written straight into its strips.
#include "kernels/conv_winograd.h"

#include "cpu/simd.h"
#include "kernels/ops.h"
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <cstring>

namespace ctxkit::kernels::detail {

namespace {

constexpr int64_t kOut = 4;            // outputs per tile side
constexpr int64_t kSide = 6;           // inputs per tile side
constexpr size_t kPoints = 36;         // transform points per tile
constexpr int64_t kGroup = 8;          // tiles transformed side by side (vector lanes)
constexpr int64_t kChannelLanes = 16;  // output channels transformed side by side

// G (6 x 3): U = G g Gᵀ, computed in double once per weight.
constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};

// Vectors of 8 tiles (the input transform) and of 16 output channels (the output transform); GCC's vector
// extension, so that each clone (CTX_SIMD_CLONES) computes them in its widest registers.
typedef float Tiles8 __attribute__((vector_size(32)));
typedef float Channels16 __attribute__((vector_size(64)));

// Bᵀ applied to six vectors a stride `s` apart (one column or one row of a tile), in place.
template <typename V> inline void inputRows(V* d, int s) {
  const V d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
  d[0] = 4 * d0 - 5 * d2 + d4;
  d[s] = -4 * d1 - 4 * d2 + d3 + d4;
  d[2 * s] = 4 * d1 - 4 * d2 - d3 + d4;
  d[3 * s] = -2 * d1 - d2 + 2 * d3 + d4;
  d[4 * s] = 2 * d1 - d2 - 2 * d3 + d4;
  d[5 * s] = 4 * d1 - 5 * d3 + d5;
}

// Aᵀ applied to six vectors a stride `s` apart: four results `os` apart into `o`.
template <typename V> inline void outputRows(const V* m, int s, V* o, int os) {
  const V a = m[s] + m[2 * s], b = m[s] - m[2 * s], c = m[3 * s] + m[4 * s], e = m[3 * s] - m[4 * s];
  o[0] = m[0] + a + c;
  o[os] = b + 2 * e;
  o[2 * os] = a + 4 * c;
  o[3 * os] = b + 8 * e + m[5 * s];
}

// How a run is cut: tasks of `tileRows` rows of tiles of one image; a task's tiles are GEMM rows, in strips of `mr`.
struct WinogradSplit {
  int64_t tilesY = 0, tilesX = 0, tileRows = 1, tasksPerImage = 0;
  size_t mr = 0;
  size_t ranges = 1, perRange = 0;  // ranges of output-channel panels (each task transforms its tiles' inputs)
};

// Columns of zeros or slack on each side of a padded row: a run of lanes reads from up to 7 tiles before its first
// tile and 7 after its last (the lanes it leaves to other runs).
constexpr int64_t kRowSlack = 4 * kGroup;

// The rows of input a task's tiles read (tileRows * 4 + 2), each with the Conv's padding as zeros, kRowSlack floats
// of slack before and after, rowStride floats apart.
int64_t paddedRowStride(const WinogradSplit& s) { return 2 * kRowSlack + s.tilesX * kOut + 2; }

// Floats of a task's scratch: the transformed input of one depth block (36 points x strips x depth), the products
// (36 points x tiles x output channels), the tile rows' outputs (4 per tile row x padded width x channels) and one
// channel's padded input rows.
struct WinogradScratch {
  size_t input, products, outputs, padded;
  size_t total() const { return input + products + outputs + padded; }
};
WinogradScratch scratchOf(const WinogradSplit& s, size_t channels, size_t outChannels) {
  const auto tiles = static_cast<size_t>(s.tileRows * s.tilesX);
  const size_t strips = (tiles + s.mr - 1) / s.mr, rows = strips * s.mr;
  const size_t depth = std::min(channels, cpu::kPanelDepth);
  return {kPoints * rows * depth, kPoints * tiles * outChannels,
          static_cast<size_t>(kOut * s.tileRows * s.tilesX * kOut) * outChannels,
          static_cast<size_t>((s.tileRows * kOut + 2) * paddedRowStride(s))};
}

// Bᵀ-ready columns of one input row for 8 consecutive tiles: out[j][l] = row[4l + j], j < 6 (row holds 34 floats).
inline void tileColumns(const float* row, Tiles8* out) {
  Tiles8 a0, a1, a2, a3;
  std::memcpy(&a0, row, sizeof a0);
  std::memcpy(&a1, row + 8, sizeof a1);
  std::memcpy(&a2, row + 16, sizeof a2);
  std::memcpy(&a3, row + 24, sizeof a3);
  const Tiles8 s01 = __builtin_shufflevector(a0, a1, 0, 4, 8, 12, 1, 5, 9, 13);
  const Tiles8 s23 = __builtin_shufflevector(a2, a3, 0, 4, 8, 12, 1, 5, 9, 13);
  const Tiles8 t01 = __builtin_shufflevector(a0, a1, 2, 6, 10, 14, 3, 7, 11, 15);
  const Tiles8 t23 = __builtin_shufflevector(a2, a3, 2, 6, 10, 14, 3, 7, 11, 15);
  out[0] = __builtin_shufflevector(s01, s23, 0, 1, 2, 3, 8, 9, 10, 11);
  out[1] = __builtin_shufflevector(s01, s23, 4, 5, 6, 7, 12, 13, 14, 15);
  out[2] = __builtin_shufflevector(t01, t23, 0, 1, 2, 3, 8, 9, 10, 11);
  out[3] = __builtin_shufflevector(t01, t23, 4, 5, 6, 7, 12, 13, 14, 15);
  const Tiles8 e32{row[32], row[32], row[32], row[32], row[32], row[32], row[32], row[32]};
  const Tiles8 e33{row[33], row[33], row[33], row[33], row[33], row[33], row[33], row[33]};
  out[4] = __builtin_shufflevector(out[0], e32, 1, 2, 3, 4, 5, 6, 7, 8);
  out[5] = __builtin_shufflevector(out[1], e33, 1, 2, 3, 4, 5, 6, 7, 8);
}

// The transformed inputs (channels [c0, c0 + depth)) of tiles [0, rows) of a task, as the GEMM's packed A: for each
// point, strips of `mr` tiles, each `depth` deep and k-major. Tiles past the task's last read zeros. Each channel's
// rows are first copied with their padding into `padded` (paddedRowStride); 8 tiles then make one group of lanes,
// each run of them in one row of tiles read with vector loads and shuffles (tileColumns).
CTX_SIMD_CLONES void transformInput(const float* x, const Window3& w, const WinogradSplit& s, int64_t ty0,
                                    int64_t tiles, size_t rows, int64_t c0, int64_t depth, float* padded, float* a) {
  typedef int Mask8 __attribute__((vector_size(32)));
  const int64_t H = w.in[1], W = w.in[2], padT = w.padBegin[1], padL = w.padBegin[2];
  const int64_t inSize = H * W;
  const auto mr = static_cast<int64_t>(s.mr);
  const size_t pointFloats = rows * static_cast<size_t>(depth);
  const int64_t stride = paddedRowStride(s), taskRows = (rows > 0 ? (tiles + s.tilesX - 1) / s.tilesX : 0) * kOut + 2;
  const int64_t width = s.tilesX * kOut + 2, iy0 = ty0 * kOut - padT;
  // The input columns a padded row holds: [-padL, width - padL), of which [0, W) are the input's.
  const int64_t left = std::min(width, padL), right = std::clamp<int64_t>(W + padL, left, width);
  for (int64_t c = 0; c < depth; ++c) {
    const float* plane = x + (c0 + c) * inSize;
    for (int64_t r = 0; r < taskRows; ++r) {
      float* row = padded + r * stride + kRowSlack;
      const int64_t iy = iy0 + r;
      if (iy < 0 || iy >= H) {
        std::fill(row, row + width, 0.0f);
        continue;
      }
      std::fill(row, row + left, 0.0f);
      std::memcpy(row + left, plane + iy * W + (left - padL), sizeof(float) * static_cast<size_t>(right - left));
      std::fill(row + right, row + width, 0.0f);
    }
    for (int64_t g0 = 0; g0 < static_cast<int64_t>(rows); g0 += kGroup) {
      Tiles8 d[kSide * kSide] = {};
      // Runs of lanes in one row of tiles: lanes [l0, l1) are tiles (ty, tx0 ..).
      for (int64_t l0 = 0; l0 < kGroup && g0 + l0 < tiles;) {
        const int64_t t = g0 + l0, ty = t / s.tilesX, tx0 = t % s.tilesX;
        const int64_t l1 = std::min({kGroup, l0 + s.tilesX - tx0, tiles - g0});
        // Lane l reads columns 4 (tx0 + l - l0) ..: the run's base as if lane 0 were its tile tx0 - l0.
        const float* base = padded + ty * kOut * stride + kRowSlack + (tx0 - l0) * kOut;
        Tiles8 v[kSide];
        if (l0 == 0 && l1 == kGroup) {
          for (int64_t i = 0; i < kSide; ++i) tileColumns(base + i * stride, d + i * kSide);
        } else {
          Mask8 m;
          for (int l = 0; l < kGroup; ++l) m[l] = l >= l0 && l < l1 ? -1 : 0;
          for (int64_t i = 0; i < kSide; ++i) {
            tileColumns(base + i * stride, v);
            for (int64_t j = 0; j < kSide; ++j) {
              Tiles8& dst = d[i * kSide + j];
              dst = reinterpret_cast<Tiles8>((reinterpret_cast<Mask8>(v[j]) & m) | (reinterpret_cast<Mask8>(dst) & ~m));
            }
          }
        }
        l0 = l1;
      }
      for (int j = 0; j < kSide; ++j) inputRows(d + j, kSide);      // columns: Bᵀ d
      for (int i = 0; i < kSide; ++i) inputRows(d + i * kSide, 1);  // rows: (Bᵀ d) B
      // Lane l is tile g0 + l: strip (g0 + l) / mr, row (g0 + l) % mr, at depth c.
      const int64_t lanes = std::min<int64_t>(kGroup, static_cast<int64_t>(rows) - g0);
      for (size_t p = 0; p < kPoints; ++p) {
        float* dst = a + p * pointFloats;
        if (mr == kGroup) {
          std::memcpy(dst + (g0 / mr) * mr * depth + c * mr, &d[p], sizeof(Tiles8));
        } else {
          for (int64_t l = 0; l < lanes; ++l) {
            const int64_t t = g0 + l;
            dst[(t / mr) * mr * depth + c * mr + t % mr] = d[p][l];
          }
        }
      }
    }
  }
}

// The outputs of tiles [0, tiles) of a task for output channels [k0s, k1s) from their products ([point][tile]
// [channel]), plus the bias, into `out` ([task output row][padded column][channel]).
CTX_SIMD_CLONES void transformOutput(const float* m, const WinogradSplit& s, int64_t tiles, int64_t outChannels,
                                     int64_t k0s, int64_t k1s, const float* bias, float* out) {
  const size_t pointFloats = static_cast<size_t>(tiles * outChannels);
  const int64_t rowFloats = s.tilesX * kOut * outChannels;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t ty = t / s.tilesX, tx = t % s.tilesX;
    float* tileOut = out + ty * kOut * rowFloats + tx * kOut * outChannels;
    for (int64_t k0 = k0s; k0 < k1s; k0 += kChannelLanes) {
      const auto lanes = static_cast<size_t>(std::min<int64_t>(kChannelLanes, k1s - k0));
      Channels16 v[kPoints], r[kSide * kOut], o[kOut * kOut];
      const float* src = m + t * outChannels + k0;
      if (lanes == kChannelLanes) {
        for (size_t p = 0; p < kPoints; ++p) std::memcpy(&v[p], src + p * pointFloats, sizeof v[p]);
      } else {
        for (size_t p = 0; p < kPoints; ++p) {
          v[p] = Channels16{};
          for (size_t l = 0; l < lanes; ++l) v[p][l] = src[p * pointFloats + l];
        }
      }
      // Columns (Aᵀ v: 4 rows of 6), then rows ((Aᵀ v) A: 4 x 4).
      for (int j = 0; j < kSide; ++j) outputRows(v + j, kSide, r + j, kSide);
      for (int i = 0; i < kOut; ++i) outputRows(r + i * kSide, 1, o + i * kOut, 1);
      Channels16 b{};
      if (bias)
        for (size_t l = 0; l < lanes; ++l) b[l] = bias[k0 + static_cast<int64_t>(l)];
      for (int64_t i = 0; i < kOut; ++i)
        for (int64_t j = 0; j < kOut; ++j) {
          const Channels16 y = o[i * kOut + j] + b;
          float* dst = tileOut + i * rowFloats + j * outChannels + k0;
          if (lanes == kChannelLanes) std::memcpy(dst, &y, sizeof y);
          else
            for (size_t l = 0; l < lanes; ++l) dst[l] = y[l];
        }
    }
  }
}

WinogradSplit splitOf(const Window3& w, int64_t batch, size_t channels, size_t outChannels, size_t width,
                      int64_t threads) {
  WinogradSplit s;
  s.tilesY = (w.out[1] + kOut - 1) / kOut;
  s.tilesX = (w.out[2] + kOut - 1) / kOut;
  s.mr = cpu::panelStripRows(width);
  // As many tile rows as keep a task's scratch within kScratchBudget floats (the products and transformed input
  // stay in the L2/L3 caches while the GEMMs read them), at least one; fewer when the images give the threads too
  // few tasks.
  constexpr size_t kScratchBudget = size_t{1} << 19;  // 2 MB
  s.tileRows = s.tilesY;
  while (s.tileRows > 1 && scratchOf(s, channels, outChannels).total() > kScratchBudget)
    s.tileRows = (s.tileRows + 1) / 2;
  // Too few tasks for the threads: fewer tile rows per task first, down to one task per thread, then ranges of
  // output-channel panels (each range transforms its tiles' inputs again). On two threads, 64 -> 64 onto 28x28 and
  // 128 -> 128 onto 14x14 ran 1.0-1.15x faster than on one with four ranges (the input transform repeated four
  // times), 1.6x with their tile rows cut in two; ResNet-18 went 6.35 -> 5.0 ms. Aiming at more tasks than threads
  // balances no better: 960 -> 256 onto 20x20 ran 1.6x slower with its 5 tile rows as 5 tasks than as 3 + 2, each
  // task streaming the 35 MB transformed weight. (The threads sharing one transformed input, then splitting the
  // panels, measured the same as cutting the rows, within noise, on ResNet-18, FCOS and GoogLeNet.)
  const size_t panels = (outChannels + width - 1) / width;
  auto tasks = [&] { return static_cast<size_t>(batch * ((s.tilesY + s.tileRows - 1) / s.tileRows)) * s.ranges; };
  const auto wanted = static_cast<size_t>(std::max<int64_t>(threads, 1));
  while (s.tileRows > 1 && tasks() < wanted) s.tileRows = (s.tileRows + 1) / 2;
  if (tasks() > 0 && tasks() < wanted) s.ranges = std::min(panels, (wanted + tasks() - 1) / tasks());
  s.perRange = std::max<size_t>(1, (panels + s.ranges - 1) / s.ranges);
  s.ranges = std::max<size_t>(1, (panels + s.perRange - 1) / s.perRange);
  s.tasksPerImage = (s.tilesY + s.tileRows - 1) / s.tileRows;
  return s;
}

}  // namespace

bool winogradFits(const Window3& w) {
  return w.in[0] == 1 && w.kernel[0] == 1 && w.out[0] == 1 && w.kernel[1] == 3 && w.kernel[2] == 3 &&
         w.stride[1] == 1 && w.stride[2] == 1 && w.dilation[1] == 1 && w.dilation[2] == 1;
}

// The transformed weight is 36/9 = 4x the plain one and every task streams it through its 36 GEMMs, and each tile
// pays an input transform per input channel and an output transform per output channel: Winograd wins when the
// channel pairs are many enough to pay for the transforms and the map has tiles enough to reuse the weight. From
// ctxgen --tune's timings (AVX-512, one thread, this tree) of 44 dense 3x3s from the corpus and single-op models
// (best other algorithm's time / Winograd's):
// - 9 or more tiles: 1.3-2.2x from 1024 channel pairs up (16 -> 64 onto 23x23, 24 -> 48 onto 28x28, 32 -> 32 onto
//   112x112, 32 -> 96 onto 12x12, 48 -> 48 onto 56x56, 64 -> 32 onto 16x16, 256 -> 256 onto 10x10, 242 -> 96 onto
//   16x16); 1.07-1.1x at 512-576 (16 -> 32, 24 -> 24), 0.68x at 256 (16 -> 16 onto 32x32), 0.13-0.22x at 64.
// - 4 tiles (maps of 5x5 to 8x8): 1.25-1.67x from 20000 pairs up (96 -> 208, 112 -> 224 onto 6x6, 512 onto 8x8),
//   1.0x at 4096, 0.6-0.83x at 768-2048.
// - Below half the tiles' outputs on the map (5x5 in 4 tiles) 0.96-0.98x, one tile (3x3 maps) 0.58-0.7x, and 2
//   output channels (a 16-wide panel mostly empty) 0.73x.
// (The previous bounds, 64 channels on each side and 16 tiles, came from an earlier Winograd kernel before its
// shuffle gather; it is now 1.5x faster on 32 -> 32 onto 112x112, where it was 1.05-1.5x slower.)
constexpr int64_t kWinogradMinOutChannels = 16, kWinogradMinChannels = 8;
constexpr int64_t kWinogradPairsManyTiles = 1024, kWinogradPairsFourTiles = 8192;
bool winogradByDefault(const Window3& w, int64_t channels, int64_t outChannels) {
  if (!winogradFits(w) || channels < kWinogradMinChannels || outChannels < kWinogradMinOutChannels) return false;
  const int64_t tiles = ((w.out[1] + kOut - 1) / kOut) * ((w.out[2] + kOut - 1) / kOut);
  // At least half of the tiles' outputs are the map's.
  if (tiles < 4 || 2 * w.out[1] * w.out[2] < tiles * kOut * kOut) return false;
  return channels * outChannels >= (tiles >= 9 ? kWinogradPairsManyTiles : kWinogradPairsFourTiles);
}

cpu::PanelsB WinogradWeights::point(size_t xi) const {
  return cpu::PanelsB{data.data() + xi * pointFloats, channels, outChannels, width, cpu::kPanelDepth, {}};
}

namespace {

CTX_SIMD_CLONES void computeWinogradWeights(const float* weight, size_t channels, size_t outChannels, size_t width,
                                            size_t pointFloats, float* data) {
  typedef double Lanes8 __attribute__((vector_size(64)));
  const size_t panels = (outChannels + width - 1) / width;
  for (size_t c = 0; c < channels; ++c) {
    const size_t c0 = c / cpu::kPanelDepth * cpu::kPanelDepth, kc = std::min(cpu::kPanelDepth, channels - c0);
    const size_t rowAt = c0 * panels * width + (c - c0) * width;
    for (size_t m0 = 0; m0 < outChannels; m0 += 8) {  // 8 columns of one panel (widths are multiples of 8)
      const size_t lanes = std::min<size_t>(8, outChannels - m0);
      Lanes8 g[9] = {};
      for (size_t l = 0; l < lanes; ++l)
        for (int k = 0; k < 9; ++k) g[k][l] = weight[((m0 + l) * channels + c) * 9 + static_cast<size_t>(k)];
      Lanes8 gt[6][3];  // G g
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j) gt[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
      float* at = data + rowAt + m0 / width * kc * width + m0 % width;
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          const Lanes8 v = gt[i][0] * kG[j][0] + gt[i][1] * kG[j][1] + gt[i][2] * kG[j][2];
          float* dst = at + static_cast<size_t>(i * 6 + j) * pointFloats;
          for (size_t l = 0; l < lanes; ++l) dst[l] = static_cast<float>(v[l]);
        }
    }
  }
}

}  // namespace

std::shared_ptr<const WinogradWeights> transformWinogradWeights(const float* weight, int64_t outChannels,
                                                                int64_t channels, size_t width) {
  auto u = std::make_shared<WinogradWeights>();
  u->channels = static_cast<size_t>(channels);
  u->outChannels = static_cast<size_t>(outChannels);
  u->width = width ? width : cpu::sgemmNaturalPanelWidth();
  u->pointFloats = cpu::panelElements(u->channels, u->outChannels, u->width);
  u->data.resize(kPoints * u->pointFloats);  // zeros past the last output channel of the last panel
  // U (computed in double, rounded once) for 8 output channels at a time, straight into every point's panels
  // (cpu::packPanels's layout: depth blocks of kPanelDepth rows, panels of `width` columns, k-major).
  computeWinogradWeights(weight, u->channels, u->outChannels, u->width, u->pointFloats, u->data.data());
  return u;
}

size_t winogradScratchFloats(const Window3& w, int64_t batch, int64_t channels, int64_t outChannels) {
  const auto c = static_cast<size_t>(channels), m = static_cast<size_t>(outChannels);
  return scratchOf(splitOf(w, batch, c, m, cpu::sgemmNaturalPanelWidth(), 1), c, m).total();
}

void runWinograd(const OpContext& ctx, const WinogradWeights& u, const Window3& w, int64_t batch, const float* x,
                 const float* bias, float* y, const ops::Epilogue& act) {
  const auto C = static_cast<int64_t>(u.channels), M = static_cast<int64_t>(u.outChannels);
  const int64_t inSize = w.in[1] * w.in[2], outH = w.out[1], outW = w.out[2], outSize = outH * outW;
  const int64_t threads = ctx.pool ? ctx.pool->threads() : 1;
  const WinogradSplit s = splitOf(w, batch, u.channels, u.outChannels, u.width, threads);
  const WinogradScratch sizes = scratchOf(s, u.channels, u.outChannels);
  const size_t panels = (u.outChannels + u.width - 1) / u.width;
  const auto taskWork = static_cast<size_t>(s.tileRows * s.tilesX * C) * s.perRange * u.width * kPoints;
  parallelForWork(ctx, static_cast<size_t>(batch * s.tasksPerImage) * s.ranges, taskWork, [&](size_t t0, size_t t1) {
    float* a = scratchAtLeast(threadScratch().winograd, sizes.total());
    float* m = a + sizes.input;
    float* out = m + sizes.products;
    float* padded = out + sizes.outputs;
    for (size_t task = t0; task < t1; ++task) {
      const size_t range = task % s.ranges;
      const auto t = static_cast<int64_t>(task / s.ranges);
      const int64_t n = t / s.tasksPerImage, ty0 = t % s.tasksPerImage * s.tileRows;
      const int64_t ty1 = std::min(s.tilesY, ty0 + s.tileRows), tiles = (ty1 - ty0) * s.tilesX;
      const size_t rows = (static_cast<size_t>(tiles) + s.mr - 1) / s.mr * s.mr;
      const size_t q0 = range * s.perRange, q1 = std::min(panels, q0 + s.perRange);
      const auto k0 = static_cast<int64_t>(q0 * u.width), k1 = std::min(M, static_cast<int64_t>(q1 * u.width));
      const float* xn = x + n * C * inSize;
      for (int64_t c0 = 0; c0 < C; c0 += static_cast<int64_t>(cpu::kPanelDepth)) {
        const int64_t depth = std::min<int64_t>(C - c0, static_cast<int64_t>(cpu::kPanelDepth));
        transformInput(xn, w, s, ty0, tiles, rows, c0, depth, padded, a);
        for (size_t p = 0; p < kPoints; ++p)
          cpu::sgemmPanelsPackedA(static_cast<size_t>(tiles), 1.0f, a + p * rows * static_cast<size_t>(depth),
                                  u.point(p), static_cast<size_t>(c0), q0, q1, c0 > 0,
                                  m + p * static_cast<size_t>(tiles * M) + static_cast<size_t>(k0),
                                  static_cast<size_t>(M));
      }
      transformOutput(m, s, tiles, M, k0, k1, bias, out);
      const int64_t oy0 = ty0 * kOut, oy1 = std::min(outH, ty1 * kOut), rowFloats = s.tilesX * kOut * M;
      float* yn = y + n * M * outSize;
      for (int64_t oy = oy0; oy < oy1; ++oy)
        transposeRows(out + (oy - oy0) * rowFloats + k0, M, outW, k1 - k0, yn + k0 * outSize + oy * outW, outSize);
      for (int64_t k = k0; k < k1; ++k)
        applyFusedActivation(act, yn + k * outSize + oy0 * outW, static_cast<size_t>((oy1 - oy0) * outW));
    }
  });
}

}  // namespace ctxkit::kernels::detail
