// The "plain scalar loop" reference for the merge benchmark. It lives in its own translation unit,
// compiled with -fno-tree-vectorize (see meson.build) and the optimize attribute as a second guard,
// so the compiler cannot turn it into the SIMD code it is meant to be compared against.
#include "scalar_reference.h"

namespace shesha::bench {

__attribute__((noinline, optimize("no-tree-vectorize"))) void add_f32_plain_scalar(float* dst, const float* src,
                                                                                   std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace shesha::bench
