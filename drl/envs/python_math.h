// Float64 helpers that reproduce how CPython and NumPy 1.x evaluate the Gymnasium formulas, so the
// C++ environments give the same bits.
//
// Why not plain C++:
// - `x**2` in Python (on a float or a numpy.float64 scalar) calls the C library's pow(x, 2.0). On
//   glibc that differs from x*x in the last bit for roughly 1 in 1000 arguments (measured on
//   glibc 2.36), and GCC folds pow(x, 2.0) into x*x at compile time. python_pow() calls libm's pow
//   through a pointer the compiler cannot see through.
// - Python's and NumPy's float `%` take the sign of the divisor (fmod, then a correction).
// - math.sin/math.cos and NumPy's float64 sin/cos are libm's sin/cos when NumPy dispatches to its
//   baseline loops. NumPy 1.2x on AVX512_SKX CPUs instead uses SVML kernels for float64 sin, cos and
//   power that differ from libm in the last bit; no C++ program can match those without SVML.
//   tests/envs/gym_reference.py therefore disables those kernels (NPY_DISABLE_CPU_FEATURES).
#pragma once

#include <cmath>

namespace shesha::worker::envs::pymath {

using PowFunction = double (*)(double, double);
// Read through a volatile pointer so the call is never folded into x*x.
inline PowFunction volatile libm_pow = static_cast<PowFunction>(&::pow);

inline double python_pow(double base, double exponent) { return libm_pow(base, exponent); }

// Python's float.__mod__ and numpy.remainder for float64 (result has the divisor's sign).
inline double python_mod(double dividend, double divisor) {
    double mod = std::fmod(dividend, divisor);
    if (divisor == 0.0) {
        return mod;
    }
    if (mod != 0.0) {
        if ((divisor < 0.0) != (mod < 0.0)) {
            mod += divisor;
        }
    } else {
        mod = std::copysign(0.0, divisor);
    }
    return mod;
}

// Python's min(max(x, lo), hi) and numpy.clip for one scalar (NaN passes through, as in both).
inline double clip(double x, double lo, double hi) {
    double result = x;
    if (lo > result) {
        result = lo;
    }
    if (hi < result) {
        result = hi;
    }
    return result;
}

// The float64 value of float32(x), as numpy's astype(np.float32) then back to float64.
// Not just static_cast<double>(static_cast<float>(x)): GCC 12.2's SLP vectorizer at -O2 silently
// drops that round trip when two of them are stored side by side (reproduced with
// `s[0] = double(float(p)); s[1] = double(float(v));`), which broke MountainCarContinuous. The
// empty asm makes the float32 value opaque, so the rounding always happens.
inline double round_to_float32(double x) {
    float rounded = static_cast<float>(x);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    asm("" : "+x"(rounded));
#elif defined(__GNUC__)
    asm("" : "+r"(rounded));
#endif
    return static_cast<double>(rounded);
}

}  // namespace shesha::worker::envs::pymath
