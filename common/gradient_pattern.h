// Synthetic gradient payloads whose in-network sums can be verified exactly.
//
// A contribution from worker w carries weight q = 1 + (w % 4). Its elements are
//   e[0] = 1            (so a merged packet's e[0] equals its contribution count)
//   e[1] = q            (so e[1] is the sum of the contributors' weights, Q)
//   e[i] = q * g(cluster, chunk, i)   for i >= 2,  g in {-8, -7.75, ..., +7.75}
// g does not depend on the worker or the model version, so any merge of any contributions of the
// same (cluster, chunk) gives e[i] = Q * g(i) exactly: every partial sum is a multiple of 1/4 below
// 2^22, exactly representable in binary32 whatever the order of additions. A receiver checks
// e[0] == contrib_count and e[i] == e[1] * g(i) for every i, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shesha::pattern {

float weight(std::uint32_t worker_id) noexcept;
float g(std::uint16_t cluster_id, std::uint16_t chunk_index, std::size_t i) noexcept;

// Writes n elements for one contribution (host floats; little-endian on the wire as on x86).
void fill(float* out, std::size_t n, std::uint16_t cluster_id, std::uint16_t chunk_index,
          std::uint32_t worker_id) noexcept;

enum class Check : std::uint8_t { Ok, TooShort, CountMismatch, WeightInvalid, ElementMismatch };

// Verifies a (possibly merged) payload. On failure, bad_index (if not null) gets the first bad
// element. n must be at least 2.
Check verify(const float* p, std::size_t n, std::uint16_t cluster_id, std::uint16_t chunk_index,
             std::uint16_t contrib_count, std::size_t* bad_index = nullptr) noexcept;

}  // namespace shesha::pattern
