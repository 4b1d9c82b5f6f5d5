#include "udp.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace shesha::net {

namespace {
bool set_int_option(int fd, int level, int name, int value, std::string& err, const char* what) {
    if (setsockopt(fd, level, name, &value, sizeof value) == 0) return true;
    err = std::string("setsockopt ") + what + ": " + std::strerror(errno);
    return false;
}
}  // namespace

std::optional<in_addr> parse_ipv4(std::string_view text) {
    const std::string s(text);
    in_addr addr{};
    if (inet_pton(AF_INET, s.c_str(), &addr) != 1) return std::nullopt;
    return addr;
}

std::string format_endpoint(const sockaddr_in& addr) {
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(addr.sin_port));
}

int open_udp_socket(const UdpSocketOptions& opts, std::string& err) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    bool ok = true;
    if (opts.rcvbuf_bytes > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &opts.rcvbuf_bytes, sizeof(int)) != 0) {
        // Not root: fall back to the unprivileged option, capped by net.core.rmem_max.
        ok = set_int_option(fd, SOL_SOCKET, SO_RCVBUF, opts.rcvbuf_bytes, err, "SO_RCVBUF");
    }
    if (ok && opts.sndbuf_bytes > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &opts.sndbuf_bytes, sizeof(int)) != 0)
        ok = set_int_option(fd, SOL_SOCKET, SO_SNDBUF, opts.sndbuf_bytes, err, "SO_SNDBUF");
    if (ok && opts.tos) ok = set_int_option(fd, IPPROTO_IP, IP_TOS, *opts.tos, err, "IP_TOS");
    if (ok && opts.receive_tos) ok = set_int_option(fd, IPPROTO_IP, IP_RECVTOS, 1, err, "IP_RECVTOS");
    if (ok && opts.receive_drop_count) ok = set_int_option(fd, SOL_SOCKET, SO_RXQ_OVFL, 1, err, "SO_RXQ_OVFL");
    if (ok && opts.multicast_if) {
        in_addr a = *opts.multicast_if;
        if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof a) != 0) {
            err = std::string("setsockopt IP_MULTICAST_IF: ") + std::strerror(errno);
            ok = false;
        }
    }
    if (ok && opts.multicast_ttl) ok = set_int_option(fd, IPPROTO_IP, IP_MULTICAST_TTL, *opts.multicast_ttl, err, "IP_MULTICAST_TTL");
    if (ok && opts.multicast_loop)
        ok = set_int_option(fd, IPPROTO_IP, IP_MULTICAST_LOOP, *opts.multicast_loop ? 1 : 0, err, "IP_MULTICAST_LOOP");
    if (ok && (opts.bind_addr || opts.bind_port != 0)) {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(opts.bind_port);
        sa.sin_addr.s_addr = opts.bind_addr ? opts.bind_addr->s_addr : htonl(INADDR_ANY);
        if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
            err = "bind " + format_endpoint(sa) + ": " + std::strerror(errno);
            ok = false;
        }
    }
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

bool send_datagram(int fd, const sockaddr_in& to, std::span<const std::uint8_t> datagram, std::optional<std::uint8_t> tos) {
    if (!tos) {
        const ssize_t n = sendto(fd, datagram.data(), datagram.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
                                 sizeof to);
        return n == static_cast<ssize_t>(datagram.size());
    }
    iovec iov{const_cast<std::uint8_t*>(datagram.data()), datagram.size()};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    msghdr msg{};
    msg.msg_name = const_cast<sockaddr_in*>(&to);
    msg.msg_namelen = sizeof to;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int value = *tos;
    std::memcpy(CMSG_DATA(c), &value, sizeof value);
    const ssize_t n = sendmsg(fd, &msg, MSG_DONTWAIT);
    return n == static_cast<ssize_t>(datagram.size());
}

bool writable(int fd) {
    pollfd pfd{fd, POLLOUT, 0};
    return ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT) != 0;
}

std::uint16_t local_port(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
    return ntohs(a.sin_port);
}

}  // namespace shesha::net
