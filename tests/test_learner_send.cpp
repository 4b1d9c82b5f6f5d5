// The learner's datagrams on the wire (docs/transport.md, "CREDIT ahead of MODEL"): a
// LearnerEndpoint on loopback, and a hand-made worker socket with IP_RECVTOS that reads the IPv4
// TOS of everything the learner sends it. With learner.credit_priority (the default) a CREDIT
// arrives with TOS 0x10 and a MODEL with 0; with it off, both with 0. Waits are bounded loops on
// observable state, never sleeps.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "drl_wire.h"
#include "learner/learner_core.h"
#include "protocol.h"
#include "shesha/transport.h"
#include "transport/chunking.h"
#include "udp.h"

using namespace shesha;

namespace {

constexpr std::uint16_t kCluster = 9;
constexpr std::uint32_t kWorker = 3;

// 10 parameters in chunks of 4 (3 chunks), SGD; the learner's TOS setting as given (empty: the default).
std::string write_config(const std::string& name, const std::string& credit_priority) {
    const auto path = (std::filesystem::temp_directory_path() / name).string();
    std::ofstream(path) << "env: CartPole-v1\n"
                           "optimizer: {kind: sgd, lr: 0.5}\n"
                           "transport: {chunk_elems: 4}\n"
                           "learner: {publish_interval_ms: 1000, max_grad_norm: 0"
                        << (credit_priority.empty() ? "" : ", credit_priority: " + credit_priority) << "}\n";
    return path;
}

LearnerOptions learner_options(const std::string& config) {
    LearnerOptions o;
    o.config_path = config;
    o.cluster_id = kCluster;
    o.bind_address = "127.0.0.1";
    o.port = 0;
    o.initial_parameters = std::vector<float>(10, 1.0F);
    return o;
}

struct Received {
    proto::MsgType type{};
    int tos = -1;  // the IPv4 TOS byte (IP_RECVTOS), -1 if the kernel gave none
};

// A worker's socket on 127.0.0.1 that reports the TOS of each datagram it receives.
class TosWorker {
public:
    TosWorker() {
        net::UdpSocketOptions so;
        so.bind_addr = net::parse_ipv4("127.0.0.1");
        so.receive_tos = true;
        std::string err;
        fd_ = net::open_udp_socket(so, err);
        REQUIRE(fd_ >= 0);
    }
    ~TosWorker() { ::close(fd_); }
    std::uint16_t port() const { return net::local_port(fd_); }
    TosWorker(const TosWorker&) = delete;
    TosWorker& operator=(const TosWorker&) = delete;

    void send(std::uint16_t learner_port, const proto::Header& h, const std::vector<float>& elems) {
        proto::Header hh = h;
        hh.elem_count = static_cast<std::uint16_t>(elems.size());
        std::vector<std::uint8_t> out(proto::kHeaderSize + elems.size() * 4);
        const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(elems.data()), elems.size() * 4);
        REQUIRE(proto::encode(hh, body, out) == out.size());
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(learner_port);
        to.sin_addr = *net::parse_ipv4("127.0.0.1");
        REQUIRE(net::send_datagram(fd_, to, out));
    }

    // One datagram if any is waiting.
    std::optional<Received> receive() {
        std::array<std::uint8_t, 2048> buf{};
        iovec iov{buf.data(), buf.size()};
        alignas(cmsghdr) std::array<char, 64> control{};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
        if (n < static_cast<ssize_t>(proto::kHeaderSize)) return std::nullopt;
        Received r;
        r.type = static_cast<proto::MsgType>(buf[proto::off::kType]);
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) r.tos = *CMSG_DATA(c);
        return r;
    }

private:
    int fd_ = -1;
};

// Polls the learner and collects what reaches the worker until it holds `credits` CREDITs and
// `models` MODEL chunks, or 5,000 polls.
std::vector<Received> collect(LearnerEndpoint& learner, TosWorker& worker, int credits, int models) {
    std::vector<Received> got;
    int c = 0, m = 0;
    for (int i = 0; i < 5000 && (c < credits || m < models); ++i) {
        learner.poll(1);
        while (auto r = worker.receive()) {
            got.push_back(*r);
            c += r->type == proto::MsgType::Credit ? 1 : 0;
            m += r->type == proto::MsgType::Model ? 1 : 0;
        }
    }
    return got;
}

// The TOS values seen per message type.
std::vector<int> tos_of(const std::vector<Received>& got, proto::MsgType type) {
    std::vector<int> out;
    for (const Received& r : got)
        if (r.type == type) out.push_back(r.tos);
    return out;
}

// Asks for the model (3 MODEL chunks back), then sends chunk 0 of one gradient (1 CREDIT back).
std::vector<Received> exchange(const std::string& config) {
    LearnerEndpoint learner(learner_options(config));
    TosWorker worker;
    worker.send(learner.local_port(), drl::model_request_header(kCluster, kWorker, 0, 1), {});
    std::vector<Received> got = collect(learner, worker, 0, 3);
    const auto layout = transport::make_layout(10, 4);
    REQUIRE(layout);
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = kCluster;
    h.worker_id = kWorker;
    h.seq = 1;
    h.model_version = 1;
    transport::set_chunk_fields(*layout, 0, h);
    h.ts_earliest_ns = h.ts_latest_ns = 1;
    worker.send(learner.local_port(), h, {0.5F, 0.5F, 0.5F, 0.5F});
    const std::vector<Received> more = collect(learner, worker, 1, 0);
    got.insert(got.end(), more.begin(), more.end());
    CHECK(learner.counters().send_errors == 0);
    return got;
}

}  // namespace

TEST_CASE("learner datagram TOS: CREDIT 0x10 with credit_priority (the default), MODEL 0") {
    const std::string config = write_config("shesha-test-learner-send-default.yaml", "");
    const std::vector<Received> got = exchange(config);
    const std::vector<int> model = tos_of(got, proto::MsgType::Model);
    REQUIRE(model.size() >= 3);  // the answer to the request (a first publish may add a copy)
    CHECK(model == std::vector<int>(model.size(), 0));
    CHECK(tos_of(got, proto::MsgType::Credit) == std::vector<int>{0x10});
    std::filesystem::remove(config);
}

TEST_CASE("learner datagram TOS: with credit_priority false, CREDIT and MODEL both 0") {
    const std::string config = write_config("shesha-test-learner-send-off.yaml", "false");
    const std::vector<Received> got = exchange(config);
    const std::vector<int> model = tos_of(got, proto::MsgType::Model);
    REQUIRE(model.size() >= 3);
    CHECK(model == std::vector<int>(model.size(), 0));
    CHECK(tos_of(got, proto::MsgType::Credit) == std::vector<int>{0});
    std::filesystem::remove(config);
}

TEST_CASE("learner::datagram_tos: CREDIT only, ECN bits 0; send_datagram sets a datagram's TOS") {
    drl::LearnerConfig on;
    drl::LearnerConfig off;
    off.credit_priority = false;
    std::vector<std::uint8_t> credit(proto::kHeaderSize + proto::kCreditBodySize, 0);
    credit[proto::off::kType] = static_cast<std::uint8_t>(proto::MsgType::Credit);
    std::vector<std::uint8_t> model(proto::kHeaderSize, 0);
    model[proto::off::kType] = static_cast<std::uint8_t>(proto::MsgType::Model);
    CHECK(learner::datagram_tos(on, credit) == 0x10);
    CHECK((learner::kCreditTos & 0x03) == 0);  // Not-ECT: no switch marks it
    CHECK(learner::datagram_tos(on, model) == 0);
    CHECK(learner::datagram_tos(off, credit) == 0);
    CHECK(learner::datagram_tos(on, {}) == 0);

    // The helper alone, with and without a TOS, to a socket that reads it.
    TosWorker rx;
    net::UdpSocketOptions so;
    so.bind_addr = net::parse_ipv4("127.0.0.1");
    std::string err;
    const int tx = net::open_udp_socket(so, err);
    REQUIRE(tx >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(rx.port());
    to.sin_addr = *net::parse_ipv4("127.0.0.1");
    std::array<std::uint8_t, proto::kHeaderSize> dgram{};
    dgram[proto::off::kType] = static_cast<std::uint8_t>(proto::MsgType::Credit);
    CHECK(net::send_datagram(tx, to, dgram, std::uint8_t{0x10}));
    CHECK(net::send_datagram(tx, to, dgram));
    CHECK(net::send_datagram(tx, to, dgram, std::uint8_t{0x10}));
    std::vector<int> seen;
    for (int i = 0; i < 100000 && seen.size() < 3; ++i)
        if (auto r = rx.receive()) seen.push_back(r->tos);
    CHECK(seen == std::vector<int>{0x10, 0, 0x10});
    ::close(tx);
}
