// Small pieces shared by shesha-gen and shesha-sink: clocks, stop signals, IPv4 parsing, UDP
// socket setup, and the version pattern of synthetic updates.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shesha::tools {

std::uint64_t realtime_ns() noexcept;   // CLOCK_REALTIME: the clock of header timestamps
std::uint64_t monotonic_ns() noexcept;  // CLOCK_MONOTONIC: pacing, durations

// SIGINT / SIGTERM set a flag (no SA_RESTART, so blocking calls return EINTR promptly).
void install_stop_signals() noexcept;
bool stop_requested() noexcept;

std::optional<in_addr> parse_ipv4(std::string_view text);
std::string format_endpoint(const sockaddr_in& addr);
// "bad chunk index/count" -> "bad_chunk_index_count": human-readable names as JSON keys.
std::string json_key(std::string_view text);

struct UdpSocketOptions {
    std::optional<in_addr> bind_addr;  // none: INADDR_ANY
    std::uint16_t bind_port = 0;       // 0: ephemeral
    int rcvbuf_bytes = 0;              // 0: kernel default
    int sndbuf_bytes = 0;
    std::optional<std::uint8_t> tos;   // IP_TOS value for sent datagrams (ECN bits included)
    bool receive_tos = false;          // IP_RECVTOS: TOS of each received datagram as cmsg
    bool receive_drop_count = false;   // SO_RXQ_OVFL: kernel drop counter as cmsg
};
// Returns the fd, or -1 with err set.
int open_udp_socket(const UdpSocketOptions& opts, std::string& err);
// The local UDP port a socket is bound to (0 if unknown).
std::uint16_t local_port(int fd);

// Version pattern of synthetic updates.
//   lockstep: version = floor(wall-clock ms / period_ms) modulo 2^32. The wall clock is shared, so
//             every worker (in every gen process) sends the same base version at the same time,
//             and their updates are mergeable.
//   skew:D    each update lags that base by a uniformly drawn 0..D versions (drawn per update).
struct VersionPattern {
    enum class Kind : std::uint8_t { Lockstep, Skew };
    Kind kind = Kind::Lockstep;
    std::uint32_t max_lag = 0;

    static std::optional<VersionPattern> parse(std::string_view text);
    static std::uint32_t base_version(std::uint64_t realtime_ns, std::uint32_t period_ms) noexcept;
};

}  // namespace shesha::tools
