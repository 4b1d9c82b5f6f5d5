// Ethernet/IPv4/UDP classification, checksums, ECN marking and frame building.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "frame.h"

using namespace shesha::frame;

namespace {

constexpr std::uint16_t kPort = 17717;

// Independent RFC 1071 verifier: the one's-complement sum over data that includes a correct
// checksum field is 0xFFFF.
std::uint16_t ones_sum(const std::uint8_t* p, std::size_t len, std::uint32_t start = 0) {
    std::uint32_t s = start;
    for (std::size_t i = 0; i < len; ++i) s += (i % 2 == 0) ? (std::uint32_t{p[i]} << 8) : p[i];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}
bool ipv4_checksum_ok(const std::uint8_t* ip) { return ones_sum(ip, std::size_t{ip[0] & 0x0Fu} * 4) == 0xFFFF; }
std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
void put16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

Endpoints endpoints(std::uint16_t dst_port = kPort, std::uint8_t ecn = 0) {
    Endpoints ep;
    ep.src_mac = {0x02, 0, 0, 0, 0, 0x01};
    ep.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
    ep.src_ip = 0xC0000201;  // 192.0.2.1 (documentation range; never sent anywhere)
    ep.dst_ip = 0xC0000202;
    ep.src_port = 1000;
    ep.dst_port = dst_port;
    ep.ecn = ecn;
    return ep;
}

// A frame with a UDP payload of n bytes (values i & 0xFF).
std::vector<std::uint8_t> make_frame(std::size_t n, std::uint16_t dst_port = kPort, std::uint8_t ecn = 0) {
    std::vector<std::uint8_t> f(kUdpPayloadOffset + n);
    for (std::size_t i = 0; i < n; ++i) f[kUdpPayloadOffset + i] = static_cast<std::uint8_t>(i);
    REQUIRE(build_udp_frame(endpoints(dst_port, ecn), n, f) == f.size());
    return f;
}

// Inserts an 802.1Q tag after the MAC addresses.
std::vector<std::uint8_t> vlan_tag(const std::vector<std::uint8_t>& f, std::uint16_t vid = 100) {
    std::vector<std::uint8_t> t(f.begin(), f.begin() + 12);
    t.push_back(0x81);
    t.push_back(0x00);
    t.push_back(static_cast<std::uint8_t>(vid >> 8));
    t.push_back(static_cast<std::uint8_t>(vid));
    t.insert(t.end(), f.begin() + 12, f.end());
    return t;
}

constexpr std::size_t kIp = kEthHeaderSize;
constexpr std::size_t kUdp = kEthHeaderSize + kIpv4MinHeaderSize;

}  // namespace

TEST_CASE("build_udp_frame produces the hand-computed frame", "[frame]") {
    // 192.0.2.1:1000 -> 192.0.2.2:17717, payload "abcd".
    // IPv4 checksum by hand: 4500+0020+0000+4000+4011+c000+0201+c000+0202 = 0x24934 -> 0x4936 -> ~ = 0xB6C9.
    // UDP checksum by hand: pseudo c000+0201+c000+0202+0011+000c, header 03e8+4535+000c, data 6162+6364
    //   = 0x2920F -> 0x9211 -> ~ = 0x6DEE.
    const std::vector<std::uint8_t> expected{
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,                       // Ethernet
        0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xB6, 0xC9,           // IPv4 ...
        0xC0, 0x00, 0x02, 0x01, 0xC0, 0x00, 0x02, 0x02,                                   // ... addresses
        0x03, 0xE8, 0x45, 0x35, 0x00, 0x0C, 0x6D, 0xEE,                                   // UDP
        'a', 'b', 'c', 'd'};
    std::vector<std::uint8_t> f(expected.size(), 0xEE);
    std::memcpy(f.data() + kUdpPayloadOffset, "abcd", 4);
    REQUIRE(build_udp_frame(endpoints(), 4, f) == expected.size());
    CHECK(f == expected);
    CHECK(ipv4_header_checksum(f.data() + kIp, 20) == 0xB6C9);
    CHECK(udp_checksum(f.data() + kIp, f.data() + kUdp, 12) == 0x6DEE);

    // The result does not depend on what the checksum fields hold.
    f[kIp + 10] = 0x12;
    f[kUdp + 6] = 0x34;
    CHECK(ipv4_header_checksum(f.data() + kIp, 20) == 0xB6C9);
    CHECK(udp_checksum(f.data() + kIp, f.data() + kUdp, 12) == 0x6DEE);

    // Without UDP checksum the field is zero.
    std::vector<std::uint8_t> g(expected.size());
    REQUIRE(build_udp_frame(endpoints(), 4, g, false) == expected.size());
    CHECK(be16(g.data() + kUdp + 6) == 0);
    CHECK(be16(g.data() + kIp + 10) == 0xB6C9);
}

TEST_CASE("build_udp_frame refuses small buffers and sets TTL and ECN", "[frame]") {
    std::vector<std::uint8_t> f(kUdpPayloadOffset + 9);
    CHECK(build_udp_frame(endpoints(), 10, f) == 0);
    Endpoints ep = endpoints(kPort, 2);
    ep.ttl = 7;
    REQUIRE(build_udp_frame(ep, 9, f) == f.size());
    CHECK(f[kIp + 8] == 7);
    CHECK((f[kIp + 1] & 3) == 2);
    CHECK(ipv4_checksum_ok(f.data() + kIp));
    std::vector<std::uint8_t> huge(70000);
    CHECK(build_udp_frame(ep, 65536 - 28, huge) == 0);  // IPv4 total length would overflow
}

TEST_CASE("udp_checksum over odd lengths verifies with an independent sum", "[frame]") {
    for (std::size_t n : {0u, 1u, 2u, 3u, 47u, 1001u}) {
        auto f = make_frame(n);
        const std::uint8_t* ip = f.data() + kIp;
        const std::size_t udp_len = 8 + n;
        std::uint32_t pseudo = be16(ip + 12) + be16(ip + 14) + be16(ip + 16) + be16(ip + 18) + 17 +
                               static_cast<std::uint32_t>(udp_len);
        CHECK(ones_sum(f.data() + kUdp, udp_len, pseudo) == 0xFFFF);
        CHECK(be16(f.data() + kUdp + 6) != 0);
    }
}

TEST_CASE("classify a well-formed Shesha frame", "[frame]") {
    const auto f = make_frame(100, kPort, 1);
    const FrameInfo i = classify(f, kPort);
    CHECK(i.kind == FrameKind::Shesha);
    CHECK(i.l3_offset == 14);
    CHECK(i.l4_offset == 34);
    CHECK(i.payload_offset == 42);
    CHECK(i.payload_len == 100);
    CHECK(i.src_ip == 0xC0000201u);
    CHECK(i.dst_ip == 0xC0000202u);
    CHECK(i.src_port == 1000);
    CHECK(i.dst_port == kPort);
    CHECK(i.ecn == 1);
}

TEST_CASE("classify non-IPv4 frames", "[frame]") {
    auto f = make_frame(20);
    SECTION("ARP") {
        put16(f.data() + 12, 0x0806);
        CHECK(classify(f, kPort).kind == FrameKind::NonIp);
    }
    SECTION("IPv6") {
        put16(f.data() + 12, 0x86DD);
        CHECK(classify(f, kPort).kind == FrameKind::NonIp);
    }
    SECTION("shorter than an Ethernet header") {
        CHECK(classify(std::span(f).first(13), kPort).kind == FrameKind::NonIp);
        CHECK(classify(std::span<const std::uint8_t>(), kPort).kind == FrameKind::NonIp);
    }
}

TEST_CASE("classify VLAN-tagged frames", "[frame]") {
    const auto t = vlan_tag(make_frame(64));
    const FrameInfo i = classify(t, kPort);
    CHECK(i.kind == FrameKind::Shesha);
    CHECK(i.l3_offset == 18);
    CHECK(i.l4_offset == 38);
    CHECK(i.payload_offset == 46);
    CHECK(i.payload_len == 64);
    CHECK(t[i.payload_offset + 5] == 5);

    CHECK(classify(std::span(t).first(17), kPort).kind == FrameKind::NonIp);   // tag cut short
    CHECK(classify(std::span(t).first(30), kPort).kind == FrameKind::Malformed);  // IPv4 cut short
    const auto qinq = vlan_tag(t, 200);  // two tags: only one is supported
    CHECK(classify(qinq, kPort).kind == FrameKind::NonIp);
    auto arp = vlan_tag(make_frame(10));
    put16(arp.data() + 16, 0x0806);
    CHECK(classify(arp, kPort).kind == FrameKind::NonIp);
}

TEST_CASE("classify malformed IPv4 headers", "[frame]") {
    auto f = make_frame(40);
    SECTION("truncated inside the IPv4 header") {
        CHECK(classify(std::span(f).first(kIp + 19), kPort).kind == FrameKind::Malformed);
        CHECK(classify(std::span(f).first(kIp), kPort).kind == FrameKind::Malformed);
    }
    SECTION("truncated payload: total length exceeds the frame") {
        CHECK(classify(std::span(f).first(f.size() - 1), kPort).kind == FrameKind::Malformed);
    }
    SECTION("total length below the header length") {
        put16(f.data() + kIp + 2, 19);
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("version not 4") {
        f[kIp] = 0x65;
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("IHL below 5") {
        f[kIp] = 0x44;
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("IHL beyond the frame") {
        f[kIp] = 0x4F;  // 60 bytes of header
        CHECK(classify(std::span(f).first(kIp + 56), kPort).kind == FrameKind::Malformed);
    }
    SECTION("IHL beyond the total length") {
        f[kIp] = 0x4F;
        put16(f.data() + kIp + 2, 56);
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
}

TEST_CASE("classify IPv4 with options", "[frame]") {
    auto base = make_frame(16);
    // Insert 4 bytes of options (NOP x4) after the 20-byte header; IHL 6.
    std::vector<std::uint8_t> f(base.begin(), base.begin() + kUdp);
    f.insert(f.end(), {1, 1, 1, 1});
    f.insert(f.end(), base.begin() + kUdp, base.end());
    f[kIp] = 0x46;
    put16(f.data() + kIp + 2, static_cast<std::uint16_t>(24 + 8 + 16));
    const FrameInfo i = classify(f, kPort);
    CHECK(i.kind == FrameKind::Shesha);
    CHECK(i.l4_offset == kIp + 24);
    CHECK(i.payload_offset == kIp + 32);
    CHECK(i.payload_len == 16);
}

TEST_CASE("classify UDP length lies", "[frame]") {
    auto f = make_frame(40);
    SECTION("UDP length below 8") {
        put16(f.data() + kUdp + 4, 7);
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("UDP length beyond the IP payload") {
        put16(f.data() + kUdp + 4, 8 + 41);
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("IP payload shorter than a UDP header") {
        put16(f.data() + kIp + 2, 20 + 7);
        CHECK(classify(f, kPort).kind == FrameKind::Malformed);
    }
    SECTION("UDP length shorter than the IP payload is trusted") {
        put16(f.data() + kUdp + 4, 8 + 30);
        const FrameInfo i = classify(f, kPort);
        CHECK(i.kind == FrameKind::Shesha);
        CHECK(i.payload_len == 30);
    }
    SECTION("exactly an empty UDP datagram") {
        auto e = make_frame(0);
        const FrameInfo i = classify(e, kPort);
        CHECK(i.kind == FrameKind::Shesha);
        CHECK(i.payload_len == 0);
    }
}

TEST_CASE("classify ignores Ethernet padding after the datagram", "[frame]") {
    auto f = make_frame(4);
    REQUIRE(f.size() == 46);
    f.resize(60, 0);  // minimum Ethernet frame without FCS
    const FrameInfo i = classify(f, kPort);
    CHECK(i.kind == FrameKind::Shesha);
    CHECK(i.payload_len == 4);
}

TEST_CASE("classify fragments as IpOther, never Shesha", "[frame]") {
    auto f = make_frame(40);
    SECTION("later fragment") {
        put16(f.data() + kIp + 6, 0x0005);  // offset 5 * 8 bytes
        CHECK(classify(f, kPort).kind == FrameKind::IpOther);
    }
    SECTION("later fragment with MF") {
        put16(f.data() + kIp + 6, 0x2005);
        CHECK(classify(f, kPort).kind == FrameKind::IpOther);
    }
    SECTION("first fragment (MF set, offset 0)") {
        put16(f.data() + kIp + 6, 0x2000);
        const FrameInfo i = classify(f, kPort);
        CHECK(i.kind == FrameKind::IpOther);
        CHECK(i.src_ip == 0xC0000201u);
    }
    SECTION("DF alone is a whole datagram") {
        put16(f.data() + kIp + 6, 0x4000);
        CHECK(classify(f, kPort).kind == FrameKind::Shesha);
        put16(f.data() + kIp + 6, 0x0000);
        CHECK(classify(f, kPort).kind == FrameKind::Shesha);
    }
}

TEST_CASE("classify other UDP ports and other protocols as IpOther", "[frame]") {
    const auto f = make_frame(40, 53);
    FrameInfo i = classify(f, kPort);
    CHECK(i.kind == FrameKind::IpOther);
    CHECK(i.dst_port == 53);
    CHECK(i.src_port == 1000);
    CHECK(classify(f, 53).kind == FrameKind::Shesha);  // the port is configurable
    auto src_is_shesha = make_frame(40, 9999);
    put16(src_is_shesha.data() + kUdp, kPort);  // only the destination port counts
    CHECK(classify(src_is_shesha, kPort).kind == FrameKind::IpOther);
    auto tcp = make_frame(40);
    tcp[kIp + 9] = 6;
    CHECK(classify(tcp, kPort).kind == FrameKind::IpOther);
}

TEST_CASE("ECN CE marking keeps a valid IPv4 checksum", "[frame]") {
    for (std::uint8_t ecn : {1, 2}) {
        auto f = make_frame(30, kPort, ecn);
        REQUIRE(ipv4_checksum_ok(f.data() + kIp));
        const auto before = f;
        CHECK(mark_ecn_ce(f.data() + kIp));
        CHECK((f[kIp + 1] & 3) == 3);
        CHECK((f[kIp + 1] & 0xFC) == (before[kIp + 1] & 0xFC));  // DSCP untouched
        CHECK(ipv4_checksum_ok(f.data() + kIp));
        CHECK(be16(f.data() + kIp + 10) == ipv4_header_checksum(f.data() + kIp, 20));
        CHECK(classify(f, kPort).ecn == 3);
        // Only the TOS byte and the checksum changed.
        for (std::size_t k = 0; k < f.size(); ++k)
            if (k != kIp + 1 && k != kIp + 10 && k != kIp + 11) CHECK(f[k] == before[k]);
        const auto marked = f;
        CHECK_FALSE(mark_ecn_ce(f.data() + kIp));  // already CE
        CHECK(f == marked);
    }
}

TEST_CASE("ECN marking leaves Not-ECT untouched", "[frame]") {
    auto f = make_frame(30, kPort, 0);
    const auto before = f;
    CHECK_FALSE(mark_ecn_ce(f.data() + kIp));
    CHECK(f == before);
}

TEST_CASE("incremental ECN checksum matches a full recompute on many headers", "[frame]") {
    std::mt19937 rng(12345);
    for (int n = 0; n < 2000; ++n) {
        std::vector<std::uint8_t> f(kUdpPayloadOffset);
        Endpoints ep = endpoints(kPort, static_cast<std::uint8_t>(1 + rng() % 2));
        ep.src_ip = static_cast<std::uint32_t>(rng());
        ep.dst_ip = static_cast<std::uint32_t>(rng());
        ep.ttl = static_cast<std::uint8_t>(rng());
        REQUIRE(build_udp_frame(ep, 0, f, false) == f.size());
        f[kIp + 1] = static_cast<std::uint8_t>((rng() & 0xFC) | ep.ecn);  // random DSCP
        put16(f.data() + kIp + 4, static_cast<std::uint16_t>(rng()));   // random id
        put16(f.data() + kIp + 10, ipv4_header_checksum(f.data() + kIp, 20));
        REQUIRE(mark_ecn_ce(f.data() + kIp));
        REQUIRE(be16(f.data() + kIp + 10) == ipv4_header_checksum(f.data() + kIp, 20));
    }
}

TEST_CASE("clear_udp_checksum zeroes only the checksum", "[frame]") {
    auto f = make_frame(12);
    const auto before = f;
    REQUIRE(be16(f.data() + kUdp + 6) != 0);
    clear_udp_checksum(f.data() + kUdp);
    CHECK(be16(f.data() + kUdp + 6) == 0);
    for (std::size_t k = 0; k < f.size(); ++k)
        if (k != kUdp + 6 && k != kUdp + 7) CHECK(f[k] == before[k]);
}
