// The optimizers' element-wise loops (drl/model/optimizer.cpp), in three variants chosen at run time:
// AVX-512F, AVX2 and scalar. Every variant performs the same IEEE 754 binary32 operations in the
// same order for every element (no FMA contraction: this file's translation unit is built with
// -ffp-contract=off, and the vector code uses separate multiplies and adds), so the results are
// bit-identical across levels, as for the merge kernel (switch/core/merge_kernel.h).
//
// The level is the best the CPU has, unless SHESHA_SIMD=scalar|avx2|avx512 says otherwise (the
// same variable the merge kernel reads) or set_level() overrides it.
#pragma once

#include <cstddef>
#include <string_view>

namespace shesha::rl::kernels {

enum class Level { Scalar = 0, Avx2 = 1, Avx512 = 2 };

Level best_level() noexcept;       // what the CPU supports
Level active_level() noexcept;     // what apply() uses
void set_level(Level l) noexcept;  // a level the CPU lacks falls back to the best it has
std::string_view to_string(Level l) noexcept;

// parameters -= lr * scale * g
void sgd(float* parameters, const float* gradient, std::size_t n, float step) noexcept;
// g = gradient * scale; sq = alpha * sq + ((1 - alpha) * g) * g; parameters -= (lr * g) / sqrt(sq + eps)
void rmsprop(float* parameters, float* square_average, const float* gradient, std::size_t n, float scale, float lr,
             float alpha, float eps) noexcept;
// g = gradient * scale; m = b1 * m + (1 - b1) * g; v = b2 * v + ((1 - b2) * g) * g;
// parameters -= (step_size * m) / (sqrt(v) / sqrt_c2 + eps)
void adam(float* parameters, float* m, float* v, const float* gradient, std::size_t n, float scale, float step_size,
          float beta1, float beta2, float sqrt_c2, float eps) noexcept;

// One variant directly (tests compare them); a level the CPU lacks runs the best it has.
void sgd_at(Level l, float* parameters, const float* gradient, std::size_t n, float step) noexcept;
void rmsprop_at(Level l, float* parameters, float* square_average, const float* gradient, std::size_t n, float scale,
                float lr, float alpha, float eps) noexcept;
void adam_at(Level l, float* parameters, float* m, float* v, const float* gradient, std::size_t n, float scale,
             float step_size, float beta1, float beta2, float sqrt_c2, float eps) noexcept;

}  // namespace shesha::rl::kernels
