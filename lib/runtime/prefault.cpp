// Pre-faulting a program's memory at load (docs/runtime.md#time-to-first-result).
#include "runtime/prefault.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace ctxkit::runtime {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t pageSize() {
  static const size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

// [begin, end) widened to whole pages.
struct PageRange {
  uintptr_t begin, end;
};
PageRange pagesOf(const void* p, size_t size) {
  const uintptr_t page = pageSize();
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  return {at / page * page, (at + size + page - 1) / page * page};
}

// madvise(advice) over the pages of [p, p + size); false when the kernel does not know the advice.
bool advise(const void* p, size_t size, int advice) {
  const PageRange r = pagesOf(p, size);
  return ::madvise(reinterpret_cast<void*>(r.begin), r.end - r.begin, advice) == 0;
}

}  // namespace

void* allocateArena(size_t size) {
  if (size < kHugePage) return std::aligned_alloc(64, (size + 63) / 64 * 64);
  // Whole huge pages, aligned, so that transparent huge pages (when the system allows them on request) back all of it.
  const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
#ifdef MADV_HUGEPAGE
  if (p) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it the arena is ordinary pages
#endif
  return p;
}

void freeArena(void* p) { std::free(p); }

void prefaultWritable(void* p, size_t size) {
  if (!p || size == 0) return;
#ifdef MADV_POPULATE_WRITE
  if (advise(p, size, MADV_POPULATE_WRITE)) return;
#endif
  // An older kernel: touch a byte of each page. Writing zero over a fresh page does not change what it holds to the
  // program (an arena's contents are undefined until an op writes them).
  const size_t page = pageSize();
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (size_t at = 0; at < size; at += page) bytes[at] = bytes[at];
  bytes[size - 1] = bytes[size - 1];
}

void prefaultReadable(const void* p, size_t size) {
  if (!p || size == 0) return;
#ifdef MADV_POPULATE_READ
  if (advise(p, size, MADV_POPULATE_READ)) return;
#endif
  const size_t page = pageSize();
  const auto* bytes = static_cast<const volatile unsigned char*>(p);
  unsigned char sink = 0;
  for (size_t at = 0; at < size; at += page) sink ^= bytes[at];
  sink ^= bytes[size - 1];
  (void)sink;
}

namespace {

// The object whose segments contain `address`, and the bytes of its non-writable loaded segments once mapped.
struct CodeSearch {
  uintptr_t address = 0;
  size_t mapped = 0;
};

int mapObjectHolding(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<CodeSearch*>(data);
  bool holds = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search->address >= begin && search->address - begin < ph.p_memsz;
  }
  if (!holds) return 0;
  // Code and read-only data only: a writable segment's pages are the process' own (copied on write), made as used.
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0 || ph.p_memsz == 0) continue;
    prefaultReadable(reinterpret_cast<const void*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    search->mapped += ph.p_memsz;
  }
  return 1;
}

}  // namespace

size_t prefaultCode() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return 0;
  CodeSearch search;
  search.address = reinterpret_cast<uintptr_t>(&prefaultCode);
  ::dl_iterate_phdr(mapObjectHolding, &search);
  return search.mapped;
}

}  // namespace ctxkit::runtime
