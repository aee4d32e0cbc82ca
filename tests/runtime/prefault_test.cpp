// Pre-faulting at load (lib/runtime/prefault.h): memory made resident keeps what it holds and stays usable, for an
// arena below and above the huge-page size and for a read-only file mapping; the runtime's code is mapped whole.
#include "runtime/prefault.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace ctxkit;

namespace {
uint8_t patternAt(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }
}  // namespace

TEST_CASE("an arena pre-faulted after it was written keeps every byte", "[runtime][prefault]") {
  // Below one huge page, just above, and an odd size over several.
  for (size_t size : {size_t{4096 * 3 + 17}, (size_t{2} << 20) + 64, (size_t{5} << 20) + 4096 + 7}) {
    INFO(size);
    auto* p = static_cast<uint8_t*>(runtime::allocateArena(size));
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    for (size_t i = 0; i < size; ++i) p[i] = patternAt(i);
    runtime::prefaultWritable(p, size);
    runtime::prefaultReadable(p, size);
    size_t wrong = 0;
    for (size_t i = 0; i < size; ++i) wrong += p[i] != patternAt(i);
    CHECK(wrong == 0);
    runtime::freeArena(p);
  }
}

TEST_CASE("a fresh arena pre-faulted is writable end to end", "[runtime][prefault]") {
  const size_t size = (size_t{3} << 20) + 123;
  auto* p = static_cast<uint8_t*>(runtime::allocateArena(size));
  REQUIRE(p != nullptr);
  runtime::prefaultWritable(p, size);
  for (size_t i = 0; i < size; ++i) p[i] = patternAt(i + 1);
  size_t wrong = 0;
  for (size_t i = 0; i < size; ++i) wrong += p[i] != patternAt(i + 1);
  CHECK(wrong == 0);
  runtime::freeArena(p);
  runtime::prefaultWritable(nullptr, 0);  // nothing to do
  runtime::prefaultReadable(nullptr, 0);
}

TEST_CASE("a read-only file mapping pre-faulted at an unaligned offset reads the file's bytes", "[runtime][prefault]") {
  const auto path = std::filesystem::temp_directory_path() / ("ctxkit_prefault_" + std::to_string(::getpid()));
  const size_t size = 300 * 1024 + 5;
  {
    std::ofstream f(path, std::ios::binary);
    for (size_t i = 0; i < size; ++i) f.put(static_cast<char>(patternAt(i)));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  REQUIRE(m != MAP_FAILED);
  const auto* bytes = static_cast<const uint8_t*>(m);
  runtime::prefaultReadable(bytes + 4097, size - 4097 - 3);  // a weight neither starting nor ending on a page
  size_t wrong = 0;
  for (size_t i = 0; i < size; ++i) wrong += bytes[i] != patternAt(i);
  CHECK(wrong == 0);
  ::munmap(m, size);
  std::filesystem::remove(path);
}

namespace {
// Size and Rss (kB) of the mapping of this process that holds `address`, from /proc/self/smaps; {0, 0} if none.
std::pair<long, long> mappingSizeAndRss(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  long size = 0;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(' ') > line.find('-')) {
      inside = address >= begin && address < end;
      continue;
    }
    if (!inside) continue;
    long kb = 0;
    if (std::sscanf(line.c_str(), "Size: %ld kB", &kb) == 1) size = kb;
    if (std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return {size, kb};
  }
  return {0, 0};
}
}  // namespace

TEST_CASE("pre-faulting the code maps every page of the runtime's code segment once per process", "[runtime][prefault]") {
  // This test binary links the runtime in: its code segment holds prefaultCode. Most of it (kernels no test here
  // runs) has never executed, so without pre-faulting only part of it is mapped.
  const auto address = reinterpret_cast<uintptr_t>(&runtime::prefaultCode);
  const auto [sizeKb, rssBefore] = mappingSizeAndRss(address);
  REQUIRE(sizeKb > 0);
  INFO("code mapping " << sizeKb << " kB, resident before " << rssBefore << " kB");
  // The first call maps the segments (a session loaded earlier in this process may have made it already).
  runtime::prefaultCode();
  CHECK(runtime::prefaultCode() == 0);  // once per process
  const auto [sizeAfter, rssAfter] = mappingSizeAndRss(address);
  CHECK(sizeAfter == sizeKb);
  CHECK(rssAfter == sizeKb);
}
