// Weight sharing: one pool entry per content; packed weights pooled as recipes and packed ahead of the writer.
#include "../common/graph_builder.h"
#include "cpu/gemm.h"
#include "weightshare/source_weights.h"
#include "weightshare/weight_pool.h"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>

using namespace ctxkit;
using namespace ctxkit::testing;

TEST_CASE("weights are one entry per content, not per name", "[weightshare]") {
  weightshare::WeightPool pool;
  auto a = floatInit("a", {2, 3}).tensor;
  auto sameBytes = floatInit("b", {2, 3}).tensor;
  auto otherShape = floatInit("c", {3, 2}).tensor;
  auto otherBytes = floatInit("d", {2, 3}, 9.0f).tensor;
  CHECK(*pool.intern(a) == 0);
  CHECK(*pool.intern(sameBytes) == 0);
  CHECK(*pool.intern(otherShape) == 1);
  CHECK(*pool.intern(otherBytes) == 2);
  CHECK(pool.weights().size() == 3);
  CHECK(pool.referencedBytes() == 4 * 24);
  CHECK(pool.uniqueBytes() == 3 * 24);
  CHECK(pool.weights()[0].references == 2);
}

// The pool written to a container in memory, which opens and verifies.
static std::vector<std::byte> writePool(const weightshare::WeightPool& pool) {
  format::ContainerWriter writer(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(weightshare::addPoolWeights(writer, pool));
  auto bytes = writer.serialize();
  REQUIRE(bytes);
  auto view = format::ContainerView::open(*bytes, nullptr, "pool.bin");
  REQUIRE(view);
  REQUIRE(view->verify());
  return std::move(bytes).value();
}

TEST_CASE("packed weights are pooled as recipes: sampled, hashed only to tell look-alikes apart, written packed",
          "[weightshare]") {
  const cpu::WeightLayout panels{cpu::WeightLayoutKind::GemmPanels, 8, 7};  // K = 20, N = 13: odd blocks and panels
  const cpu::WeightLayout transposed{cpu::WeightLayoutKind::GemmPanelsTransposed, 8, 7};
  auto b = floatInit("b", {20, 13}, 1.0f).tensor;
  auto sameBytes = floatInit("b2", {20, 13}, 1.0f).tensor;  // other storage, equal bytes
  auto packed = cpu::packWeight(panels, b);
  REQUIRE(packed);
  // A plain 1-D weight whose bytes are exactly b's packed bytes: the same stored weight.
  auto packedCopy = ir::Tensor::copyOf(ir::ElemType::Float, packed->shape(), packed->bytes());
  REQUIRE(packedCopy);

  weightshare::WeightPool pool;
  CHECK(*pool.intern(b, panels) == 0);
  CHECK(pool.bytesHashed() == 0);       // nothing like it yet: its fingerprint is enough
  CHECK(*pool.intern(b, panels) == 0);  // the same storage in the same layout
  CHECK(pool.bytesHashed() == 0);
  CHECK(*pool.intern(sameBytes, panels) == 0);  // equal fingerprints: both hashed, then compared
  CHECK(pool.bytesHashed() == 2 * packed->byteSize());
  CHECK(*pool.intern(*packedCopy) == 0);
  CHECK(*pool.intern(b) == 1);               // plain: other bytes
  CHECK(*pool.intern(b, transposed) == 2);  // b as a transposed B operand: other bytes
  CHECK(pool.weights().size() == 3);
  CHECK(pool.weights()[0].references == 4);
  const auto& w = pool.weights()[0];
  CHECK(w.shape == packed->shape());
  CHECK(w.size == packed->byteSize());
  CHECK(*w.storedHash() == hash128(packed->bytes()));
  CHECK(*pool.weights()[2].storedHash() == hash128(cpu::packWeight(transposed, b)->bytes()));
  CHECK_FALSE(pool.intern(floatInit("v", {4}).tensor, panels));  // a 1-D weight has no panel layout

  // The container gets the packed bytes, produced while it is written, under the hash of those bytes.
  auto bytes = writePool(pool);
  auto view = format::ContainerView::open(bytes, nullptr, "pool.bin");
  REQUIRE(view);
  REQUIRE(view->weights().size() == 3);
  auto stored = view->weightBytes(0);
  REQUIRE(stored.size() == packed->byteSize());
  CHECK(std::memcmp(stored.data(), packed->data(), stored.size()) == 0);
  CHECK(view->weights()[0].hash == hash128(packed->bytes()));
  CHECK(view->weights()[0].shape == packed->shape());
  // Fingerprints sample the stored bytes: weights that differ only between the samples are hashed, and kept apart.
  {
    weightshare::WeightPool large;
    std::vector<float> values(1 << 16, 1.0f);
    auto first = ir::Tensor::fromVector(ir::ElemType::Float, {256, 256}, values);
    values[12345] = 2.0f;  // between two sampled windows
    auto second = ir::Tensor::fromVector(ir::ElemType::Float, {256, 256}, values);
    CHECK(*large.intern(first, panels) == 0);
    CHECK(*large.intern(second, panels) == 1);
    CHECK(large.bytesHashed() == 2 * large.weights()[0].size);
    CHECK(large.weights()[0].fingerprint == large.weights()[1].fingerprint);
    // Two recipes of other shapes whose packed bytes are equal (all zeros, 64 K floats each): one stored weight.
    auto zerosWide = ir::Tensor::fromVector(ir::ElemType::Float, {128, 512}, std::vector<float>(1 << 16));
    auto zerosTall = ir::Tensor::fromVector(ir::ElemType::Float, {512, 128}, std::vector<float>(1 << 16));
    CHECK(*large.intern(zerosWide, panels) == 2);
    CHECK(*large.intern(zerosTall, panels) == 2);
    auto written = writePool(large);
    auto opened = format::ContainerView::open(written, nullptr, "large.bin");
    REQUIRE(opened);
    REQUIRE(opened->weights().size() == 3);
    CHECK(opened->weights()[1].hash == hash128(cpu::packWeight(panels, second)->bytes()));
  }
  // A producer that gives the wrong byte count fails the write instead of leaving a short weight.
  format::ContainerWriter wrong(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(wrong.addWeight(ir::ElemType::Float, {4}, 16, Hash128{}, [&](const auto& sink) {
    return sink(packed->bytes().first(8));
  }));
  CHECK_FALSE(wrong.serialize());
}

TEST_CASE("a pool's packed weights are packed ahead of the writer, across weights, for every output call",
          "[weightshare]") {
  const cpu::WeightLayout panels{cpu::WeightLayoutKind::GemmPanels, 16, 256};
  const cpu::WeightLayout transposed{cpu::WeightLayoutKind::GemmPanelsTransposed, 8, 256};
  weightshare::WeightPool pool;
  std::vector<std::pair<ir::Tensor, cpu::WeightLayout>> added;
  for (int i = 0; i < 4; ++i) {  // 1.6 MiB each: two pieces, and more pieces in all than the packer queues
    std::vector<float> values(600 * 700);
    for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>((k * 7 + i) % 1000);
    added.emplace_back(ir::Tensor::fromVector(ir::ElemType::Float, {600, 700}, values), i % 2 ? transposed : panels);
    CHECK(*pool.intern(added.back().first, added.back().second) == added.size() - 1);
    added.emplace_back(floatInit(fmt::format("plain{}", i), {3}, static_cast<float>(i)).tensor, cpu::WeightLayout{});
    CHECK(*pool.intern(added.back().first) == added.size() - 1);  // plain ones between the packed ones
  }
  format::ContainerWriter writer(format::CompatInfo{"ctxkit", "test", "cpu", "1"});
  REQUIRE(weightshare::addPoolWeights(writer, pool));
  auto first = writer.serialize();
  REQUIRE(first);
  auto second = writer.serialize();  // the packing thread starts over
  REQUIRE(second);
  CHECK(*first == *second);
  auto view = format::ContainerView::open(*first, nullptr, "ahead.bin");
  REQUIRE(view);
  REQUIRE(view->verify());
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& [tensor, layout] = added[i];
    auto stored = layout.plain() ? std::optional(tensor) : std::optional(*cpu::packWeight(layout, tensor));
    REQUIRE(view->weightBytes(i).size() == stored->byteSize());
    CHECK(std::memcmp(view->weightBytes(i).data(), stored->data(), stored->byteSize()) == 0);
    CHECK(view->weights()[i].hash == hash128(stored->bytes()));
  }
  // A write that fails in the middle of a packed weight (the file size limit: EFBIG) leaves no file, and the next
  // output call starts the packing over and gives the same bytes.
  const auto path = std::filesystem::temp_directory_path() / fmt::format("ctxkit_ahead_{}.bin", ::getpid());
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 3 << 20;  // in the second packed weight
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  Status failed = writer.write(path);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
  std::signal(SIGXFSZ, previous);
  CHECK_FALSE(failed.isOk());
  CHECK_FALSE(std::filesystem::exists(path));
  REQUIRE(writer.write(path));
  auto file = readFile(path);
  REQUIRE(file);
  REQUIRE(file->size() == first->size());
  CHECK(std::memcmp(file->data(), first->data(), file->size()) == 0);
  std::filesystem::remove(path);
}
