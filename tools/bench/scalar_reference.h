#pragma once

#include <cstddef>

namespace shesha::bench {

// dst[i] += src[i], one element at a time, never auto-vectorised (see scalar_reference.cpp).
void add_f32_plain_scalar(float* dst, const float* src, std::size_t n) noexcept;

}  // namespace shesha::bench
