// The merge rule's pieces shared by the aggregating queue (a packet waiting in the ring) and the TX
// batch's merge index (a packet that bypassed an idle port's queue in this forwarding pass), so the
// two paths cannot drift apart: the key two GRADIENTs must share, the layout check that keeps the
// kernel inside a frame, the compatibility test, and the add itself. No DPDK.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

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
    // Spelled out and forced inline, branch-free: GCC kept the defaulted one out of line (a call
    // per merge) in the switch's forwarding loop.
    [[gnu::always_inline]] constexpr bool operator==(const GradientLayout& o) const noexcept {
        return ((elem_count ^ o.elem_count) | (frame_len ^ o.frame_len) | (shesha_offset ^ o.shesha_offset)) == 0;
    }
};

// Whether a waiting GRADIENT may take an arriving one with the same key and destination: the same
// layout, and the summed contributions still fit the 16-bit count. false is a refusal (counted).
[[gnu::always_inline]] constexpr bool may_merge(const GradientLayout& waiting, std::uint32_t waiting_contrib,
                                                const GradientLayout& arriving, std::uint32_t arriving_contrib) noexcept {
    return waiting == arriving && waiting_contrib + arriving_contrib <= proto::kMaxContributions;
}

namespace merge_detail {
// Big-endian 64-bit load and store (as be::load64/store64), forced inline: in the forwarding loop
// GCC judged the merge path unlikely and called the out-of-line be::load64 four times per merge.
[[gnu::always_inline]] inline std::uint64_t load_be64(const std::uint8_t* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_bswap64(v);
}
[[gnu::always_inline]] inline void store_be64(std::uint8_t* p, std::uint64_t v) noexcept {
    v = __builtin_bswap64(v);
    std::memcpy(p, &v, sizeof v);
}
}  // namespace merge_detail

// Adds `arriving` into `waiting` (no checks: the caller has matched the key and destination and
// called may_merge). Both point at Shesha headers, each followed by elem_count fp32.
// The waiting packet ends up carrying `contributions` (its old count plus the arrival's), the sum
// of both packet counts, the span of both packets' timestamps, MERGED, and the arrival's
// congestion mark if it had one.
[[gnu::always_inline]] inline void merge_gradient_into(std::uint8_t* waiting, const std::uint8_t* arriving,
                                                       std::uint16_t elem_count, std::uint16_t contributions) noexcept {
    namespace in = proto::inplace;
    using merge_detail::load_be64;
    using merge_detail::store_be64;
    add_f32(reinterpret_cast<float*>(waiting + proto::kHeaderSize),
            reinterpret_cast<const float*>(arriving + proto::kHeaderSize), elem_count);
    in::set_contrib_count(waiting, contributions);
    in::set_packet_count(waiting, proto::merged_packet_count(in::packet_count(waiting), in::packet_count(arriving)));
    store_be64(waiting + proto::off::kTsEarliest,
               std::min(load_be64(waiting + proto::off::kTsEarliest), load_be64(arriving + proto::off::kTsEarliest)));
    store_be64(waiting + proto::off::kTsLatest,
               std::max(load_be64(waiting + proto::off::kTsLatest), load_be64(arriving + proto::off::kTsLatest)));
    in::set_flags(waiting, in::flags(waiting) | proto::flag::kMerged |
                               (in::flags(arriving) & proto::flag::kCongestionExperienced));
}

// Zeroes a UDP header's checksum ("no checksum", allowed over IPv4) after a payload rewrite: what
// frame::clear_udp_checksum does, inline for the merge path.
[[gnu::always_inline]] inline void clear_udp_checksum_inline(std::uint8_t* udp_header) noexcept {
    udp_header[6] = 0;
    udp_header[7] = 0;
}

}  // namespace shesha::core
