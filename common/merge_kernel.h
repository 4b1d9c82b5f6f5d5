// Element-wise fp32 addition used to merge gradients: dst[i] += src[i].
// The implementation is chosen once at run time from the CPU's flags (AVX-512F, AVX2, scalar).
// Every variant does exactly one IEEE 754 binary32 addition per element, in the same order, so
// results are bit-identical to the scalar loop. When both operands are NaN, the result is dst's
// NaN (quieted), in every variant. Pointers need no alignment (Shesha payloads start
// at odd offsets inside frames). Elements are little-endian, as on the wire.
#pragma once

#include <cstddef>
#include <string_view>

namespace shesha::core {

enum class SimdLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };

using AddF32Fn = void (*)(float* dst, const float* src, std::size_t n) noexcept;

SimdLevel detect_simd() noexcept;             // best level this CPU supports
std::string_view to_string(SimdLevel l) noexcept;
// The kernel for a level; a level the CPU lacks falls back to the best one it has.
AddF32Fn add_f32_kernel(SimdLevel l) noexcept;

// The process-wide choice: detect_simd() unless overridden (SHESHA_SIMD=scalar|avx2|avx512 in the
// environment, or set_simd_level()).
SimdLevel active_simd() noexcept;
void set_simd_level(SimdLevel l) noexcept;
void add_f32(float* dst, const float* src, std::size_t n) noexcept;

}  // namespace shesha::core
