// Ethernet / IPv4 / UDP parsing, checksums and frame building. See common/frame.h.
#include "frame.h"
#include "big_endian.h"

#include <cstring>

namespace shesha::frame {

namespace {


// RFC 1071 one's-complement sum of 16-bit big-endian words (odd tail padded with zero), not
// folded; the caller adds more parts and folds once.
std::uint64_t sum_words(const std::uint8_t* p, std::size_t len) noexcept {
    std::uint64_t sum = 0;
    std::size_t i = 0;
    for (; i + 1 < len; i += 2) sum += be::load16(p + i);
    if (i < len) sum += std::uint32_t{p[i]} << 8;
    return sum;
}

std::uint16_t fold(std::uint64_t sum) noexcept {
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return static_cast<std::uint16_t>(sum);
}

constexpr std::size_t kIpv4ChecksumOffset = 10;
constexpr std::size_t kUdpChecksumOffset = 6;

}  // namespace


bool mark_ecn_ce(std::uint8_t* ip) noexcept {
    const std::uint8_t ecn = ip[1] & 0x03;
    if (ecn == 0 || ecn == 3) return false;  // Not-ECT must not be marked; CE is already CE
    const std::uint16_t old_word = be::load16(ip);
    ip[1] |= 0x03;
    const std::uint16_t new_word = be::load16(ip);
    // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')
    const std::uint16_t old_csum = be::load16(ip + kIpv4ChecksumOffset);
    const std::uint64_t sum = std::uint64_t{static_cast<std::uint16_t>(~old_csum)} +
                              static_cast<std::uint16_t>(~old_word) + new_word;
    be::store16(ip + kIpv4ChecksumOffset, static_cast<std::uint16_t>(~fold(sum)));
    return true;
}

void clear_udp_checksum(std::uint8_t* udp_header) noexcept {
    be::store16(udp_header + kUdpChecksumOffset, 0);
}

std::uint16_t ipv4_header_checksum(const std::uint8_t* ip, std::size_t len) noexcept {
    // The checksum field itself is skipped (counted as zero).
    std::uint64_t sum = sum_words(ip, len);
    if (len >= kIpv4ChecksumOffset + 2) sum -= be::load16(ip + kIpv4ChecksumOffset);
    return static_cast<std::uint16_t>(~fold(sum));
}

std::uint16_t udp_checksum(const std::uint8_t* ip, const std::uint8_t* udp, std::size_t udp_len) noexcept {
    std::uint64_t sum = sum_words(ip + 12, 8);  // pseudo-header: source and destination address
    sum += kIpProtoUdp;
    sum += udp_len;
    sum += sum_words(udp, udp_len);
    if (udp_len >= kUdpChecksumOffset + 2) sum -= be::load16(udp + kUdpChecksumOffset);
    const std::uint16_t csum = static_cast<std::uint16_t>(~fold(sum));
    // Over IPv4 a zero checksum means "none", so a computed zero is sent as all ones (RFC 768).
    return csum == 0 ? 0xFFFF : csum;
}

std::size_t build_udp_frame(const Endpoints& ep, std::size_t payload_len, std::span<std::uint8_t> out,
                            bool udp_csum) noexcept {
    const std::size_t udp_len = kUdpHeaderSize + payload_len;
    const std::size_t ip_len = kIpv4MinHeaderSize + udp_len;
    const std::size_t frame_len = kEthHeaderSize + ip_len;
    if (ip_len > 0xFFFF || out.size() < frame_len) return 0;

    std::uint8_t* eth = out.data();
    std::memcpy(eth, ep.dst_mac.data(), 6);
    std::memcpy(eth + 6, ep.src_mac.data(), 6);
    be::store16(eth + 12, kEtherTypeIpv4);

    std::uint8_t* ip = eth + kEthHeaderSize;
    ip[0] = 0x45;  // version 4, IHL 5
    ip[1] = ep.ecn & 0x03;
    be::store16(ip + 2, static_cast<std::uint16_t>(ip_len));
    be::store16(ip + 4, 0);       // identification: unused, DF is set
    be::store16(ip + 6, 0x4000);  // DF, offset 0
    ip[8] = ep.ttl;
    ip[9] = kIpProtoUdp;
    be::store16(ip + kIpv4ChecksumOffset, 0);
    be::store32(ip + 12, ep.src_ip);
    be::store32(ip + 16, ep.dst_ip);
    be::store16(ip + kIpv4ChecksumOffset, ipv4_header_checksum(ip, kIpv4MinHeaderSize));

    std::uint8_t* udp = ip + kIpv4MinHeaderSize;
    be::store16(udp + 0, ep.src_port);
    be::store16(udp + 2, ep.dst_port);
    be::store16(udp + 4, static_cast<std::uint16_t>(udp_len));
    be::store16(udp + kUdpChecksumOffset, 0);
    if (udp_csum) be::store16(udp + kUdpChecksumOffset, udp_checksum(ip, udp, udp_len));
    return frame_len;
}

}  // namespace shesha::frame
