// Ethernet / IPv4 / UDP framing around Shesha messages: parsing of raw frames (switch, sink,
// tests) and building of frames (switch feedback, tests, benchmarks). DPDK-free, allocation-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "big_endian.h"

namespace shesha::frame {

using MacAddr = std::array<std::uint8_t, 6>;

inline constexpr std::size_t kEthHeaderSize = 14;
inline constexpr std::size_t kIpv4MinHeaderSize = 20;
inline constexpr std::size_t kUdpHeaderSize = 8;
inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;
inline constexpr std::uint8_t kIpProtoUdp = 17;
// Bytes a frame costs on the wire beyond what the NIC hands us: FCS (4) + preamble/SFD (8) + gap (12).
inline constexpr std::uint32_t kWireOverhead = 24;

enum class FrameKind : std::uint8_t {
    NonIp,          // not IPv4 (ARP, IPv6, LLDP, ...): forwarded untouched
    IpOther,        // IPv4 but not UDP to the Shesha port, or a later IP fragment
    Shesha,         // UDP to the Shesha port: offsets filled, Shesha part not yet validated
    Malformed,      // claims to be IPv4/UDP but lengths or header are inconsistent
};

// Where things are inside a frame; filled by classify().
struct FrameInfo {
    FrameKind kind = FrameKind::NonIp;
    std::uint16_t l3_offset = 0;       // IPv4 header
    std::uint16_t l4_offset = 0;       // UDP header
    std::uint16_t payload_offset = 0;  // UDP payload (the Shesha header)
    std::uint16_t payload_len = 0;     // UDP payload length per the UDP header
    std::uint32_t src_ip = 0;          // host byte order
    std::uint32_t dst_ip = 0;
    std::uint16_t src_port = 0;
    std::uint16_t dst_port = 0;
    std::uint8_t ecn = 0;              // IPv4 ECN bits (0..3)
};

// Classifies a frame starting at the Ethernet header. Handles one 802.1Q tag. Checks the IPv4
// version, IHL, total length against the frame and the UDP length against the IP payload.
// Inline: the switch classifies every frame it receives.
inline FrameInfo classify(std::span<const std::uint8_t> frame, std::uint16_t shesha_port) noexcept {
    FrameInfo info;
    const std::uint8_t* f = frame.data();
    const std::size_t len = frame.size();
    if (len < kEthHeaderSize) return info;  // too short to claim anything: NonIp

    std::size_t l3 = kEthHeaderSize;
    std::uint16_t ether_type = be::load16(f + 12);
    if (ether_type == kEtherTypeVlan) {
        if (len < kEthHeaderSize + 4) return info;
        ether_type = be::load16(f + 16);  // one tag only: a second tag reads as a non-IPv4 type
        l3 += 4;
    }
    if (ether_type != kEtherTypeIpv4) return info;

    info.l3_offset = static_cast<std::uint16_t>(l3);
    info.kind = FrameKind::Malformed;
    const std::size_t l3_avail = len - l3;
    if (l3_avail < kIpv4MinHeaderSize) return info;
    const std::uint8_t* ip = f + l3;
    if ((ip[0] >> 4) != 4) return info;
    const std::size_t ihl_bytes = std::size_t{ip[0] & 0x0Fu} * 4;
    if (ihl_bytes < kIpv4MinHeaderSize || ihl_bytes > l3_avail) return info;
    const std::size_t total_len = be::load16(ip + 2);
    // Frames may carry Ethernet padding after the datagram, so only total_len > frame is an error.
    if (total_len < ihl_bytes || total_len > l3_avail) return info;

    info.ecn = ip[1] & 0x03;
    info.src_ip = be::load32(ip + 12);
    info.dst_ip = be::load32(ip + 16);
    info.kind = FrameKind::IpOther;

    // Fragments never reach the merge path: later fragments have no UDP header, and a first
    // fragment (MF set) does not hold the whole Shesha message.
    const std::uint16_t frag = be::load16(ip + 6);
    const bool more_fragments = (frag & 0x2000) != 0;
    const std::uint16_t frag_offset = frag & 0x1FFF;
    if (frag_offset != 0 || more_fragments) return info;
    if (ip[9] != kIpProtoUdp) return info;

    const std::size_t ip_payload = total_len - ihl_bytes;
    info.kind = FrameKind::Malformed;
    if (ip_payload < kUdpHeaderSize) return info;
    const std::size_t l4 = l3 + ihl_bytes;
    const std::uint8_t* udp = f + l4;
    const std::size_t udp_len = be::load16(udp + 4);
    if (udp_len < kUdpHeaderSize || udp_len > ip_payload) return info;

    info.l4_offset = static_cast<std::uint16_t>(l4);
    info.payload_offset = static_cast<std::uint16_t>(l4 + kUdpHeaderSize);
    info.payload_len = static_cast<std::uint16_t>(udp_len - kUdpHeaderSize);
    info.src_port = be::load16(udp + 0);
    info.dst_port = be::load16(udp + 2);
    info.kind = info.dst_port == shesha_port ? FrameKind::Shesha : FrameKind::IpOther;
    return info;
}

// Sets IPv4 ECN to CE (3) if the packet is ECN-capable (ECT(0)/ECT(1)), fixing the IPv4 header
// checksum incrementally (RFC 1624). Returns true if it changed the packet.
bool mark_ecn_ce(std::uint8_t* ipv4_header) noexcept;

// Zeroes the UDP checksum (allowed over IPv4): used after the switch rewrites a Shesha payload.
void clear_udp_checksum(std::uint8_t* udp_header) noexcept;

// Both checksum functions return the value that belongs in the checksum field, computed as if
// that field were zero (whatever it holds now): store the result, or verify with
// `ipv4_header_checksum(h, ihl * 4) == stored field`.
std::uint16_t ipv4_header_checksum(const std::uint8_t* ipv4_header, std::size_t len) noexcept;
// Full UDP checksum over the IPv4 pseudo-header, UDP header and payload; a computed 0 is returned
// as 0xFFFF (RFC 768), since 0 in the field means "no checksum".
std::uint16_t udp_checksum(const std::uint8_t* ipv4_header, const std::uint8_t* udp_header,
                           std::size_t udp_len) noexcept;

struct Endpoints {
    MacAddr src_mac{};
    MacAddr dst_mac{};
    std::uint32_t src_ip = 0;  // host byte order
    std::uint32_t dst_ip = 0;
    std::uint16_t src_port = 0;
    std::uint16_t dst_port = 0;
    std::uint8_t ecn = 0;      // ECN bits for the IPv4 header (1 or 2 = ECN-capable)
    std::uint8_t ttl = 64;
};

// Writes Ethernet + IPv4 + UDP headers for a UDP payload of payload_len bytes already placed at
// out[kEthHeaderSize + 20 + 8 ...]. Computes the IPv4 checksum and, if udp_csum, the UDP checksum.
// Returns the frame length, or 0 if out is too small.
std::size_t build_udp_frame(const Endpoints& ep, std::size_t payload_len, std::span<std::uint8_t> out,
                            bool udp_csum = true) noexcept;
inline constexpr std::size_t kUdpPayloadOffset = kEthHeaderSize + kIpv4MinHeaderSize + kUdpHeaderSize;

}  // namespace shesha::frame
