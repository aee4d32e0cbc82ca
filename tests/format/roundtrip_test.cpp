// Container round trips: what the writer adds, the reader returns, deterministically and zero-copy.
#include "container_test_util.h"

#include <cstdint>

using namespace ctxkit;
using namespace ctxkit::format;
using namespace ctxkit::format::testing;

namespace {

void checkMatchesSample(const ContainerView& view, const Sample& s) {
  CHECK(view.compat().producer == "ctxkit");
  CHECK(view.compat().producerVersion == "0.1.0");
  CHECK(view.compat().targetId == "npu-sim");
  CHECK(view.compat().targetRevision == "1");
  CHECK(view.compat().formatMajor == kFormatMajor);
  CHECK(view.compat().formatMinor == kFormatMinor);
  REQUIRE(view.graphs().size() == s.graphs.size());
  for (size_t i = 0; i < s.graphs.size(); ++i) {
    CHECK(view.graphs()[i].name == s.graphs[i].name);
    CHECK(view.graphs()[i].sourceModel == s.graphs[i].source);
    auto program = view.programBytes(i);
    CHECK(std::vector<std::byte>(program.begin(), program.end()) == s.graphs[i].program);
    CHECK(view.graphs()[i].programOffset % view.alignment() == 0);
  }
  REQUIRE(view.weights().size() == s.weights.size());
  for (size_t i = 0; i < s.weights.size(); ++i) {
    const WeightInfo& w = view.weights()[i];
    CHECK(w.type == s.weights[i].type);
    CHECK(w.shape == s.weights[i].shape);
    CHECK(w.size == s.weights[i].bytes.size());
    CHECK(w.hash == hash128(s.weights[i].bytes));
    CHECK(w.offset % view.alignment() == 0);
    auto offset = s.writer->weightFileOffset(static_cast<uint32_t>(i));
    REQUIRE(offset.isOk());
    CHECK(*offset == w.offset);
    auto bytes = view.weightBytes(i);
    CHECK(std::vector<std::byte>(bytes.begin(), bytes.end()) == s.weights[i].bytes);
  }
}

}  // namespace

TEST_CASE("round trip through serialize keeps graphs, weights and compatibility info", "[format]") {
  for (uint64_t alignment : {uint64_t{64}, uint64_t{4096}}) {
    INFO("alignment " << alignment);
    Sample s = makeSample(alignment);
    auto bytes = s.writer->serialize();
    REQUIRE(bytes.isOk());
    auto view = openBytes(*bytes);
    REQUIRE(view.isOk());
    CHECK(view->alignment() == alignment);
    CHECK(view->fileSize() == bytes->size());
    checkMatchesSample(*view, s);
    CHECK(view->verify().isOk());
    CHECK(view->findGraph("m2_ctxkit_0") == &view->graphs()[2]);
    CHECK(view->findGraph("missing") == nullptr);
  }
}

TEST_CASE("write streams the same bytes as serialize and the mapped file round trips", "[format]") {
  for (uint64_t alignment : {uint64_t{64}, uint64_t{4096}}) {
    INFO("alignment " << alignment);
    Sample s = makeSample(alignment);
    auto path = tempPath(fmt::format("roundtrip_{}.bin", alignment));
    REQUIRE(s.writer->write(path).isOk());
    auto serialized = s.writer->serialize();
    REQUIRE(serialized.isOk());
    CHECK(readAll(path) == *serialized);

    auto view = ContainerView::openFile(path);
    REQUIRE(view.isOk());
    CHECK(view->displayName() == path.string());
    checkMatchesSample(*view, s);
    CHECK(view->verify().isOk());
    // The mapping starts on a page boundary, so file-offset alignment is memory alignment.
    for (size_t i = 0; i < view->weights().size(); ++i)
      CHECK(reinterpret_cast<uintptr_t>(view->weightBytes(i).data()) % alignment == 0);
    std::filesystem::remove(path);
  }
}

TEST_CASE("two writers given the same adds produce byte-identical files", "[format]") {
  Sample a = makeSample();
  Sample b = makeSample();
  auto pa = tempPath("determinism_a.bin");
  auto pb = tempPath("determinism_b.bin");
  REQUIRE(a.writer->write(pa).isOk());
  REQUIRE(b.writer->write(pb).isOk());
  CHECK(readAll(pa) == readAll(pb));
  auto sa = a.writer->serialize();
  auto sa2 = a.writer->serialize();
  REQUIRE(sa.isOk());
  REQUIRE(sa2.isOk());
  CHECK(*sa == *sa2);
  std::filesystem::remove(pa);
  std::filesystem::remove(pb);
}

TEST_CASE("weight offsets honour the alignment, follow the programs and tile the data region", "[format]") {
  for (uint64_t alignment : {uint64_t{64}, uint64_t{256}, uint64_t{4096}, uint64_t{65536}}) {
    INFO("alignment " << alignment);
    Sample s = makeSample(alignment);
    auto bytes = s.writer->serialize();
    REQUIRE(bytes.isOk());
    auto h = getHeader(*bytes);
    CHECK(h.dataOffset % alignment == 0);
    uint64_t cursor = h.dataOffset;
    for (size_t i = 0; i < s.graphs.size(); ++i) {
      auto e = getGraph(*bytes, i);
      CHECK(e.programOffset == (cursor + alignment - 1) / alignment * alignment);
      cursor = e.programOffset + e.programSize;
    }
    for (size_t i = 0; i < s.weights.size(); ++i) {
      auto offset = s.writer->weightFileOffset(static_cast<uint32_t>(i));
      REQUIRE(offset.isOk());
      CHECK(*offset % alignment == 0);
      CHECK(*offset == (cursor + alignment - 1) / alignment * alignment);
      cursor = *offset + s.weights[i].bytes.size();
    }
    CHECK(cursor == bytes->size());
  }
}

TEST_CASE("weightFileOffset is stable across later calls and rejects bad indices", "[format]") {
  Sample s = makeSample();
  auto before = s.writer->weightFileOffset(3);
  REQUIRE(before.isOk());
  auto again = s.writer->weightFileOffset(3);
  REQUIRE(again.isOk());
  CHECK(*before == *again);
  CHECK_FALSE(s.writer->weightFileOffset(static_cast<uint32_t>(s.weights.size())).isOk());
}

TEST_CASE("weightTensor views the container bytes in place and keeps them alive", "[format]") {
  Sample s = makeSample();
  auto bytes = s.writer->serialize();
  REQUIRE(bytes.isOk());
  auto owned = std::make_shared<std::vector<std::byte>>(*bytes);
  std::weak_ptr<std::vector<std::byte>> watch = owned;
  ir::Tensor tensor;
  {
    std::span<const std::byte> span(*owned);
    auto view = ContainerView::open(span, owned, "t.bin");
    owned.reset();
    REQUIRE(view.isOk());
    auto t = view->weightTensor(0);
    REQUIRE(t.isOk());
    CHECK(t->data() == view->weightBytes(0).data());
    CHECK(t->type() == ir::ElemType::Float);
    CHECK(t->shape() == ir::Shape{2, 3});
    CHECK_FALSE(t->isWritable());
    tensor = std::move(t).value();
    auto packed = view->weightTensor(4);
    REQUIRE(packed.isOk());
    CHECK(packed->byteSize() == 2);
    auto bad = view->weightTensor(99);
    REQUIRE_FALSE(bad.isOk());
    CHECK(bad.error().message().find("out of range") != std::string::npos);
  }
  // The view is gone; the tensor alone keeps the buffer alive.
  CHECK_FALSE(watch.expired());
  CHECK(std::vector<std::byte>(tensor.bytes().begin(), tensor.bytes().end()) == s.weights[0].bytes);
}

TEST_CASE("an empty container is valid", "[format]") {
  ContainerWriter writer(sampleCompat());
  auto bytes = writer.serialize();
  REQUIRE(bytes.isOk());
  auto view = openBytes(*bytes);
  REQUIRE(view.isOk());
  CHECK(view->graphs().empty());
  CHECK(view->weights().empty());
  CHECK(view->verify().isOk());
}

TEST_CASE("the writer records its own format version whatever the caller passes", "[format]") {
  CompatInfo compat = sampleCompat();
  compat.formatMajor = 7;
  compat.formatMinor = 9;
  ContainerWriter writer(compat);
  auto bytes = writer.serialize();
  REQUIRE(bytes.isOk());
  auto view = openBytes(*bytes);
  REQUIRE(view.isOk());
  CHECK(view->compat().formatMajor == kFormatMajor);
  CHECK(view->compat().formatMinor == kFormatMinor);
}
