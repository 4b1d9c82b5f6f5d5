// IPv4 addresses and UDP sockets, as the worker, the learner, the API and the tools open them.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shesha::net {

std::optional<in_addr> parse_ipv4(std::string_view text);
std::string format_endpoint(const sockaddr_in& addr);

struct UdpSocketOptions {
    std::optional<in_addr> bind_addr;  // none: INADDR_ANY
    std::uint16_t bind_port = 0;       // 0: ephemeral
    int rcvbuf_bytes = 0;              // 0: kernel default
    int sndbuf_bytes = 0;
    std::optional<std::uint8_t> tos;   // IP_TOS value for sent datagrams (ECN bits included)
    bool receive_tos = false;          // IP_RECVTOS: TOS of each received datagram as cmsg
    bool receive_drop_count = false;   // SO_RXQ_OVFL: kernel drop counter as cmsg
    // Sending to IPv4 multicast groups (the learner with learner.model_delivery: replicated).
    // With multicast_if the kernel sends group datagrams out of the interface that owns that
    // address, without a multicast route.
    std::optional<in_addr> multicast_if;        // IP_MULTICAST_IF (by address)
    std::optional<std::uint8_t> multicast_ttl;  // IP_MULTICAST_TTL (kernel default 1)
    std::optional<bool> multicast_loop;         // IP_MULTICAST_LOOP (kernel default on)
};
// Returns the fd, or -1 with err set.
int open_udp_socket(const UdpSocketOptions& opts, std::string& err);
// The local UDP port a socket is bound to (0 if unknown).
std::uint16_t local_port(int fd);

// Sends one datagram without blocking (MSG_DONTWAIT). With tos, sendmsg carries it as IP_TOS
// ancillary data, so this datagram alone leaves with that TOS byte (ECN bits included) and Linux
// sets its queueing priority from it (rt_tos2priority), whatever the socket's IP_TOS; without,
// the socket's own TOS applies. True if the whole datagram was taken; false (errno set) otherwise,
// a full socket buffer or qdisc included.
// Whether poll(2) reports the socket writable now (for UDP: at most half its send buffer in use).
bool writable(int fd);

bool send_datagram(int fd, const sockaddr_in& to, std::span<const std::uint8_t> datagram,
                   std::optional<std::uint8_t> tos = std::nullopt);

}  // namespace shesha::net
