// The instruction-set extensions this machine's CPU offers, as one list for everything that names them: the device
// profile (`ctxrun --print-device`) and the key of ctxgen's kernel-tuning cache. Kernels pick their own code paths
// at run time (gemm.cpp, qgemm.cpp); this list only describes the machine.
#pragma once

#include <string>
#include <vector>

namespace ctxkit::cpu {

// The architecture: "x86-64", "aarch64" or "generic".
const char* architectureName();

// The extensions found, in a fixed order (sse4.2, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512vnni on x86-64;
// empty elsewhere). Computed once.
const std::vector<std::string>& cpuFeatures();

}  // namespace ctxkit::cpu
