// RNN, NonMaxSuppression, GridSample, AffineGrid, LpPool, Col2Im, MaxUnpool, CenterCropPad, Unique, TensorScatter,
// DeformConv, RoiAlign, Binarizer, ArrayFeatureExtractor and TfIdfVectorizer against their ONNX definitions written out on
// small hand-checkable inputs.
#include "kernel_test_util.h"

using namespace ctxkit;
using namespace ctxkit::test;

TEST_CASE("RNN: H = tanh(X W^T + H R^T + Wb + Rb) per step, forward and reverse") {
  auto x = floats({2, 1, 1}, {1, 2});
  auto w = floats({1, 1, 1}, {0.5f});
  auto r = floats({1, 1, 1}, {0.25f});
  auto b = floats({1, 2}, {0.1f, -0.2f});
  auto out = Op(OpKind::RNN, 14).i("hidden_size", 1).eval({&x, &w, &r, &b}, 2);
  REQUIRE(out.isOk());
  const float h1 = std::tanh(0.5f * 1 - 0.1f), h2 = std::tanh(0.5f * 2 + 0.25f * h1 - 0.1f);
  requireClose(values<float>((*out)[0]), {h1, h2});
  requireClose(values<float>((*out)[1]), {h2});
  auto rev = Op(OpKind::RNN, 14).s("direction", "reverse").eval({&x, &w, &r, &b}, 2);
  REQUIRE(rev.isOk());
  const float g2 = std::tanh(0.5f * 2 - 0.1f), g1 = std::tanh(0.5f * 1 + 0.25f * g2 - 0.1f);
  requireClose(values<float>((*rev)[0]), {g1, g2});
}

TEST_CASE("NonMaxSuppression keeps the best box of each overlapping group, per class, up to the limit") {
  // Boxes ([y1, x1, y2, x2]) 0 and 1 overlap with IoU 0.9 / 1.1; box 2 is apart.
  auto boxes = floats({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  auto scores = floats({1, 2, 3}, {0.9f, 0.95f, 0.3f, 0.1f, 0.2f, 0.8f});
  auto limit = int64s({1}, {3});
  auto iou = floats({1}, {0.5f});
  auto threshold = floats({1}, {0.15f});
  auto y = Op(OpKind::NonMaxSuppression, 11).run1({&boxes, &scores, &limit, &iou, &threshold});
  REQUIRE(y.shape() == ir::Shape{4, 3});
  CHECK(values<int64_t>(y) == std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  auto one = int64s({1}, {1});
  auto y1 = Op(OpKind::NonMaxSuppression, 11).run1({&boxes, &scores, &one, &iou, &threshold});
  CHECK(values<int64_t>(y1) == std::vector<int64_t>{0, 0, 1, 0, 1, 2});
  // Center-point boxes: (0.5, 0.5, 1, 1) is box 0.
  auto centers = floats({1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 5.5f, 0.5f, 1, 1});
  auto y2 = Op(OpKind::NonMaxSuppression, 11).i("center_point_box", 1).run1({&centers, &scores, &limit, &iou, &threshold});
  CHECK(values<int64_t>(y2) == std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1});
}

TEST_CASE("NonMaxSuppression on hundreds of boxes keeps what the greedy definition keeps, box for box") {
  // 3 classes of 700 boxes in clusters (many suppressions, and more kept boxes than one vector block), with boxes of
  // no area, flipped corners, equal scores and a NaN coordinate: against the definition written out plainly.
  const int64_t n = 700, classes = 3;
  std::vector<float> b(static_cast<size_t>(n * 4)), sc(static_cast<size_t>(classes * n));
  uint32_t seed = 12345;
  auto next = [&seed] { return (seed = seed * 1664525u + 1013904223u) >> 8 & 0xffff; };
  for (int64_t i = 0; i < n; ++i) {
    const float cy = static_cast<float>(next() % 40), cx = static_cast<float>(next() % 40);
    const float h = static_cast<float>(next() % 8) / 2, w = static_cast<float>(next() % 8) / 2;  // some 0
    float* q = &b[static_cast<size_t>(i * 4)];
    if (i % 5 == 0) q[0] = cy + h, q[1] = cx + w, q[2] = cy, q[3] = cx;  // flipped corners
    else q[0] = cy, q[1] = cx, q[2] = cy + h, q[3] = cx + w;
  }
  b[4 * 17 + 2] = std::nanf("");
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<float>(next() % 500) / 500;  // ties
  auto boxes = floats({1, n, 4}, b);
  auto scores = floats({1, classes, n}, sc);
  auto limit = int64s({1}, {400});
  auto iou = floats({1}, {0.3f});
  auto threshold = floats({1}, {0.1f});
  auto y = Op(OpKind::NonMaxSuppression, 11).run1({&boxes, &scores, &limit, &iou, &threshold});

  std::vector<int64_t> expected;
  auto corner = [&](int64_t i, int k) { return b[static_cast<size_t>(i * 4 + k)]; };
  auto iouAbove = [&](int64_t i, int64_t j) {
    const float iy0 = std::min(corner(i, 0), corner(i, 2)), ix0 = std::min(corner(i, 1), corner(i, 3));
    const float iy1 = std::max(corner(i, 0), corner(i, 2)), ix1 = std::max(corner(i, 1), corner(i, 3));
    const float jy0 = std::min(corner(j, 0), corner(j, 2)), jx0 = std::min(corner(j, 1), corner(j, 3));
    const float jy1 = std::max(corner(j, 0), corner(j, 2)), jx1 = std::max(corner(j, 1), corner(j, 3));
    const float h = std::min(iy1, jy1) - std::max(iy0, jy0), w = std::min(ix1, jx1) - std::max(ix0, jx0);
    if (h <= 0 || w <= 0) return false;
    const float inter = h * w, ai = (iy1 - iy0) * (ix1 - ix0), aj = (jy1 - jy0) * (jx1 - jx0);
    const float uni = ai + aj - inter;
    if (ai <= 0 || aj <= 0 || uni <= 0) return false;
    return inter / uni > 0.3f;
  };
  for (int64_t c = 0; c < classes; ++c) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < n; ++i)
      if (sc[static_cast<size_t>(c * n + i)] > 0.1f) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      return sc[static_cast<size_t>(c * n + p)] > sc[static_cast<size_t>(c * n + q)];
    });
    std::vector<int64_t> kept;
    for (int64_t i : order) {
      if (kept.size() == 400) break;
      if (std::none_of(kept.begin(), kept.end(), [&](int64_t k) { return iouAbove(k, i); })) kept.push_back(i);
    }
    for (int64_t k : kept) expected.insert(expected.end(), {0, c, k});
  }
  REQUIRE(expected.size() > 3 * 3 * 64);  // more kept than a block, in every class
  CHECK(values<int64_t>(y) == expected);
}

TEST_CASE("GridSample: bilinear, nearest and border padding on a 2x2 plane") {
  auto x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  // With align_corners the grid's -1 and 1 are the pixel centres; (0, 0) is the plane's centre.
  auto grid = floats({1, 1, 3, 2}, {-1, -1, 0, 0, 1, -1});
  auto y = Op(OpKind::GridSample, 16).i("align_corners", 1).run1({&x, &grid});
  REQUIRE(y.shape() == ir::Shape{1, 1, 1, 3});
  requireClose(values<float>(y), {1, 2.5f, 2});
  // Without align_corners, x = ((g + 1) * 2 - 1) / 2: g = -1 lands half a pixel outside, reading zeros half-way.
  auto outside = floats({1, 1, 1, 2}, {-1, -1});
  requireClose(values<float>(Op(OpKind::GridSample, 16).run1({&x, &outside})), {0.25f});
  requireClose(values<float>(Op(OpKind::GridSample, 16).s("padding_mode", "border").run1({&x, &outside})), {1});
  auto near = floats({1, 1, 1, 2}, {0.6f, -0.6f});  // x = 1.1, y = -0.1 -> pixel (0, 1)
  requireClose(values<float>(Op(OpKind::GridSample, 16).s("mode", "nearest").run1({&x, &near})), {2});
}

// GridSample with zeros padding and align_corners 0 written out per output element: axis d of a grid point reads
// position ((g + 1) * size - 1) / 2, linear taps at floor and floor + 1 (zero outside), or the nearest pixel (halves to
// even). `spatial` are X's spatial sizes, `points` the grid's points per image.
std::vector<float> gridSampleFormula(const std::vector<float>& x, const std::vector<float>& grid, int64_t images,
                                     int64_t channels, const std::vector<int64_t>& spatial, int64_t points,
                                     bool nearest) {
  const size_t r = spatial.size();
  int64_t plane = 1;
  for (int64_t s : spatial) plane *= s;
  std::vector<float> y;
  for (int64_t n = 0; n < images; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < points; ++p) {
        const float* g = &grid[static_cast<size_t>((n * points + p) * static_cast<int64_t>(r))];
        std::vector<double> pos(r);
        for (size_t d = 0; d < r; ++d) {  // the grid lists the innermost axis first
          const auto size = static_cast<double>(spatial[d]);
          pos[d] = ((g[r - 1 - d] + 1.0) * size - 1) / 2;
          if (nearest) pos[d] = std::nearbyint(pos[d]);
        }
        double sum = 0;
        for (int corner = 0; corner < (nearest ? 1 : 1 << r); ++corner) {
          double weight = 1;
          int64_t offset = 0;
          bool inside = true;
          for (size_t d = 0; d < r; ++d) {
            const double base = std::floor(pos[d]);
            const bool upper = (corner >> d) & 1;
            const auto i = static_cast<int64_t>(base) + upper;
            weight *= nearest ? 1.0 : upper ? pos[d] - base : 1 - (pos[d] - base);
            inside = inside && i >= 0 && i < spatial[d];
            offset = offset * spatial[d] + i;
          }
          if (inside) sum += weight * x[static_cast<size_t>((n * channels + c) * plane + offset)];
        }
        y.push_back(static_cast<float>(sum));
      }
  return y;
}

TEST_CASE("GridSample on 1 and 2 threads: many one-channel images, one image of many channels, 3-D, nearest") {
  // RAFT samples 256 one-channel images (its correlation lookup): the work splits over images as well as channels.
  struct Case {
    int64_t images, channels;
    std::vector<int64_t> spatial;
    int64_t points;
    bool nearest;
  };
  const std::vector<Case> cases = {
      {37, 1, {9, 11}, 49, false}, {1, 19, {13, 6}, 30, false}, {3, 5, {7, 8}, 21, true},
      {2, 3, {4, 5, 6}, 17, false}, {5, 2, {3, 4, 5}, 11, true},
  };
  auto pool = kernels::makeThreadPool(2);
  uint32_t seed = 11;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / 16777216.0f;  // [0, 1)
  };
  for (const Case& c : cases) {
    int64_t plane = 1;
    for (int64_t s : c.spatial) plane *= s;
    const auto r = static_cast<int64_t>(c.spatial.size());
    std::vector<float> xv(static_cast<size_t>(c.images * c.channels * plane)),
        gv(static_cast<size_t>(c.images * c.points * r));
    for (float& v : xv) v = next() * 2 - 1;
    for (float& v : gv) v = next() * 2.4f - 1.2f;  // some points outside, reading zeros
    ir::Shape xs{c.images, c.channels}, gs{c.images, c.points};
    for (int64_t s : c.spatial) xs.push_back(s);
    for (int64_t d = 1; d < r; ++d) gs.push_back(1);
    gs.push_back(r);
    auto x = floats(xs, xv);
    auto grid = floats(gs, gv);
    const std::vector<float> want = gridSampleFormula(xv, gv, c.images, c.channels, c.spatial, c.points, c.nearest);
    Op op(OpKind::GridSample, 20);
    if (c.nearest) op.s("mode", "nearest");
    INFO(c.images << " images of " << c.channels << " channels, rank " << r << (c.nearest ? ", nearest" : ""));
    requireClose(values<float>(op.run1({&x, &grid})), want);
    requireClose(values<float>(op.run1({&x, &grid}, pool.get())), want);
  }
}

TEST_CASE("AffineGrid: the identity theta gives the pixel-centre grid") {
  auto theta = floats({1, 2, 3}, {1, 0, 0, 0, 1, 0});
  auto size = int64s({4}, {1, 1, 2, 2});
  auto y = Op(OpKind::AffineGrid, 20).run1({&theta, &size});
  REQUIRE(y.shape() == ir::Shape{1, 2, 2, 2});
  requireClose(values<float>(y), {-0.5f, -0.5f, 0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f});
  auto shifted = floats({1, 2, 3}, {2, 0, 1, 0, 1, 0});
  requireClose(values<float>(Op(OpKind::AffineGrid, 20).i("align_corners", 1).run1({&shifted, &size})),
               {-1, -1, 3, -1, -1, 1, 3, 1});
}

TEST_CASE("LpPool: the p-norm of each window, padding adds nothing") {
  auto x = floats({1, 1, 1, 3}, {3, -4, 12});
  auto y = Op(OpKind::LpPool, 18).ints("kernel_shape", {1, 2}).i("p", 2).run1({&x});
  requireClose(values<float>(y), {5, std::sqrt(160.0f)});
  auto padded = Op(OpKind::LpPool, 18).ints("kernel_shape", {1, 2}).ints("pads", {0, 1, 0, 0}).i("p", 1).run1({&x});
  requireClose(values<float>(padded), {3, 7, 16});
}

TEST_CASE("Col2Im sums overlapping blocks, MaxUnpool writes values at their indices") {
  // One channel, 1x2 blocks over a 1x3 image with stride 1: two blocks overlap at the middle pixel.
  auto cols = floats({1, 2, 2}, {1, 10, 2, 20});  // rows: block offsets 0 and 1; columns: positions 0 and 1
  auto image = int64s({2}, {1, 3});
  auto block = int64s({2}, {1, 2});
  auto y = Op(OpKind::Col2Im, 18).run1({&cols, &image, &block});
  REQUIRE(y.shape() == ir::Shape{1, 1, 1, 3});
  requireClose(values<float>(y), {1, 12, 20});
  auto x = floats({1, 1, 1, 2}, {5, 6});
  auto idx = int64s({1, 1, 1, 2}, {1, 2});
  auto u = Op(OpKind::MaxUnpool, 11).ints("kernel_shape", {1, 2}).ints("strides", {1, 2}).run1({&x, &idx});
  REQUIRE(u.shape() == ir::Shape{1, 1, 1, 4});
  requireClose(values<float>(u), {0, 5, 6, 0});
}

TEST_CASE("CenterCropPad crops and pads around the centre") {
  auto x = floats({1, 5}, {1, 2, 3, 4, 5});
  auto crop = int64s({1}, {2});
  requireClose(values<float>(Op(OpKind::CenterCropPad, 18).ints("axes", {1}).run1({&x, &crop})), {2, 3});
  auto pad = int64s({2}, {1, 8});
  requireClose(values<float>(Op(OpKind::CenterCropPad, 18).run1({&x, &pad})), {0, 1, 2, 3, 4, 5, 0, 0});
}

TEST_CASE("Unique: sorted and first-occurrence order, indices, inverse and counts") {
  auto x = floats({6}, {2, 1, 1, 3, 4, 3});
  auto s = Op(OpKind::Unique, 11).eval({&x}, 4);
  REQUIRE(s.isOk());
  requireClose(values<float>((*s)[0]), {1, 2, 3, 4});
  CHECK(values<int64_t>((*s)[1]) == std::vector<int64_t>{1, 0, 3, 4});
  CHECK(values<int64_t>((*s)[2]) == std::vector<int64_t>{1, 0, 0, 2, 3, 2});
  CHECK(values<int64_t>((*s)[3]) == std::vector<int64_t>{2, 1, 2, 1});
  auto u = Op(OpKind::Unique, 11).i("sorted", 0).eval({&x}, 4);
  REQUIRE(u.isOk());
  requireClose(values<float>((*u)[0]), {2, 1, 3, 4});
  CHECK(values<int64_t>((*u)[2]) == std::vector<int64_t>{0, 1, 1, 2, 3, 2});
  auto rows = floats({3, 2}, {1, 0, 0, 1, 1, 0});
  auto a = Op(OpKind::Unique, 11).i("axis", 0).eval({&rows}, 4);
  REQUIRE(a.isOk());
  requireClose(values<float>((*a)[0]), {0, 1, 1, 0});
  CHECK(values<int64_t>((*a)[3]) == std::vector<int64_t>{1, 2});
}

TEST_CASE("TensorScatter writes the update at each batch entry's index, wrapping in circular mode") {
  auto past = floats({2, 3, 1}, {0, 0, 0, 0, 0, 0});
  auto update = floats({2, 2, 1}, {1, 2, 3, 4});
  auto at = int64s({2}, {0, 1});
  requireClose(values<float>(Op(OpKind::TensorScatter, 24).run1({&past, &update, &at})), {1, 2, 0, 0, 3, 4});
  auto wrap = int64s({2}, {2, 1});
  requireClose(values<float>(Op(OpKind::TensorScatter, 24).s("mode", "circular").run1({&past, &update, &wrap})),
               {2, 0, 1, 0, 3, 4});
}

TEST_CASE("DeformConv: zero offsets are a convolution, a half-pixel offset reads between pixels") {
  auto x = floats({1, 1, 1, 2}, {1, 3});
  auto w = floats({1, 1, 1, 1}, {2});
  auto zero = floats({1, 2, 1, 2}, {0, 0, 0, 0});
  requireClose(values<float>(Op(OpKind::DeformConv, 19).run1({&x, &w, &zero})), {2, 6});
  auto half = floats({1, 2, 1, 2}, {0, 0, 0.5f, 0.5f});  // x moves by 0.5: reads 2, then 3 * 0.5 (edge)
  auto bias = floats({1}, {1});
  auto mask = floats({1, 1, 1, 2}, {1, 0.5f});
  requireClose(values<float>(Op(OpKind::DeformConv, 19).run1({&x, &w, &half, &bias, &mask})), {5, 2.5f});
}

TEST_CASE("Binarizer and ArrayFeatureExtractor (ai.onnx.ml)") {
  auto x = floats({2, 3}, {-1, 0.5f, 2, 3, 0.4f, 0.6f});
  requireClose(values<float>(Op(OpKind::Binarizer, 1).f("threshold", 0.5f).run1({&x})), {0, 0, 1, 1, 0, 1});
  auto idx = int64s({2}, {2, 0});
  auto y = Op(OpKind::ArrayFeatureExtractor, 1).run1({&x, &idx});
  REQUIRE(y.shape() == ir::Shape{2, 2});
  requireClose(values<float>(y), {2, -1, 0.6f, 3});
  auto row = floats({3}, {7, 8, 9});
  auto z = Op(OpKind::ArrayFeatureExtractor, 1).run1({&row, &idx});
  REQUIRE(z.shape() == ir::Shape{1, 2});
  requireClose(values<float>(z), {9, 7});
}

TEST_CASE("TfIdfVectorizer counts pool n-grams with skips, then weights them") {
  auto tokens = int32s({4}, {1, 2, 1, 3});
  // 1-grams {1, 3} -> coordinates 0, 1; 2-grams {(1, 2), (1, 3)} -> 2, 3.
  auto op = [](const std::string& mode) {
    Op o(OpKind::TfIdfVectorizer, 9);
    o.i("min_gram_length", 1).i("max_gram_length", 2).i("max_skip_count", 1).s("mode", mode);
    o.ints("pool_int64s", {1, 3, 1, 2, 1, 3}).ints("ngram_counts", {0, 2}).ints("ngram_indexes", {0, 1, 2, 3});
    o.fl("weights", {0.5f, 1, 2, 3});
    return o;
  };
  // Unigrams once per position; bigrams at step 1: (1,2) (2,1) (1,3); at step 2: (1,1) (2,3), not in the pool.
  requireClose(values<float>(op("TF").run1({&tokens})), {2, 1, 1, 1});
  requireClose(values<float>(op("TFIDF").run1({&tokens})), {1, 1, 2, 3});
  requireClose(values<float>(op("IDF").run1({&tokens})), {0.5f, 1, 2, 3});
}

TEST_CASE("TfIdfVectorizer refuses a negative output coordinate") {
  // Found reading the kernel: a negative ngram_indexes value was a write before the output row.
  auto tokens = int32s({4}, {1, 2, 1, 3});
  Op o(OpKind::TfIdfVectorizer, 9);
  o.i("min_gram_length", 1).i("max_gram_length", 1).s("mode", "TF");
  o.ints("pool_int64s", {1, 3}).ints("ngram_counts", {0}).ints("ngram_indexes", {0, -4});
  CHECK_THAT(o.fails({&tokens}).message(), Catch::Contains("ngram_indexes has value -4 at 1, not an output coordinate"));
}

TEST_CASE("RoiAlign: bilinear samples of a linear image, both coordinate modes, avg and max, hostile regions") {
  // X[y][x] = 4y + x on a 4x4 plane: a bilinear sample at (y, x) is exactly 4y + x.
  std::vector<float> plane(16);
  for (size_t i = 0; i < plane.size(); ++i) plane[i] = static_cast<float>(i);
  auto x = floats({1, 1, 4, 4}, plane);
  auto rois = floats({1, 4}, {0, 0, 3, 3});  // x1, y1, x2, y2
  auto batch = int64s({1}, {0});
  auto run = [&](Op op, const ir::Tensor& r, const ir::Tensor& b) { return op.eval({&x, &r, &b}, 1); };
  // output_half_pixel: one sample at the region's centre (1.5, 1.5); sampling ratio 2: (0.75 | 2.25)^2, same mean.
  for (int64_t ratio : {1, 2}) {
    auto out = run(Op(OpKind::RoiAlign, 16).s("coordinate_transformation_mode", "output_half_pixel").i("sampling_ratio", ratio), rois, batch);
    REQUIRE(out.isOk());
    requireClose(values<float>((*out)[0]), {7.5f});
  }
  // half_pixel (opset 16's default) shifts the region by -0.5 pixel: centre (1, 1).
  auto shifted = run(Op(OpKind::RoiAlign, 16).i("sampling_ratio", 1), rois, batch);
  REQUIRE(shifted.isOk());
  requireClose(values<float>((*shifted)[0]), {5.0f});
  // Opset 10 has no coordinate mode and behaves as output_half_pixel.
  auto old = run(Op(OpKind::RoiAlign, 10).i("sampling_ratio", 1), rois, batch);
  REQUIRE(old.isOk());
  requireClose(values<float>((*old)[0]), {7.5f});
  // max: the largest weighted corner of the one sample: 0.25 * 10.
  auto max = run(Op(OpKind::RoiAlign, 10).s("mode", "max").i("sampling_ratio", 1), rois, batch);
  REQUIRE(max.isOk());
  requireClose(values<float>((*max)[0]), {2.5f});
  // 2x2 bins: centres at 0.75 and 2.25 on each axis.
  auto bins = run(Op(OpKind::RoiAlign, 10).i("output_height", 2).i("output_width", 2).i("sampling_ratio", 1), rois, batch);
  REQUIRE(bins.isOk());
  requireClose(values<float>((*bins)[0]), {3.75f, 5.25f, 9.75f, 11.25f});

  // Hostile regions: a batch index past X, a not-a-number corner (samples nothing), a region too large to sample.
  auto pastX = run(Op(OpKind::RoiAlign, 16), rois, int64s({1}, {1}));
  REQUIRE_FALSE(pastX.isOk());
  CHECK_THAT(pastX.error().message(), Catch::Contains("batch_indices[0] is 1"));
  auto nan = run(Op(OpKind::RoiAlign, 16).i("sampling_ratio", 1), floats({1, 4}, {std::nanf(""), 0, 3, 3}), batch);
  REQUIRE(nan.isOk());
  CHECK(values<float>((*nan)[0])[0] == 0.0f);
  auto huge = run(Op(OpKind::RoiAlign, 16), floats({1, 4}, {0, 0, 1e30f, 1e30f}), batch);
  REQUIRE_FALSE(huge.isOk());
  CHECK_THAT(huge.error().message(), Catch::Contains("exceed the limit"));
  // Attribute values the decoder refuses.
  CHECK_FALSE(run(Op(OpKind::RoiAlign, 16).i("output_height", 0), rois, batch).isOk());
  CHECK_FALSE(run(Op(OpKind::RoiAlign, 16).s("mode", "median"), rois, batch).isOk());
}
