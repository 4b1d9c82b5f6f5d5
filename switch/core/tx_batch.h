// Stage 6 of the pipeline, the TX batch: what a port hands to its transmitter each round.
//
// Contract (poll mode): one batch per port. [0, n_pending) left the queue in an earlier round and
// were refused by the NIC: they go first, in order. [n_pending, n_tx) bypassed the queue during
// this round's forwarding: arrivals that could not merge, found the queue empty on an unshaped
// port with nothing refused pending, and would have been dequeued in this round's transmit()
// anyway (bypass_bytes of frame bytes, counted by the queue as enqueued and dequeued in
// transmit()). GRADIENTs among them may have had later ones of the same pass merged into them
// (batch_merge.h); those merges are counted by the queue too, as if it had made them. transmit() appends what the queue releases through the port's token bucket, hands
// the batch to Io::tx_burst, counts what was sent and keeps what was refused. Owned by the
// forwarding thread. Pull mode (the simulator) has no batch: it dequeues one departure at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "batch_merge.h"
#include "counters.h"
#include "port_queue.h"
#include "token_bucket.h"

namespace shesha::core {

template <class Handle>
struct TxBatch {
    explicit TxBatch(std::uint32_t capacity)
        : tx_handles(capacity), tx_lens(capacity), tx_contributions(capacity), batch_merges(capacity) {}

    std::vector<Handle> tx_handles;
    std::vector<std::uint32_t> tx_lens;
    std::vector<std::uint16_t> tx_contributions;
    std::uint32_t n_pending = 0;
    std::uint32_t n_tx = 0;
    std::uint64_t bypass_bytes = 0;
    // GRADIENTs of this batch that later ones merged into, and what merged (batch_merge.h).
    BatchMergeIndex batch_merges;
    BatchMergeCounts batch_merge_counts;

    // The packets that bypassed the empty queue this round count as its arrivals and departures,
    // and the merges made in the batch as the queue's merges. The batch's merge index ends here.
    void count_bypassed(PortQueue& queue) noexcept {
        const std::uint32_t bypassed = n_tx - n_pending;
        if (bypassed == 0) return;
        queue.count_bypass(bypassed, bypass_bytes);
        bypass_bytes = 0;
        if (batch_merge_counts.mergeable != 0) {
            queue.count_batch_merges(batch_merge_counts);
            batch_merge_counts = {};
        }
        batch_merges.clear();
    }

    // Fills the batch (refused first, then bypassed, then dequeued through the token bucket, up to
    // `burst`) and sends it out of port `index`. Returns packets sent.
    template <class Io>
    unsigned transmit(Io& io, std::uint16_t index, PortQueue& queue, TokenBucket& bucket, PortCounters& tx,
                      std::uint32_t burst, std::uint64_t now) noexcept {
        count_bypassed(queue);
        Handle* out = tx_handles.data();
        std::uint32_t* len = tx_lens.data();
        std::uint16_t* contrib = tx_contributions.data();
        std::uint32_t n = n_tx;
        if (bucket.unlimited()) {
            // No shaper: take the whole burst from the queue at once, straight into the TX arrays.
            static_assert(sizeof(Handle) == sizeof(void*));
            if (!queue.known_empty())
                n += queue.dequeue_burst(now, reinterpret_cast<void**>(out + n), len + n, contrib + n, burst - std::min(n, burst));
        } else {
            while (n < burst) {
                const std::uint32_t front = queue.front_len();
                if (front == 0 || !bucket.try_consume(front, now)) break;
                Departure d;
                if (!queue.dequeue(now, d)) break;
                out[n] = static_cast<Handle>(d.handle);
                len[n] = d.frame_len;
                contrib[n] = d.contributions;
                ++n;
            }
        }
        if (n == 0) return 0;

        const std::uint16_t sent = io.tx_burst(index, out, static_cast<std::uint16_t>(n));
        std::uint64_t bytes = 0, contributions_sent = 0;
        for (std::uint16_t i = 0; i < sent; ++i) {
            bytes += len[i];
            contributions_sent += contrib[i];
        }
        tx.add(PortCounter::TxPackets, sent);
        tx.add(PortCounter::TxBytes, bytes);
        tx.add(PortCounter::TxContributions, contributions_sent);
        n_pending = n_tx = n - sent;
        if (n_pending != 0) {
            tx.add(PortCounter::TxRefused, n_pending);
            std::memmove(out, out + sent, n_pending * sizeof(*out));
            std::memmove(len, len + sent, n_pending * sizeof(*len));
            std::memmove(contrib, contrib + sent, n_pending * sizeof(*contrib));
        }
        return sent;
    }

    // Frees everything in the batch (at shutdown), counted as tx_dropped.
    template <class Io>
    void drop_all(Io& io, PortQueue& queue, PortCounters& tx) noexcept {
        count_bypassed(queue);  // bypassed packets were dequeued, so they count as dropped here too
        if (n_tx == 0) return;
        tx.add(PortCounter::TxDropped, n_tx);
        for (std::uint32_t i = 0; i < n_tx; ++i) io.free(tx_handles[i]);
        n_pending = n_tx = 0;
    }
};

}  // namespace shesha::core
