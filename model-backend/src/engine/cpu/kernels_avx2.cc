// AVX2/FMA/F16C kernels. Compiled with -mavx2 -mfma -mf16c; only reached after
// CpuHasAvx2() said yes. Internal linkage throughout (see quants.h).
#include <immintrin.h>

#include "cpu/kernels.h"
#include "cpu/quants.h"

namespace sinew::model::cpu {
namespace {}  // namespace

void FillAvx2Kernels(KernelTable* t) { (void)t; }

}  // namespace sinew::model::cpu
