// A switch port as the pipeline holds it, grouped by who writes what:
//   - identity, fixed after construction: name, the largest frame it may send, its MAC;
//   - rx: the RX counters, written by whoever classifies the port's frames (an RX lcore, or the
//     forwarding thread);
//   - the egress queue stage (base EgressQueue: queue, shaper, staged arrivals, marking);
//   - the TX batch stage (base TxBatch, poll mode);
//   - tx: the TX counters. These three belong to the forwarding thread.
// Each group that another thread reads sits on cache lines of its own (counters.h).
//
// StageCursor is a forwarding pass's write position: the port it last staged for, with that
// port's staged-arrival and TX-batch cursors copied into locals, so a pass of frames to one port
// never reloads them. It is written back when the pass moves to another port or ends.
#pragma once

#include <cstdint>
#include <string>

#include "counters.h"
#include "merge_frame.h"
#include "egress_queue.h"
#include "frame.h"
#include "switch_config.h"
#include "tx_batch.h"

namespace shesha::core {

template <class Handle>
struct Port : EgressQueue, TxBatch<Handle> {
    Port(const SwitchConfig& cfg, const PortConfig& pc, std::uint64_t hz, std::uint32_t burst, bool poll_mode)
        : EgressQueue(cfg, pc, hz, burst),
          TxBatch<Handle>(poll_mode ? burst : 0),
          name(pc.name),
          max_frame(pc.mtu + kFrameOverhead),
          // A queue with a byte limit below the largest single-segment frame could tail-drop a
          // frame that finds it empty; such a port never bypasses, so bypassing never changes an
          // outcome.
          bypass_ok(poll_mode && bucket.unlimited() && queue.config().capacity_bytes >= 0xFFFF),
          // GRADIENTs bypass only where no class or share counts them: one class, fewer than two
          // clusters counted (batch_merge.h).
          gradient_bypass_ok(bypass_ok && queue.class_count() == 1 && queue.shares().empty()),
          batch_merging(gradient_bypass_ok && queue.config().aggregation) {}

    std::string name;
    const std::uint32_t max_frame;  // the largest frame this port may send (mtu + 18)
    frame::MacAddr mac{};           // FEEDBACK leaves with this source MAC

    PortCounters rx;  // written by whoever classifies this port's frames

    // Forwarding thread only.
    const bool bypass_ok;  // unshaped, poll mode, and a queue that takes any single frame when empty
    const bool gradient_bypass_ok;  // and a GRADIENT may bypass too (one class, no shares counted)
    const bool batch_merging;       // and mergeable ones merge in the TX batch (the queue aggregates)
    std::uint32_t too_big_first_len = 0;  // length of the first frame refused as too big
    PortCounters tx;
};

template <class Handle>
struct StageCursor {
    explicit StageCursor(bool bypass) noexcept : bypass_allowed(bypass) {}

    const bool bypass_allowed;  // whether this pass's frames may bypass an empty queue at all
    Port<Handle>* port = nullptr;
    Arrival* stage = nullptr;
    std::uint32_t staged = 0;
    Handle* tx = nullptr;
    std::uint32_t* tx_len = nullptr;
    std::uint16_t* tx_contrib = nullptr;
    std::uint32_t n_tx = 0;
    std::uint32_t n_tx_loaded = 0;  // n_tx when loaded or last written back
    std::uint32_t bypass_limit = 0;  // how far the batch may grow by bypassing (0: the port must queue)
    std::uint64_t bypass_bytes = 0;

    [[gnu::always_inline]] inline void open(Port<Handle>& p, std::uint32_t burst) noexcept {
        port = &p;
        stage = p.staged.data();
        staged = p.n_staged;
        tx = p.tx_handles.data();
        tx_len = p.tx_lens.data();
        tx_contrib = p.tx_contributions.data();
        n_tx = n_tx_loaded = p.n_tx;
        bypass_bytes = p.bypass_bytes;
        bypass_limit = bypass_allowed && p.bypass_ok && p.n_pending == 0 && staged == 0 &&
                               (p.queue.known_empty() || p.queue.depth() == 0) ? burst : 0;
    }
    [[gnu::always_inline]] inline void write_back() noexcept {
        port->n_staged = staged;
        port->n_tx = n_tx;
        port->bypass_bytes = bypass_bytes;
        // Each bypassing arrival decays the recent mark fraction as an unmarked queued one would
        // (flush_staged), in arrival order: before anything later reaches this port's queue.
        for (std::uint32_t k = n_tx_loaded; k < n_tx && port->mark_ewma != 0; ++k) update_mark_ewma(port->mark_ewma, false);
        n_tx_loaded = n_tx;
    }
    [[gnu::always_inline]] inline void close() noexcept {
        if (port == nullptr) return;
        write_back();
        port = nullptr;
    }
    // The live count of a port's staged arrivals.
    [[gnu::always_inline]] inline std::uint32_t staged_on(const Port<Handle>& p) const noexcept {
        return &p == port ? staged : p.n_staged;
    }
};

}  // namespace shesha::core
