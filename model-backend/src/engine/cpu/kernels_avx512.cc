// AVX-512 (F, BW, VL, VNNI) kernels. Compiled with the matching -m flags; only
// reached after CpuHasAvx512() said yes. Internal linkage throughout.
#include <immintrin.h>

#include "cpu/kernels.h"
#include "cpu/quants.h"

namespace sinew::model::cpu {
namespace {}  // namespace

void FillAvx512Kernels(KernelTable* t) { (void)t; }

}  // namespace sinew::model::cpu
