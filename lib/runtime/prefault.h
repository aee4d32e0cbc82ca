// Memory a run would otherwise fault in on first touch, made resident when a program is loaded instead: the arena of
// a frame (written) and the mapped weights (read). Time to first result then is load plus one steady-state run.
#pragma once

#include <cstddef>

namespace ctxkit::runtime {

// Allocates `size` bytes aligned to 64 (huge-page aligned and advised when large, so that the arena takes few TLB
// entries and few faults); free with freeArena. Null when out of memory.
void* allocateArena(size_t size);
void freeArena(void* p);

// Makes [p, p + size) resident and writable (page tables filled), in one system call where the kernel offers it.
void prefaultWritable(void* p, size_t size);
// Makes [p, p + size) of a mapping resident for reading: a file's pages come from the page cache (read from disk
// when they are not there) and are mapped now, not on first touch.
void prefaultReadable(const void* p, size_t size);

// Maps the code and read-only data of the object that holds ctxkit's runtime (the executable it is linked into, or
// the shared library, e.g. the plugin EP) into this process' page tables, once per process: a first run otherwise
// takes a page fault for each 64 KiB of kernel code it executes for the first time (the kernel maps file pages
// around a fault 16 at a time). Returns the bytes of the segments mapped by this call (0 when already done, or when
// the object cannot be found).
size_t prefaultCode();

}  // namespace ctxkit::runtime
