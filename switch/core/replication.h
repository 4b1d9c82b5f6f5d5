// In-network MODEL replication (docs/switch.md, "Model replication"): the learner of a cluster
// sends each MODEL chunk once, to its cluster's IPv4 multicast group; the switch delivers one copy
// to every member worker that joined, each out of the worker's port with the header the worker
// expects (its MAC, IP, UDP port and worker id), so the learner's link carries one copy instead of
// one per worker.
//
// Contract:
//   - join(): a model request (a MODEL without elements) from a member of a replicated cluster
//     (the cluster policy admits its MAC and IP) to the cluster's learner joins that worker, keyed
//     by its IP and UDP port (a worker that restarts on a new port joins again; one that keeps its
//     worker id but moved replaces its old entry). At most max_members joins are kept; the rest
//     are counted (model_members_full). A non-member's request is counted (model_join_refused).
//     Either way the request travels on to the learner as before.
//   - admit(): a MODEL to a configured group is replicated only if it comes from the cluster's
//     learner (source IP) and carries the group's cluster id; anything else is counted
//     (model_not_member) and dropped.
//   - rewrite(): the header of one copy: destination MAC, IPv4 destination and header checksum,
//     UDP destination port (UDP checksum cleared, allowed over IPv4), Shesha worker_id.
//   The ports come from the FDB when a copy is made: a member whose MAC the FDB does not know (it
//   left, or aged out) is counted (model_member_port_unknown), never flooded. Loss recovery stays
//   unicast: a worker that misses chunks asks, and the learner answers it alone.
//   - A multicast tree: members behind a fabric port (model_replication.fabric_ports, a link to
//     another Shesha switch that replicates the same group) get no copies of their own here. The
//     group frame goes through that port once, unchanged (model_fabric_copies), and the switch
//     behind it, which saw the same model requests pass, makes their copies. Each link then
//     carries one copy per chunk, not one per member behind it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <cstring>
#include <vector>

#include "big_endian.h"
#include "classify.h"
#include "counters.h"
#include "fdb.h"
#include "frame.h"
#include "protocol.h"
#include "switch_config.h"

namespace shesha::core {

struct GroupMember {
    Mac mac{};
    MacKey mac_key = 0;
    std::uint32_t ip = 0;         // host byte order
    std::uint16_t udp_port = 0;
    std::uint32_t worker_id = 0;
};

struct ReplicationGroup {
    std::uint16_t cluster_id = 0;
    std::uint32_t group = 0;    // multicast IPv4, host byte order
    std::uint32_t learner = 0;  // the only source allowed to send to the group
    std::uint32_t max_members = 0;
    std::vector<GroupMember> members;
    // Per port index: 1 where another Shesha switch replicating this group lies behind the port
    // (model_replication.fabric_ports). Its members get one copy of the group frame through it.
    std::vector<std::uint8_t> fabric;
    // Scratch of one replication: the fabric ports owed the group frame (reserved, no allocation).
    std::vector<std::uint16_t> fabric_owed;

    bool is_fabric(std::uint16_t port) const noexcept { return port < fabric.size() && fabric[port] != 0; }
    // (worker_id, index into members), sorted by worker_id: a CREDIT_BATCH entry's member in
    // O(log n). Rebuilt on every change of members (joins are rare; reserved, no allocation).
    std::vector<std::pair<std::uint32_t, std::uint32_t>> by_worker;

    const GroupMember* member_by_worker(std::uint32_t worker_id) const noexcept {
        const auto it = std::lower_bound(by_worker.begin(), by_worker.end(), worker_id,
                                         [](const auto& e, std::uint32_t id) { return e.first < id; });
        return it != by_worker.end() && it->first == worker_id ? &members[it->second] : nullptr;
    }
};

// The bytes of a frame up to the end of its Shesha header: what each copy gets of its own.
inline std::uint32_t replica_header_len(const PacketMeta& meta) noexcept {
    return static_cast<std::uint32_t>(meta.shesha_offset) + static_cast<std::uint32_t>(proto::kHeaderSize);
}

class ReplicationStage {
public:
    explicit ReplicationStage(const SwitchConfig& cfg) {
        for (const ClusterConfig& c : cfg.clusters)
            if (c.model_replication) {
                ReplicationGroup g;
                g.cluster_id = c.id;
                g.group = c.model_replication->group;
                g.learner = c.model_replication->learner;
                g.max_members = c.model_replication->max_members;
                g.members.reserve(g.max_members);
                g.by_worker.reserve(g.max_members);
                g.fabric.assign(cfg.ports.size(), 0);
                g.fabric_owed.reserve(cfg.ports.size());
                for (const std::string& name : c.model_replication->fabric_ports)
                    for (std::size_t p = 0; p < cfg.ports.size(); ++p)
                        if (cfg.ports[p].name == name) g.fabric[p] = 1;
                groups_.push_back(std::move(g));
            }
    }

    bool enabled() const noexcept { return !groups_.empty(); }

    // The group a MODEL is addressed to, or null (not a configured group: forwarded as before).
    ReplicationGroup* group_at(std::uint32_t dst_ip) noexcept {
        for (ReplicationGroup& g : groups_)
            if (g.group == dst_ip) return &g;
        return nullptr;
    }
    ReplicationGroup* group_of_cluster(std::uint16_t cluster_id) noexcept {
        for (ReplicationGroup& g : groups_)
            if (g.cluster_id == cluster_id) return &g;
        return nullptr;
    }

    // A model request of `frame` (classified as meta); `member`: the cluster policy admits its
    // source MAC and IP.
    void join(ReplicationGroup& g, const PacketMeta& meta, const std::uint8_t* frame, bool member,
              SwitchCounters& counters) noexcept {
        if (!member || meta.dst_ip != g.learner) {
            counters.add(SwitchCounter::ModelJoinRefused);
            return;
        }
        GroupMember m;
        std::memcpy(m.mac.data(), frame + 6, m.mac.size());
        m.mac_key = mac_key(frame + 6);
        m.ip = meta.src_ip;
        m.udp_port = be::load16(frame + meta.l4_offset);
        m.worker_id = be::load32(frame + meta.shesha_offset + proto::off::kWorkerId);
        switch (add_member(g, m)) {
        case Added::Changed:
            counters.add(SwitchCounter::ModelJoined);
            journal(g, m);
            break;
        case Added::Full: counters.add(SwitchCounter::ModelMembersFull); break;
        case Added::Same: break;
        }
    }

    // Several forwarding lcores each keep the groups and tell each other who joined (the learner's
    // MODEL and its workers' requests may arrive on different lcores): start_journal() keeps every
    // join for take_journal(); join_from_peer() applies another lcore's; export_members() lists
    // every member for the once-a-second resync that covers a full peer ring.
    struct Join {
        std::uint16_t group = 0;  // index into groups()
        GroupMember member;
    };
    void start_journal() noexcept { journaling_ = true; }
    template <class Sink>
    void take_journal(Sink&& sink) {
        for (std::uint32_t i = 0; i < n_journal_; ++i) sink(journal_[i]);
        n_journal_ = 0;
    }
    template <class Sink>
    void export_members(Sink&& sink) const {
        for (std::size_t g = 0; g < groups_.size(); ++g)
            for (const GroupMember& m : groups_[g].members) sink(Join{static_cast<std::uint16_t>(g), m});
    }
    void join_from_peer(const Join& j) noexcept {
        if (j.group < groups_.size()) add_member(groups_[j.group], j.member);
    }

    // Whether a MODEL to group g may be replicated: from the group's learner, for its cluster.
    static bool admit(const ReplicationGroup& g, const PacketMeta& meta) noexcept {
        return meta.src_ip == g.learner && meta.cluster_id == g.cluster_id;
    }

    // Rewrites the first replica_header_len(meta) bytes of a copy for member m.
    static void rewrite(std::uint8_t* header, const PacketMeta& meta, const GroupMember& m) noexcept {
        std::memcpy(header, m.mac.data(), m.mac.size());
        std::uint8_t* ip = header + meta.l3_offset;
        be::store32(ip + 16, m.ip);
        be::store16(ip + 10, frame::ipv4_header_checksum(ip, static_cast<std::size_t>(ip[0] & 0x0F) * 4));
        std::uint8_t* udp = header + meta.l4_offset;
        be::store16(udp + 2, m.udp_port);
        frame::clear_udp_checksum(udp);
        be::store32(header + meta.shesha_offset + proto::off::kWorkerId, m.worker_id);
    }

    // The size of the CREDIT one entry of a CREDIT_BATCH (classified as meta) becomes.
    static std::uint32_t credit_copy_len(const PacketMeta& meta) noexcept {
        return replica_header_len(meta) + static_cast<std::uint32_t>(proto::kCreditBodySize);
    }

    // Writes into out (credit_copy_len(meta) bytes) the CREDIT of entry i of the CREDIT_BATCH
    // `batch` for member m. Returns false, writing nothing useful, if the entry's flags are not a
    // CREDIT's. decode() has checked that the batch holds entry i.
    static bool credit_copy(std::uint8_t* out, const std::uint8_t* batch, const PacketMeta& meta, std::uint32_t i,
                            const GroupMember& m) noexcept {
        const std::uint32_t header_len = replica_header_len(meta);
        const std::uint8_t* entry = batch + header_len + i * proto::kCreditBatchEntrySize;
        const std::uint8_t flags = entry[4];
        if ((flags & ~proto::flag::kCongestionEcho) != 0) return false;
        std::memcpy(out, batch, header_len);
        const std::uint32_t len = header_len + static_cast<std::uint32_t>(proto::kCreditBodySize);
        be::store16(out + meta.l3_offset + 2, static_cast<std::uint16_t>(len - meta.l3_offset));
        be::store16(out + meta.l4_offset + 4, static_cast<std::uint16_t>(len - meta.l4_offset));
        std::uint8_t* shesha = out + meta.shesha_offset;
        shesha[proto::off::kType] = static_cast<std::uint8_t>(proto::MsgType::Credit);
        shesha[proto::off::kFlags] = flags;
        be::store16(shesha + proto::off::kElemCount, 0);
        rewrite(out, meta, m);  // addresses, IPv4 checksum (after the length), worker_id
        std::memcpy(out + header_len, entry + 8, proto::kCreditBodySize);
        return true;
    }

    const std::vector<ReplicationGroup>& groups() const noexcept { return groups_; }

private:
    enum class Added { Changed, Same, Full };
    // A worker that restarts on a new port joins again; one that keeps its worker id but moved
    // replaces its old entry.
    static Added add_member(ReplicationGroup& g, const GroupMember& m) noexcept {
        for (GroupMember& e : g.members)
            if ((e.ip == m.ip && e.udp_port == m.udp_port) || e.worker_id == m.worker_id) {
                if (e.mac_key == m.mac_key && e.ip == m.ip && e.udp_port == m.udp_port && e.worker_id == m.worker_id)
                    return Added::Same;
                e = m;
                index_by_worker(g);
                return Added::Changed;
            }
        if (g.members.size() >= g.max_members) return Added::Full;
        g.members.push_back(m);  // reserved for max_members: no allocation
        index_by_worker(g);
        return Added::Changed;
    }
    static void index_by_worker(ReplicationGroup& g) noexcept {
        g.by_worker.clear();
        for (std::uint32_t i = 0; i < g.members.size(); ++i) g.by_worker.emplace_back(g.members[i].worker_id, i);
        std::sort(g.by_worker.begin(), g.by_worker.end());
    }
    void journal(const ReplicationGroup& g, const GroupMember& m) noexcept {
        if (!journaling_ || n_journal_ == journal_.size()) return;  // the resync covers an overflow
        journal_[n_journal_++] = Join{static_cast<std::uint16_t>(&g - groups_.data()), m};
    }

    std::vector<ReplicationGroup> groups_;
    bool journaling_ = false;
    std::uint32_t n_journal_ = 0;
    std::array<Join, 16> journal_{};
};

}  // namespace shesha::core
