// CTX_SIMD_CLONES: compiles a function once per x86-64 level (AVX-512, AVX2+FMA, baseline SSE2) and picks
// the best at load time, so plain C++ loops vectorize as wide as the CPU allows.
#pragma once

// ThreadSanitizer crashes in ifunc resolvers (which target_clones uses), so sanitized builds go without.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CTX_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CTX_SIMD_CLONES
#endif
