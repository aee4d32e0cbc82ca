// ctxgen --tune's timing cache (codegen::KernelTuner): measured once, reused from the file by a later run, keyed by
// the CPU's features, and a damaged file refused naming it. Timings themselves are never asserted.
#include "codegen/passes/passes.h"
#include "kernels/kernels.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ctxkit;
namespace fs = std::filesystem;

namespace {

fs::path tempCache(const char* name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("ctxkit_tune_test_{}", ::getpid());
  fs::create_directories(dir);
  fs::path p = dir / name;
  fs::remove(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

struct Shapes {
  ops::ConvAttrs attrs;
  ir::Shape x{1, 8, 6, 6}, w{8, 8, 3, 3};
  Shapes() { attrs.window.pads.emplace(4, 1); }
  std::vector<cpu::ConvAlgorithm> candidates() const { return kernels::convAlgorithms(attrs, x, w, true); }
};

}  // namespace

TEST_CASE("the tuning cache is written once measured and read back by a later run") {
  const fs::path path = tempCache("round_trip.tsv");
  const Shapes s;
  const auto candidates = s.candidates();
  REQUIRE(candidates.size() >= 3);
  cpu::ConvAlgorithm first;
  {
    auto tuner = codegen::KernelTuner::open(path);  // absent: an empty cache
    REQUIRE(tuner);
    auto chosen = (*tuner)->chooseConv(s.attrs, s.x, s.w, true, candidates, "p", "conv_a");
    REQUIRE(chosen);
    first = *chosen;
    CHECK(std::find(candidates.begin(), candidates.end(), first) != candidates.end());
    // The same op again (another node of the same shape): from the cache.
    REQUIRE((*tuner)->chooseConv(s.attrs, s.x, s.w, true, candidates, "p", "conv_b"));
    CHECK((*tuner)->misses() == 1);
    CHECK((*tuner)->hits() == 1);
    REQUIRE((*tuner)->choices().size() == 2);
    CHECK(!(*tuner)->choices()[0].cacheHit);
    CHECK((*tuner)->choices()[1].cacheHit);
    CHECK((*tuner)->choices()[0].heuristic == candidates[0]);
    REQUIRE((*tuner)->save());
  }
  const std::string text = slurp(path);
  CHECK(text.rfind("ctxkit-tune-cache 1\n", 0) == 0);
  CHECK(text.find(codegen::KernelTuner::cpuFeatures() + "\tConv x=1x8x6x6 w=8x8x3x3 bias=1") != std::string::npos);
  {
    auto tuner = codegen::KernelTuner::open(path);
    REQUIRE(tuner);
    auto chosen = (*tuner)->chooseConv(s.attrs, s.x, s.w, true, candidates, "p", "conv_a");
    REQUIRE(chosen);
    CHECK(*chosen == first);
    CHECK((*tuner)->hits() == 1);
    CHECK((*tuner)->misses() == 0);
    // Another bias or attribute is another op.
    REQUIRE((*tuner)->chooseConv(s.attrs, s.x, s.w, false, candidates, "p", "conv_c"));
    CHECK((*tuner)->misses() == 1);
  }
  // A record without a time for one of today's candidates (written before that algorithm existed) is measured again.
  {
    const cpu::ConvAlgorithm drop = candidates.back() == first ? candidates[candidates.size() - 2] : candidates.back();
    const std::string entry = std::string(cpu::convAlgorithmName(drop)) + "=";
    std::string older = text;
    const size_t line = older.find(codegen::KernelTuner::cpuFeatures() + "\tConv x=1x8x6x6");
    REQUIRE(line != std::string::npos);
    const size_t lineEnd = older.find('\n', line), times = older.rfind('\t', lineEnd) + 1;
    std::string kept;  // the times field without `drop`'s
    for (size_t at = times; at < lineEnd;) {
      const size_t next = std::min(older.find(',', at), lineEnd);
      const std::string item = older.substr(at, next - at);
      if (item.rfind(entry, 0) != 0) kept += (kept.empty() ? "" : ",") + item;
      at = next + 1;
    }
    REQUIRE(kept.size() < lineEnd - times);
    older.replace(times, lineEnd - times, kept);
    put(path, older);
    auto tuner = codegen::KernelTuner::open(path);
    REQUIRE(tuner);
    REQUIRE((*tuner)->chooseConv(s.attrs, s.x, s.w, true, candidates, "p", "conv_a"));
    CHECK((*tuner)->misses() == 1);
    put(path, text);
  }
  // A record of another CPU's features is not this CPU's: measured again, the other kept.
  std::string other = text;
  for (size_t at = other.find(codegen::KernelTuner::cpuFeatures()); at != std::string::npos;
       at = other.find(codegen::KernelTuner::cpuFeatures(), at + 1))
    other.replace(at, codegen::KernelTuner::cpuFeatures().size(), "another-cpu sgemm=sse2");
  put(path, other);
  {
    auto tuner = codegen::KernelTuner::open(path);
    REQUIRE(tuner);
    REQUIRE((*tuner)->chooseConv(s.attrs, s.x, s.w, true, candidates, "p", "conv_a"));
    CHECK((*tuner)->misses() == 1);
    REQUIRE((*tuner)->save());
  }
  CHECK(slurp(path).find("another-cpu sgemm=sse2\tConv") != std::string::npos);
  fs::remove_all(path.parent_path());
}

TEST_CASE("a damaged or foreign tuning cache is an error naming the file and line") {
  const fs::path path = tempCache("hostile.tsv");
  const std::string head = "ctxkit-tune-cache 1\n";
  const std::string cpu = codegen::KernelTuner::cpuFeatures();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "line 1: empty"},
      {"something else\n", "line 1: expected the header"},
      {head + "only\ttwo\n", "line 2: 2 tab-separated fields"},
      {head + cpu + "\tConv x\tfft\tfft=1\n", "unknown algorithm 'fft'"},
      {head + cpu + "\tConv x\theuristic\theuristic=1\n", "unknown algorithm 'heuristic'"},
      {head + cpu + "\tConv x\tdirect\tdirect=nan\n", "'direct=nan' is not algorithm=milliseconds"},
      {head + cpu + "\tConv x\tdirect\tdirect=-1\n", "is not algorithm=milliseconds"},
      {head + cpu + "\tConv x\tdirect\tdirect=1x\n", "is not algorithm=milliseconds"},
      {head + cpu + "\tConv x\tdirect\tgemm=1\n", "the chosen algorithm has no time"},
      {head + std::string("\0\1\2", 3), "line 2"},
  };
  for (const auto& [text, why] : bad) {
    INFO(text);
    put(path, text);
    auto tuner = codegen::KernelTuner::open(path);
    REQUIRE(!tuner);
    CHECK_THAT(tuner.error().message(), Catch::Contains(path.string()) && Catch::Contains(why));
  }
  // A folder where the file should be.
  fs::remove(path);
  fs::create_directories(path);
  CHECK(!codegen::KernelTuner::open(path));
  fs::remove_all(path.parent_path());
}
