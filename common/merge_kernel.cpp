// Run-time dispatched fp32 element-wise addition (see merge_kernel.h).
//
// Why every variant is bit-identical to the scalar loop: each output element is produced by exactly
// one IEEE 754 binary32 addition dst[i] + src[i] in round-to-nearest (MXCSR is shared by SSE and
// AVX), there is no multiply (so no FMA contraction) and no cross-element reduction (so nothing to
// reassociate). Vector width only changes how many independent additions run at once.
//
// Payloads sit at arbitrary byte offsets inside frames, so every access is unaligned: the vector
// kernels use loadu/storeu (masked for the AVX-512 tail) and the scalar paths go through memcpy,
// which stops the compiler from assuming 4-byte alignment when it auto-vectorises.
#include "merge_kernel.h"

#include <immintrin.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shesha::core {
namespace {

// x86 returns the first source operand's NaN when both operands are NaN, but addition is
// commutative to the compiler, which may swap the operands differently in each kernel. Pinning
// the order with one instruction of inline asm (dst is always the first source) keeps NaN payloads
// identical across kernels too. Each helper is exactly one IEEE addition per lane.
inline float add_pinned(float d, float s) noexcept {
    asm("addss %1, %0" : "+x"(d) : "x"(s));
    return d;
}

// AVX2 takes src straight from memory as the second source operand: one instruction fewer per
// vector than a separate load, which matters because this kernel is bound by instruction and store
// throughput when its payload is in cache. Unaligned memory operands are fine under VEX.
__attribute__((target("avx2"))) inline __m256 add_pinned(__m256 d, const float* src) noexcept {
    __m256 r;
    asm("vaddps %2, %1, %0" : "=x"(r) : "x"(d), "m"(*reinterpret_cast<const __m256_u*>(src)));  // r = d + src, d first
    return r;
}

__attribute__((target("avx512f"))) inline __m512 add_pinned(__m512 d, __m512 s) noexcept {
    __m512 r;
    asm("vaddps %2, %1, %0" : "=v"(r) : "v"(d), "v"(s));
    return r;
}

inline void add_one(float* dst, const float* src) noexcept {
    float d;
    float s;
    std::memcpy(&d, dst, sizeof d);
    std::memcpy(&s, src, sizeof s);
    d = add_pinned(d, s);
    std::memcpy(dst, &d, sizeof d);
}

void add_f32_scalar(float* dst, const float* src, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) add_one(dst + i, src + i);
}

__attribute__((target("avx2"))) void add_f32_avx2(float* dst, const float* src, std::size_t n) noexcept {
    std::size_t i = 0;
    // Four independent vectors per iteration (all loads of dst first, then add-from-memory and
    // store): fewer loop instructions per byte and no chain between the vectors.
    for (; i + 32 <= n; i += 32) {
        const __m256 d0 = _mm256_loadu_ps(dst + i);
        const __m256 d1 = _mm256_loadu_ps(dst + i + 8);
        const __m256 d2 = _mm256_loadu_ps(dst + i + 16);
        const __m256 d3 = _mm256_loadu_ps(dst + i + 24);
        _mm256_storeu_ps(dst + i, add_pinned(d0, src + i));
        _mm256_storeu_ps(dst + i + 8, add_pinned(d1, src + i + 8));
        _mm256_storeu_ps(dst + i + 16, add_pinned(d2, src + i + 16));
        _mm256_storeu_ps(dst + i + 24, add_pinned(d3, src + i + 24));
    }
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, add_pinned(_mm256_loadu_ps(dst + i), src + i));
    }
    for (; i < n; ++i) add_one(dst + i, src + i);
}

__attribute__((target("avx512f"))) void add_f32_avx512(float* dst, const float* src, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 d0 = _mm512_loadu_ps(dst + i);
        const __m512 d1 = _mm512_loadu_ps(dst + i + 16);
        const __m512 s0 = _mm512_loadu_ps(src + i);
        const __m512 s1 = _mm512_loadu_ps(src + i + 16);
        _mm512_storeu_ps(dst + i, add_pinned(d0, s0));
        _mm512_storeu_ps(dst + i + 16, add_pinned(d1, s1));
    }
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, add_pinned(_mm512_loadu_ps(dst + i), _mm512_loadu_ps(src + i)));
    }
    if (i < n) {
        // Masked-off lanes are neither read (no fault past the end) nor written.
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 d = _mm512_maskz_loadu_ps(m, dst + i);
        const __m512 s = _mm512_maskz_loadu_ps(m, src + i);
        _mm512_mask_storeu_ps(dst + i, m, add_pinned(d, s));
    }
}

bool cpu_has(SimdLevel l) noexcept {
    __builtin_cpu_init();  // idempotent; needed if the first call comes from a static initialiser
    switch (l) {
    case SimdLevel::Scalar: return true;
    case SimdLevel::Avx2: return __builtin_cpu_supports("avx2");
    case SimdLevel::Avx512: return __builtin_cpu_supports("avx512f");
    }
    return false;
}

// The level asked for by SHESHA_SIMD, or the detected one. Unknown or unsupported requests fall
// back with one warning (this runs once, from the static initialiser in active_state()).
SimdLevel initial_level() noexcept {
    const SimdLevel best = detect_simd();
    const char* env = std::getenv("SHESHA_SIMD");
    if (env == nullptr || *env == '\0') return best;
    SimdLevel want;
    if (std::strcmp(env, "scalar") == 0) {
        want = SimdLevel::Scalar;
    } else if (std::strcmp(env, "avx2") == 0) {
        want = SimdLevel::Avx2;
    } else if (std::strcmp(env, "avx512") == 0) {
        want = SimdLevel::Avx512;
    } else {
        std::fprintf(stderr, "shesha: SHESHA_SIMD=%s is not one of scalar|avx2|avx512; using %s\n", env,
                     to_string(best).data());
        return best;
    }
    if (!cpu_has(want)) {
        std::fprintf(stderr, "shesha: SHESHA_SIMD=%s is not supported by this CPU; using %s\n", env,
                     to_string(best).data());
        return best;
    }
    return want;
}

struct ActiveState {
    std::atomic<SimdLevel> level;
    std::atomic<AddF32Fn> kernel;
};

ActiveState make_active_state() noexcept {
    const SimdLevel l = initial_level();
    return ActiveState{l, add_f32_kernel(l)};
}

// Chosen once, on first use; set_simd_level() may replace it later (tests, benchmarks).
ActiveState& active_state() noexcept {
    static ActiveState state = make_active_state();
    return state;
}

}  // namespace

SimdLevel detect_simd() noexcept {
    if (cpu_has(SimdLevel::Avx512)) return SimdLevel::Avx512;
    if (cpu_has(SimdLevel::Avx2)) return SimdLevel::Avx2;
    return SimdLevel::Scalar;
}

std::string_view to_string(SimdLevel l) noexcept {
    switch (l) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::Avx2: return "avx2";
    case SimdLevel::Avx512: return "avx512";
    }
    return "unknown";
}

AddF32Fn add_f32_kernel(SimdLevel l) noexcept {
    if (!cpu_has(l)) l = detect_simd();
    switch (l) {
    case SimdLevel::Avx512: return &add_f32_avx512;
    case SimdLevel::Avx2: return &add_f32_avx2;
    case SimdLevel::Scalar: break;
    }
    return &add_f32_scalar;
}

SimdLevel active_simd() noexcept { return active_state().level.load(std::memory_order_relaxed); }

void set_simd_level(SimdLevel l) noexcept {
    ActiveState& s = active_state();
    if (!cpu_has(l)) l = detect_simd();
    s.level.store(l, std::memory_order_relaxed);
    s.kernel.store(add_f32_kernel(l), std::memory_order_relaxed);
}

void add_f32(float* dst, const float* src, std::size_t n) noexcept {
    active_state().kernel.load(std::memory_order_relaxed)(dst, src, n);
}

}  // namespace shesha::core
