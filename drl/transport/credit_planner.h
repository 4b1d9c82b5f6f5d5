// CreditPlanner: the learner's half of the credit protocol (docs/transport.md, "Credit protocol").
// For each GRADIENT chunk the learner received, it says which workers get CREDIT messages and
// with what bodies. No sockets: the learner encodes and sends what plan() returns.
//
// Why a plan and not simply "credit the sender": a chunk merged in the network names only its
// first contributor (worker_id), yet it stood for several chunks in flight at several workers.
// The named worker gets one unit (its own chunk) plus the congestion echo; when the MERGED flag
// is set, packet_count - 1 further units go one at a time, round robin, to the cluster's other
// workers (in a one-worker cluster, back to that worker: the switch merged its own updates). The
// switch sums packet counts as it merges, so the units equal the packets that left flight however
// many contributions the senders had summed into each (SENDER_MERGED). In the common case, one
// chunk from each of c workers merged, every contributor gets its unit back; when the switch
// merged successive chunks of one worker, the count is right but a unit may reach another worker
// (CreditSender's bank and flight expiry absorb that). A merged chunk without a packet count (0)
// falls back to contrib_count - 1, an upper bound: one with nothing in flight ignores a surplus
// unit (CreditSender counts it as excess), one with chunks in flight sends a little early.
//
// A worker the learner has not heard from for a while (set_quiet, e.g. killed) gets no spread
// units: past its credit timeout it has forgotten its chunks in flight, so a unit sent to it would
// be excess there while the live contributors of the merge wait for it. Its share goes to the
// other live workers (to the named one if none is left). It still gets its own named units.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol.h"

namespace shesha::transport {

struct CreditGrant {
    std::uint32_t worker_id = 0;
    std::uint8_t flags = 0;  // CONGESTION_ECHO when ce_count > 0
    proto::CreditBody body;
};

struct CreditPlannerStats {
    std::uint64_t chunks = 0;           // chunks planned for
    std::uint64_t units_named = 0;      // units given to the named worker
    std::uint64_t units_spread = 0;     // units spread to the other workers
    std::uint64_t units_spread_past_quiet = 0;  // of those, spread while some other worker was quiet
    std::uint64_t echoes = 0;           // CE echoes
    std::uint64_t merged_without_packet_count = 0;  // merged chunks spread by contrib_count (no count)
    std::uint64_t unknown_worker = 0;   // chunk named a worker outside the cluster: no credit
    std::uint64_t wrong_cluster = 0;
};

class CreditPlanner {
public:
    // worker_ids: the cluster's workers (the learner knows them: it sends them the model).
    CreditPlanner(std::uint16_t cluster_id, std::span<const std::uint32_t> worker_ids);

    // Plans the credits for one received GRADIENT chunk (accepted or not by the Reassembler: the
    // chunk left flight either way). Writes at most max_grants() grants to out and returns how
    // many; 0 for a chunk of another cluster or from an unknown worker (counted).
    std::size_t plan(const proto::Header& chunk, std::uint32_t learner_version, std::span<CreditGrant> out) noexcept;

    std::size_t max_grants() const noexcept { return workers_.size(); }
    // A quiet worker is passed over by the spread (see above); unknown ids are ignored.
    void set_quiet(std::uint32_t worker_id, bool quiet) noexcept;
    const CreditPlannerStats& stats() const noexcept { return stats_; }

private:
    struct Worker {
        std::uint32_t id = 0;
        std::uint32_t acked_seq = 0;  // highest seq seen from it (serial order)
        bool any = false;
        bool quiet = false;
    };
    std::size_t index_of(std::uint32_t worker_id) const noexcept;

    std::uint16_t cluster_id_;
    std::vector<Worker> workers_;
    std::vector<std::uint32_t> units_;  // scratch: units per worker for the current chunk
    std::size_t cursor_ = 0;            // round robin position for spread units
    CreditPlannerStats stats_;
};

// Bytes a buffer needs for the largest CREDIT_BATCH.
inline constexpr std::size_t kCreditBatchBufferSize =
    proto::kHeaderSize + std::size_t{proto::kMaxCreditBatchEntries} * proto::kCreditBatchEntrySize;

// The learner's side of CREDIT fan-out (learner.credit_batching): the grants of one plan as
// CREDIT_BATCH datagrams of at most kMaxCreditBatchEntries entries, in the grants' order, each
// with the header fields of `header` (its type and elem_count are set here). Calls
// send(bytes, grants) per datagram with the grants it carries; returns how many there were. buf holds at least kCreditBatchBufferSize bytes.
template <class Send>
std::size_t encode_credit_batches(proto::Header header, std::span<const CreditGrant> grants, std::span<std::uint8_t> buf,
                                  Send&& send) {
    header.type = proto::MsgType::CreditBatch;
    header.elem_type = proto::ElemType::None;
    header.flags = 0;
    header.contrib_count = 1;
    std::size_t datagrams = 0;
    for (std::size_t first = 0; first < grants.size(); first += proto::kMaxCreditBatchEntries) {
        const std::size_t n = std::min<std::size_t>(proto::kMaxCreditBatchEntries, grants.size() - first);
        header.elem_count = static_cast<std::uint16_t>(n);
        for (std::size_t i = 0; i < n; ++i) {
            const CreditGrant& g = grants[first + i];
            proto::encode_credit_batch_entry(proto::CreditBatchEntry{g.worker_id, g.flags, g.body},
                                             buf.subspan(proto::kHeaderSize + i * proto::kCreditBatchEntrySize));
        }
        const std::size_t body = n * proto::kCreditBatchEntrySize;
        const std::size_t len = proto::encode(header, buf.subspan(proto::kHeaderSize, body), buf);
        if (len != 0) {
            send(std::span<const std::uint8_t>(buf.data(), len), grants.subspan(first, n));
            ++datagrams;
        }
    }
    return datagrams;
}

}  // namespace shesha::transport
