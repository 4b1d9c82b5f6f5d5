// Run-time dispatched optimizer loops (optimizer_kernels.h). Built with -ffp-contract=off.
#include "model/optimizer_kernels.h"

#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace shesha::rl::kernels {
namespace {

// ---- scalar: the reference order of operations ----------------------------------------------

inline void sgd_one(float* p, const float* g, std::size_t i, float step) noexcept { p[i] = p[i] - step * g[i]; }

inline void rmsprop_one(float* p, float* sq, const float* gradient, std::size_t i, float scale, float lr, float alpha,
                        float one_minus_alpha, float eps) noexcept {
    const float g = gradient[i] * scale;
    const float s = alpha * sq[i] + one_minus_alpha * g * g;
    sq[i] = s;
    p[i] = p[i] - lr * g / std::sqrt(s + eps);
}

inline void adam_one(float* p, float* m, float* v, const float* gradient, std::size_t i, float scale, float step_size,
                     float beta1, float one_minus_beta1, float beta2, float one_minus_beta2, float sqrt_c2,
                     float eps) noexcept {
    const float g = gradient[i] * scale;
    const float mi = beta1 * m[i] + one_minus_beta1 * g;
    const float vi = beta2 * v[i] + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] - step_size * mi / (std::sqrt(vi) / sqrt_c2 + eps);
}

void sgd_scalar(float* p, const float* g, std::size_t n, float step) noexcept {
    for (std::size_t i = 0; i < n; ++i) sgd_one(p, g, i, step);
}
void rmsprop_scalar(float* p, float* sq, const float* g, std::size_t n, float scale, float lr, float alpha,
                    float eps) noexcept {
    const float one_minus_alpha = 1.0F - alpha;
    for (std::size_t i = 0; i < n; ++i) rmsprop_one(p, sq, g, i, scale, lr, alpha, one_minus_alpha, eps);
}
void adam_scalar(float* p, float* m, float* v, const float* g, std::size_t n, float scale, float step_size, float beta1,
                 float beta2, float sqrt_c2, float eps) noexcept {
    const float omb1 = 1.0F - beta1, omb2 = 1.0F - beta2;
    for (std::size_t i = 0; i < n; ++i) adam_one(p, m, v, g, i, scale, step_size, beta1, omb1, beta2, omb2, sqrt_c2, eps);
}

// ---- AVX2: 8 lanes, the same operations --------------------------------------------------------

__attribute__((target("avx2"))) void sgd_avx2(float* p, const float* g, std::size_t n, float step) noexcept {
    const __m256 vstep = _mm256_set1_ps(step);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), _mm256_mul_ps(vstep, _mm256_loadu_ps(g + i))));
    for (; i < n; ++i) sgd_one(p, g, i, step);
}

__attribute__((target("avx2"))) void rmsprop_avx2(float* p, float* sq, const float* gradient, std::size_t n, float scale,
                                                  float lr, float alpha, float eps) noexcept {
    const float one_minus_alpha = 1.0F - alpha;
    const __m256 vscale = _mm256_set1_ps(scale), valpha = _mm256_set1_ps(alpha),
                 vone_minus = _mm256_set1_ps(one_minus_alpha), vlr = _mm256_set1_ps(lr), veps = _mm256_set1_ps(eps);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gradient + i), vscale);
        const __m256 s = _mm256_add_ps(_mm256_mul_ps(valpha, _mm256_loadu_ps(sq + i)),
                                       _mm256_mul_ps(_mm256_mul_ps(vone_minus, g), g));
        _mm256_storeu_ps(sq + i, s);
        const __m256 step = _mm256_div_ps(_mm256_mul_ps(vlr, g), _mm256_sqrt_ps(_mm256_add_ps(s, veps)));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), step));
    }
    for (; i < n; ++i) rmsprop_one(p, sq, gradient, i, scale, lr, alpha, one_minus_alpha, eps);
}

__attribute__((target("avx2"))) void adam_avx2(float* p, float* m, float* v, const float* gradient, std::size_t n,
                                               float scale, float step_size, float beta1, float beta2, float sqrt_c2,
                                               float eps) noexcept {
    const float omb1 = 1.0F - beta1, omb2 = 1.0F - beta2;
    const __m256 vscale = _mm256_set1_ps(scale), vb1 = _mm256_set1_ps(beta1), vomb1 = _mm256_set1_ps(omb1),
                 vb2 = _mm256_set1_ps(beta2), vomb2 = _mm256_set1_ps(omb2), vss = _mm256_set1_ps(step_size),
                 vc2 = _mm256_set1_ps(sqrt_c2), veps = _mm256_set1_ps(eps);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gradient + i), vscale);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(vomb1, g));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(vomb2, g), g));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vc2), veps);
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), _mm256_div_ps(_mm256_mul_ps(vss, mi), denom)));
    }
    for (; i < n; ++i) adam_one(p, m, v, gradient, i, scale, step_size, beta1, omb1, beta2, omb2, sqrt_c2, eps);
}

// ---- AVX-512F: 16 lanes, masked tail (maskz_sqrt with a full mask: GCC 12 warns about the
// undefined source operand of _mm512_sqrt_ps) ----------------------------------------------

__attribute__((target("avx512f"))) void sgd_avx512(float* p, const float* g, std::size_t n, float step) noexcept {
    const __m512 vstep = _mm512_set1_ps(step);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_loadu_ps(p + i), _mm512_mul_ps(vstep, _mm512_loadu_ps(g + i))));
    if (i < n) {
        const __mmask16 k = static_cast<__mmask16>((1U << (n - i)) - 1U);
        const __m512 r = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_mul_ps(vstep, _mm512_maskz_loadu_ps(k, g + i)));
        _mm512_mask_storeu_ps(p + i, k, r);
    }
}

__attribute__((target("avx512f"))) inline void rmsprop_block(float* p, float* sq, const float* gradient, __mmask16 k,
                                                             __m512 vscale, __m512 valpha, __m512 vone_minus,
                                                             __m512 vlr, __m512 veps) noexcept {
    const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, gradient), vscale);
    const __m512 s = _mm512_add_ps(_mm512_mul_ps(valpha, _mm512_maskz_loadu_ps(k, sq)), _mm512_mul_ps(_mm512_mul_ps(vone_minus, g), g));
    _mm512_mask_storeu_ps(sq, k, s);
    const __m512 step = _mm512_div_ps(_mm512_mul_ps(vlr, g), _mm512_maskz_sqrt_ps(0xFFFF, _mm512_add_ps(s, veps)));
    _mm512_mask_storeu_ps(p, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, p), step));
}

__attribute__((target("avx512f"))) void rmsprop_avx512(float* p, float* sq, const float* gradient, std::size_t n,
                                                       float scale, float lr, float alpha, float eps) noexcept {
    const __m512 vscale = _mm512_set1_ps(scale), valpha = _mm512_set1_ps(alpha),
                 vone_minus = _mm512_set1_ps(1.0F - alpha), vlr = _mm512_set1_ps(lr), veps = _mm512_set1_ps(eps);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) rmsprop_block(p + i, sq + i, gradient + i, 0xFFFF, vscale, valpha, vone_minus, vlr, veps);
    if (i < n)
        rmsprop_block(p + i, sq + i, gradient + i, static_cast<__mmask16>((1U << (n - i)) - 1U), vscale, valpha,
                      vone_minus, vlr, veps);
}

__attribute__((target("avx512f"))) inline void adam_block(float* p, float* m, float* v, const float* gradient,
                                                          __mmask16 k, __m512 vscale, __m512 vb1, __m512 vomb1,
                                                          __m512 vb2, __m512 vomb2, __m512 vss, __m512 vc2,
                                                          __m512 veps) noexcept {
    const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, gradient), vscale);
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_maskz_loadu_ps(k, m)), _mm512_mul_ps(vomb1, g));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_maskz_loadu_ps(k, v)), _mm512_mul_ps(_mm512_mul_ps(vomb2, g), g));
    _mm512_mask_storeu_ps(m, k, mi);
    _mm512_mask_storeu_ps(v, k, vi);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(0xFFFF, vi), vc2), veps);
    _mm512_mask_storeu_ps(p, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, p), _mm512_div_ps(_mm512_mul_ps(vss, mi), denom)));
}

__attribute__((target("avx512f"))) void adam_avx512(float* p, float* m, float* v, const float* gradient, std::size_t n,
                                                    float scale, float step_size, float beta1, float beta2,
                                                    float sqrt_c2, float eps) noexcept {
    const __m512 vscale = _mm512_set1_ps(scale), vb1 = _mm512_set1_ps(beta1), vomb1 = _mm512_set1_ps(1.0F - beta1),
                 vb2 = _mm512_set1_ps(beta2), vomb2 = _mm512_set1_ps(1.0F - beta2), vss = _mm512_set1_ps(step_size),
                 vc2 = _mm512_set1_ps(sqrt_c2), veps = _mm512_set1_ps(eps);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        adam_block(p + i, m + i, v + i, gradient + i, 0xFFFF, vscale, vb1, vomb1, vb2, vomb2, vss, vc2, veps);
    if (i < n)
        adam_block(p + i, m + i, v + i, gradient + i, static_cast<__mmask16>((1U << (n - i)) - 1U), vscale, vb1, vomb1,
                   vb2, vomb2, vss, vc2, veps);
}

// ---- dispatch ----------------------------------------------------------------------------------

bool cpu_has(Level l) noexcept {
    switch (l) {
        case Level::Scalar: return true;
        case Level::Avx2: return __builtin_cpu_supports("avx2");
        case Level::Avx512: return __builtin_cpu_supports("avx512f");
    }
    return false;
}

Level usable(Level l) noexcept { return cpu_has(l) ? l : best_level(); }

Level initial_level() noexcept {
    const char* env = std::getenv("SHESHA_SIMD");
    if (env != nullptr) {
        if (std::strcmp(env, "scalar") == 0) return Level::Scalar;
        if (std::strcmp(env, "avx2") == 0) return usable(Level::Avx2);
        if (std::strcmp(env, "avx512") == 0) return usable(Level::Avx512);
    }
    return best_level();
}

std::atomic<Level>& level_ref() noexcept {
    static std::atomic<Level> level{initial_level()};
    return level;
}

}  // namespace

Level best_level() noexcept {
    if (cpu_has(Level::Avx512)) return Level::Avx512;
    if (cpu_has(Level::Avx2)) return Level::Avx2;
    return Level::Scalar;
}
Level active_level() noexcept { return level_ref().load(std::memory_order_relaxed); }
void set_level(Level l) noexcept { level_ref().store(usable(l), std::memory_order_relaxed); }
std::string_view to_string(Level l) noexcept {
    switch (l) {
        case Level::Scalar: return "scalar";
        case Level::Avx2: return "avx2";
        case Level::Avx512: return "avx512";
    }
    return "?";
}

void sgd_at(Level l, float* p, const float* g, std::size_t n, float step) noexcept {
    switch (usable(l)) {
        case Level::Avx512: return sgd_avx512(p, g, n, step);
        case Level::Avx2: return sgd_avx2(p, g, n, step);
        case Level::Scalar: return sgd_scalar(p, g, n, step);
    }
}
void rmsprop_at(Level l, float* p, float* sq, const float* g, std::size_t n, float scale, float lr, float alpha,
                float eps) noexcept {
    switch (usable(l)) {
        case Level::Avx512: return rmsprop_avx512(p, sq, g, n, scale, lr, alpha, eps);
        case Level::Avx2: return rmsprop_avx2(p, sq, g, n, scale, lr, alpha, eps);
        case Level::Scalar: return rmsprop_scalar(p, sq, g, n, scale, lr, alpha, eps);
    }
}
void adam_at(Level l, float* p, float* m, float* v, const float* g, std::size_t n, float scale, float step_size,
             float beta1, float beta2, float sqrt_c2, float eps) noexcept {
    switch (usable(l)) {
        case Level::Avx512: return adam_avx512(p, m, v, g, n, scale, step_size, beta1, beta2, sqrt_c2, eps);
        case Level::Avx2: return adam_avx2(p, m, v, g, n, scale, step_size, beta1, beta2, sqrt_c2, eps);
        case Level::Scalar: return adam_scalar(p, m, v, g, n, scale, step_size, beta1, beta2, sqrt_c2, eps);
    }
}

void sgd(float* p, const float* g, std::size_t n, float step) noexcept { sgd_at(active_level(), p, g, n, step); }
void rmsprop(float* p, float* sq, const float* g, std::size_t n, float scale, float lr, float alpha, float eps) noexcept {
    rmsprop_at(active_level(), p, sq, g, n, scale, lr, alpha, eps);
}
void adam(float* p, float* m, float* v, const float* g, std::size_t n, float scale, float step_size, float beta1,
          float beta2, float sqrt_c2, float eps) noexcept {
    adam_at(active_level(), p, m, v, g, n, scale, step_size, beta1, beta2, sqrt_c2, eps);
}

}  // namespace shesha::rl::kernels
