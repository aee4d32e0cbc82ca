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

// Bᵀ applied to six values a stride `s` apart (one column or one row of a tile), lanes `L` wide, in place.
template <int L> inline void inputRows(float (*d)[L], int s) {
  float t[6][L];
#pragma GCC unroll 8
  for (int l = 0; l < L; ++l) {
    const float d0 = d[0][l], d1 = d[s][l], d2 = d[2 * s][l], d3 = d[3 * s][l], d4 = d[4 * s][l], d5 = d[5 * s][l];
    t[0][l] = 4 * d0 - 5 * d2 + d4;
    t[1][l] = -4 * d1 - 4 * d2 + d3 + d4;
    t[2][l] = 4 * d1 - 4 * d2 - d3 + d4;
    t[3][l] = -2 * d1 - d2 + 2 * d3 + d4;
    t[4][l] = 2 * d1 - d2 - 2 * d3 + d4;
    t[5][l] = 4 * d1 - 5 * d3 + d5;
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) std::memcpy(d[i * s], t[i], sizeof t[i]);
}

// Aᵀ applied to six values a stride `s` apart, lanes `L` wide: four results `os` apart into `o`.
template <int L> inline void outputRows(const float (*m)[L], int s, float (*o)[L], int os, int lanes) {
  for (int l = 0; l < lanes; ++l) {
    const float m0 = m[0][l], m1 = m[s][l], m2 = m[2 * s][l], m3 = m[3 * s][l], m4 = m[4 * s][l], m5 = m[5 * s][l];
    const float a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
    o[0][l] = m0 + a + c;
    o[os][l] = b + 2 * e;
    o[2 * os][l] = a + 4 * c;
    o[3 * os][l] = b + 8 * e + m5;
  }
}

// How a run is cut: tasks of `tileRows` rows of tiles of one image; a task's tiles are GEMM rows, in strips of `mr`.
struct WinogradSplit {
  int64_t tilesY = 0, tilesX = 0, tileRows = 1, tasksPerImage = 0;
  size_t mr = 0;
};

// Floats of a task's scratch: the transformed input of one depth block (36 points x strips x depth), the products
// (36 points x tiles x output channels) and the tile rows' outputs (4 per tile row x padded width x channels).
struct WinogradScratch {
  size_t input, products, outputs;
  size_t total() const { return input + products + outputs; }
};
WinogradScratch scratchOf(const WinogradSplit& s, size_t channels, size_t outChannels) {
  const auto tiles = static_cast<size_t>(s.tileRows * s.tilesX);
  const size_t strips = (tiles + s.mr - 1) / s.mr, rows = strips * s.mr;
  const size_t depth = std::min(channels, cpu::kPanelDepth);
  return {kPoints * rows * depth, kPoints * tiles * outChannels,
          static_cast<size_t>(kOut * s.tileRows * s.tilesX * kOut) * outChannels};
}

// The transformed inputs (channels [c0, c0 + depth)) of tiles [0, rows) of a task, as the GEMM's packed A: for each
// point, strips of `mr` tiles, each `depth` deep and k-major. Tiles past the task's last read zeros.
CTX_SIMD_CLONES void transformInput(const float* x, const Window3& w, const WinogradSplit& s, int64_t ty0,
                                    int64_t tiles, size_t rows, int64_t c0, int64_t depth, float* a) {
  const int64_t H = w.in[1], W = w.in[2], padT = w.padBegin[1], padL = w.padBegin[2];
  const int64_t inSize = H * W;
  const auto mr = static_cast<int64_t>(s.mr);
  const size_t pointFloats = rows * static_cast<size_t>(depth);
  for (int64_t g0 = 0; g0 < static_cast<int64_t>(rows); g0 += kGroup) {
    const int64_t lanes = std::min<int64_t>(kGroup, static_cast<int64_t>(rows) - g0);
    // Where each lane's tile starts in the input, and whether its 6x6 window lies inside (no bounds checks).
    int64_t iy[kGroup], ix[kGroup];
    bool inside[kGroup], live[kGroup];
    for (int64_t l = 0; l < kGroup; ++l) {
      const int64_t t = g0 + l;
      live[l] = l < lanes && t < tiles;
      const int64_t ty = ty0 + (live[l] ? t / s.tilesX : 0), tx = live[l] ? t % s.tilesX : 0;
      iy[l] = ty * kOut - padT;
      ix[l] = tx * kOut - padL;
      inside[l] = live[l] && iy[l] >= 0 && ix[l] >= 0 && iy[l] + kSide <= H && ix[l] + kSide <= W;
    }
    for (int64_t c = 0; c < depth; ++c) {
      const float* plane = x + (c0 + c) * inSize;
      float d[kSide * kSide][kGroup];
      for (int64_t l = 0; l < kGroup; ++l) {
        if (inside[l]) {
          const float* src = plane + iy[l] * W + ix[l];
          for (int64_t i = 0; i < kSide; ++i)
            for (int64_t j = 0; j < kSide; ++j) d[i * kSide + j][l] = src[i * W + j];
        } else {
          for (int64_t i = 0; i < kSide; ++i)
            for (int64_t j = 0; j < kSide; ++j) {
              const int64_t yy = iy[l] + i, xx = ix[l] + j;
              d[i * kSide + j][l] = live[l] && yy >= 0 && yy < H && xx >= 0 && xx < W ? plane[yy * W + xx] : 0.0f;
            }
        }
      }
      for (int j = 0; j < kSide; ++j) inputRows<kGroup>(&d[j], kSide);      // columns: Bᵀ d
      for (int i = 0; i < kSide; ++i) inputRows<kGroup>(&d[i * kSide], 1);  // rows: (Bᵀ d) B
      // Lane l is tile g0 + l: strip (g0 + l) / mr, row (g0 + l) % mr, at depth c.
      for (size_t p = 0; p < kPoints; ++p) {
        float* dst = a + p * pointFloats;
        if (mr == kGroup) {
          std::memcpy(dst + (g0 / mr) * mr * depth + c * mr, d[p], sizeof(float) * kGroup);
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

// The outputs of tiles [0, tiles) of a task from their products ([point][tile][channel]), plus the bias, into `out`
// ([task output row][padded column][channel]).
CTX_SIMD_CLONES void transformOutput(const float* m, const WinogradSplit& s, int64_t tiles, int64_t outChannels,
                                     const float* bias, float* out) {
  const size_t pointFloats = static_cast<size_t>(tiles * outChannels);
  const int64_t rowFloats = s.tilesX * kOut * outChannels;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t ty = t / s.tilesX, tx = t % s.tilesX;
    float* tileOut = out + ty * kOut * rowFloats + tx * kOut * outChannels;
    for (int64_t k0 = 0; k0 < outChannels; k0 += kChannelLanes) {
      const int lanes = static_cast<int>(std::min<int64_t>(kChannelLanes, outChannels - k0));
      float v[kPoints][kChannelLanes], r[kSide * kOut][kChannelLanes], o[kOut * kOut][kChannelLanes];
      for (size_t p = 0; p < kPoints; ++p)
        std::memcpy(v[p], m + p * pointFloats + t * outChannels + k0, sizeof(float) * static_cast<size_t>(lanes));
      // Columns (Aᵀ v: 4 rows of 6), then rows ((Aᵀ v) A: 4 x 4).
      for (int j = 0; j < kSide; ++j) outputRows<kChannelLanes>(&v[j], kSide, &r[j], kSide, lanes);
      for (int i = 0; i < kOut; ++i) outputRows<kChannelLanes>(&r[i * kSide], 1, &o[i * kOut], 1, lanes);
      float b[kChannelLanes] = {};
      if (bias) std::memcpy(b, bias + k0, sizeof(float) * static_cast<size_t>(lanes));
      for (int64_t i = 0; i < kOut; ++i)
        for (int64_t j = 0; j < kOut; ++j) {
          float* dst = tileOut + i * rowFloats + j * outChannels + k0;
          const float* src = o[i * kOut + j];
          for (int l = 0; l < lanes; ++l) dst[l] = src[l] + b[l];
        }
    }
  }
}

WinogradSplit splitOf(const Window3& w, int64_t batch, size_t channels, size_t outChannels, int64_t threads) {
  WinogradSplit s;
  s.tilesY = (w.out[1] + kOut - 1) / kOut;
  s.tilesX = (w.out[2] + kOut - 1) / kOut;
  s.mr = cpu::panelStripRows(cpu::sgemmNaturalPanelWidth());
  // As many tile rows as keep a task's scratch within kScratchBudget floats (the products and transformed input
  // stay in the L2/L3 caches while the GEMMs read them), at least one; fewer when the images give the threads too
  // few tasks.
  constexpr size_t kScratchBudget = size_t{1} << 19;  // 2 MB
  s.tileRows = s.tilesY;
  while (s.tileRows > 1 && scratchOf(s, channels, outChannels).total() > kScratchBudget)
    s.tileRows = (s.tileRows + 1) / 2;
  while (s.tileRows > 1 && batch * ((s.tilesY + s.tileRows - 1) / s.tileRows) < 2 * threads)
    s.tileRows = (s.tileRows + 1) / 2;
  s.tasksPerImage = (s.tilesY + s.tileRows - 1) / s.tileRows;
  return s;
}

}  // namespace

bool winogradFits(const Window3& w) {
  return w.in[0] == 1 && w.kernel[0] == 1 && w.out[0] == 1 && w.kernel[1] == 3 && w.kernel[2] == 3 &&
         w.stride[1] == 1 && w.stride[2] == 1 && w.dilation[1] == 1 && w.dilation[2] == 1;
}

// The transformed weight is 36/9 = 4x the plain one and every task streams it through its 36 GEMMs, and each tile
// pays an input transform per input channel and an output transform per output channel. From ctxgen --tune's
// timings (AVX-512, one thread) against grouped-blocks and panels: Winograd took 0.55-0.7x their time with at least
// 64 input and 64 output channels onto maps of 16 or more tiles (64 -> 64 onto 28x28 and 56x56, 64 -> 192 onto
// 24x24, 128 -> 128 onto 28x28, 256 -> 256 onto 14x14, 960 -> 256 onto 20x20), but 1.05-1.5x with 32 or 48 channels
// on either side (32 onto 112x112, 128 -> 32, 48 onto 56x56), onto 9 or 4 tiles (256 onto 10x10, 512 onto 8x8), or
// when the tiles cover a third more than the map (64 onto 13x13: 16 tiles of 16 for 169 outputs).
constexpr int64_t kWinogradMinTiles = 16;
constexpr int64_t kWinogradMinChannels = 64;
bool winogradByDefault(const Window3& w, int64_t channels, int64_t outChannels) {
  if (!winogradFits(w) || channels < kWinogradMinChannels || outChannels < kWinogradMinChannels) return false;
  const int64_t tiles = ((w.out[1] + kOut - 1) / kOut) * ((w.out[2] + kOut - 1) / kOut);
  // At least 3/4 of the tiles' outputs are the map's.
  return tiles >= kWinogradMinTiles && 4 * w.out[1] * w.out[2] >= 3 * tiles * kOut * kOut;
}

cpu::PanelsB WinogradWeights::point(size_t xi) const {
  return cpu::PanelsB{data.data() + xi * pointFloats, channels, outChannels, width, cpu::kPanelDepth, {}};
}

std::shared_ptr<const WinogradWeights> transformWinogradWeights(const float* weight, int64_t outChannels,
                                                                int64_t channels) {
  auto u = std::make_shared<WinogradWeights>();
  u->channels = static_cast<size_t>(channels);
  u->outChannels = static_cast<size_t>(outChannels);
  u->width = cpu::sgemmNaturalPanelWidth();
  u->pointFloats = cpu::panelElements(u->channels, u->outChannels, u->width);
  u->data.resize(kPoints * u->pointFloats);
  // Every point's B (channels x output channels, row-major), then each packed. U is computed in double.
  const size_t pointSize = u->channels * u->outChannels;
  std::vector<float> plain(kPoints * pointSize);
  for (int64_t m = 0; m < outChannels; ++m)
    for (int64_t c = 0; c < channels; ++c) {
      const float* g = weight + (m * channels + c) * 9;
      double gt[6][3];  // G g
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j) gt[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
          plain[static_cast<size_t>(i * 6 + j) * pointSize + static_cast<size_t>(c * outChannels + m)] =
              static_cast<float>(gt[i][0] * kG[j][0] + gt[i][1] * kG[j][1] + gt[i][2] * kG[j][2]);
    }
  for (size_t p = 0; p < kPoints; ++p)
    cpu::packPanels(false, plain.data() + p * pointSize, u->outChannels, u->channels, u->outChannels, u->width,
                    cpu::kPanelDepth, u->data.data() + p * u->pointFloats);
  return u;
}

size_t winogradScratchFloats(const Window3& w, int64_t batch, int64_t channels, int64_t outChannels) {
  const auto c = static_cast<size_t>(channels), m = static_cast<size_t>(outChannels);
  return scratchOf(splitOf(w, batch, c, m, 1), c, m).total();
}

void runWinograd(const OpContext& ctx, const WinogradWeights& u, const Window3& w, int64_t batch, const float* x,
                 const float* bias, float* y, const ops::Epilogue& act) {
  const auto C = static_cast<int64_t>(u.channels), M = static_cast<int64_t>(u.outChannels);
  const int64_t inSize = w.in[1] * w.in[2], outH = w.out[1], outW = w.out[2], outSize = outH * outW;
  const int64_t threads = ctx.pool ? ctx.pool->threads() : 1;
  const WinogradSplit s = splitOf(w, batch, u.channels, u.outChannels, threads);
  const WinogradScratch sizes = scratchOf(s, u.channels, u.outChannels);
  const size_t panels = (u.outChannels + u.width - 1) / u.width;
  const auto taskWork = static_cast<size_t>(s.tileRows * s.tilesX * C * M) * kPoints;
  parallelForWork(ctx, static_cast<size_t>(batch * s.tasksPerImage), taskWork, [&](size_t t0, size_t t1) {
    float* a = scratchAtLeast(threadScratch().winograd, sizes.total());
    float* m = a + sizes.input;
    float* out = m + sizes.products;
    for (auto t = static_cast<int64_t>(t0); t < static_cast<int64_t>(t1); ++t) {
      const int64_t n = t / s.tasksPerImage, ty0 = t % s.tasksPerImage * s.tileRows;
      const int64_t ty1 = std::min(s.tilesY, ty0 + s.tileRows), tiles = (ty1 - ty0) * s.tilesX;
      const size_t rows = (static_cast<size_t>(tiles) + s.mr - 1) / s.mr * s.mr;
      const float* xn = x + n * C * inSize;
      for (int64_t c0 = 0; c0 < C; c0 += static_cast<int64_t>(cpu::kPanelDepth)) {
        const int64_t depth = std::min<int64_t>(C - c0, static_cast<int64_t>(cpu::kPanelDepth));
        transformInput(xn, w, s, ty0, tiles, rows, c0, depth, a);
        for (size_t p = 0; p < kPoints; ++p)
          cpu::sgemmPanelsPackedA(static_cast<size_t>(tiles), 1.0f, a + p * rows * static_cast<size_t>(depth),
                                  u.point(p), static_cast<size_t>(c0), 0, panels, c0 > 0,
                                  m + p * static_cast<size_t>(tiles * M), static_cast<size_t>(M));
      }
      transformOutput(m, s, tiles, M, bias, out);
      const int64_t oy0 = ty0 * kOut, oy1 = std::min(outH, ty1 * kOut), rowFloats = s.tilesX * kOut * M;
      applyFusedActivation(act, out, static_cast<size_t>((oy1 - oy0) * rowFloats));
      float* yn = y + n * M * outSize;
      for (int64_t oy = oy0; oy < oy1; ++oy)
        transposeRows(out + (oy - oy0) * rowFloats, M, outW, M, yn + oy * outW, outSize);
    }
  });
}

}  // namespace ctxkit::kernels::detail
