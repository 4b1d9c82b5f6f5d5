// The merge rule's pieces shared by the aggregating queue (a packet waiting in the ring) and the TX
// batch's merge index (a packet that bypassed an idle port's queue in this forwarding pass), so the
// two paths cannot drift apart: the key two GRADIENTs must share, the layout check that keeps the
// kernel inside a frame, the compatibility test, and the add itself. No DPDK.
#pragma once

#include <algorithm>
#include <cstdint>

#include "frame.h"
#include "merge_kernel.h"
#include "protocol.h"

namespace shesha::core {

// GRADIENTs merge only within one (cluster, chunk, model version) key (and one destination).
[[gnu::always_inline]] constexpr std::uint64_t merge_key(std::uint16_t cluster, std::uint16_t chunk,
                                                         std::uint32_t version) noexcept {
    return (std::uint64_t{cluster} << 48) | (std::uint64_t{chunk} << 32) | version;
}

// Whether a GRADIENT's header and elements lie inside its frame. A frame flagged mergeable that
// fails this is never a merge partner, so a classifier bug cannot make the kernel write outside it.
[[gnu::always_inline]] constexpr bool gradient_fits(std::uint32_t shesha_offset, std::uint32_t elem_count,
                                                    std::uint32_t frame_len) noexcept {
    return shesha_offset != 0 &&
           std::uint64_t{shesha_offset} + proto::kHeaderSize + std::uint64_t{elem_count} * sizeof(float) <= frame_len;
}

// Where a GRADIENT's elements sit: two packets merge only if these are equal.
struct GradientLayout {
    std::uint32_t elem_count = 0;
    std::uint32_t frame_len = 0;
    std::uint32_t shesha_offset = 0;
    constexpr bool operator==(const GradientLayout&) const noexcept = default;
};

// Whether a waiting GRADIENT may take an arriving one with the same key and destination: the same
// layout, and the summed contributions still fit the 16-bit count. false is a refusal (counted).
[[gnu::always_inline]] constexpr bool may_merge(const GradientLayout& waiting, std::uint32_t waiting_contrib,
                                                const GradientLayout& arriving, std::uint32_t arriving_contrib) noexcept {
    return waiting == arriving && waiting_contrib + arriving_contrib <= proto::kMaxContributions;
}

// Adds `arriving` into `waiting` (no checks: the caller has matched the key and destination and
// called may_merge). Both point at Shesha headers, each followed by elem_count fp32.
// The waiting packet ends up carrying `contributions` (its old count plus the arrival's), the span
// of both packets' timestamps, MERGED, and the arrival's congestion mark if it had one.
[[gnu::always_inline]] inline void merge_gradient_into(std::uint8_t* waiting, const std::uint8_t* arriving,
                                                       std::uint16_t elem_count, std::uint16_t contributions) noexcept {
    namespace in = proto::inplace;
    add_f32(reinterpret_cast<float*>(waiting + proto::kHeaderSize),
            reinterpret_cast<const float*>(arriving + proto::kHeaderSize), elem_count);
    in::set_contrib_count(waiting, contributions);
    in::set_ts_earliest(waiting, std::min(in::ts_earliest(waiting), in::ts_earliest(arriving)));
    in::set_ts_latest(waiting, std::max(in::ts_latest(waiting), in::ts_latest(arriving)));
    in::set_flags(waiting, in::flags(waiting) | proto::flag::kMerged |
                               (in::flags(arriving) & proto::flag::kCongestionExperienced));
}

}  // namespace shesha::core
