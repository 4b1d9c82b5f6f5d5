// CreditSender: the per-worker sending state machine of the Shesha transport (docs/transport.md).
//
// It owns no socket and reads no clock: the caller feeds it gradients, CREDIT and FEEDBACK bodies
// and the current time, and asks it which chunk to send next. So the same code runs in a worker,
// in unit tests, in the simulator and under the verifier, with scripted inputs.
//
//   offer_update()   a new flat gradient: split into chunks, each merged into the pending buffer
//   next_to_send()   the next chunk, if the window has room (consumes one credit)
//   on_credit()      the learner released chunks; congestion echo; may end a window-round
//   on_feedback()    the switch reported a marking queue: early window cut, once per round
//   on_timeout()     no credit for too long: forget the chunks in flight so sending resumes
//
// Window: DCTCP-style over window-rounds, see the rules in on_credit()/on_feedback() and in
// docs/transport.md. Memory: one chunk-sized slot per chunk index, allocated at construction; a
// newer gradient for a chunk that still waits for credit is summed into it (sender-side merge),
// so at most chunk_count chunks are ever pending and nothing allocates afterwards.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol.h"
#include "transport/chunking.h"

namespace shesha::transport {

// Filled from the worker's YAML by its config loader; validate() says what is wrong.
struct SenderConfig {
    std::uint16_t cluster_id = 0;
    std::uint32_t worker_id = 0;
    std::uint32_t model_elems = 0;     // size of the flat gradient
    std::uint32_t chunk_elems = 1024;  // elements per chunk, <= proto::kMaxElements
    // Window, in chunks in flight. Fractional internally (DCTCP cuts are multiplicative); the
    // usable window is floor(W). Below 1 the sender paces: one chunk in flight, and after its
    // credit it waits (1/W - 1) smoothed round-trip times before the next, so W = 0.25 sends one
    // chunk every 4 RTTs. That lets 1,000+ senders behind one port go below a chunk each.
    double w_init = 16;
    // Below 1 by default: at the floor of one chunk per sender, credit units spread after in-network
    // merges can hold a standing queue (docs/transport.md, "A standing queue at the floor").
    double w_min = 1.0 / 16;           // > 0; below 1 allows pacing
    double w_max = 256;
    double additive_increase = 1;      // chunks added per window-round without marks
    // Until the first cut (echoed marks, FEEDBACK or a credit timeout) a round without marks
    // doubles the window (by the units credited in it, at most the window) instead of adding
    // additive_increase, as TCP's slow start: a sender whose path never marks reaches the window it
    // needs in a few round trips, not in one round per chunk (docs/transport.md, "Slow start").
    bool slow_start = true;
    double gain = 1.0 / 16;            // g, EWMA gain of alpha (DCTCP's default)
    double alpha_init = 1.0;           // alpha before any round (DCTCP starts conservative at 1)
    std::uint64_t credit_timeout_ns = 200'000'000;  // 0 disables on_timeout()
    std::uint32_t first_seq = 1;       // seq of the first update (0 is reserved for "none acked")
    // A waiting chunk whose base version is more than this behind a newer update's is replaced by
    // it instead of merged (its stale contents are dropped, counted). Default: always merge.
    std::uint32_t merge_version_gap = UINT32_MAX;
    // A FEEDBACK cut scaled by (1 - merge fraction the switch reports): a queue that merges what
    // arrives is absorbing the load, and cutting there only takes merges away. Off by default: in
    // the simulator study it helps some points and hurts others (docs/simulation.md).
    bool merge_aware = false;
    // With merge_aware: while the switch's latest FEEDBACK says its queue merges at least a tenth of
    // the mergeable arrivals (merge_permille >= 100), the window is not cut below this many chunks
    // (and is lifted to it): a bottleneck that merges what arrives absorbs the load, and a window
    // that holds chunks back only makes them merge at the sender for longer and arrive older.
    // Once the queue stops merging, the floor is w_min again. 0 (the default): no such floor.
    double merge_floor = 0;
    // A CREDIT's acked_seq retires the chunks in flight sent before that update's (docs/transport.md,
    // "Cumulative acknowledgement"). Off by default: on the lab's rack (seeds 4-13) it raised full
    // Shesha's AoM from 3.3 to 8.8 ms, since a chunk merged into a packet another worker names is
    // still queued when its own worker's later updates are acknowledged; the simulator's busy points
    // gain from it (shesha-sim transport.cumulative_ack).
    bool cumulative_ack = false;
    // Credit units that arrive with nothing left in flight are kept (up to the usable window) and
    // spent on the next chunks that find the window full, instead of dropped as excess. The learner
    // spreads a merged packet's extra units over the cluster, not to its contributors (it cannot
    // know them): a contributor keeps its merged chunk in flight while its unit lands at a worker
    // with nothing in flight. Kept, that unit lets the cluster's credit stay whole (docs/transport.md,
    // "Banked credit"). Not with pacing (window below 1); a window cut trims the bank to the new
    // window, a credit timeout empties it.
    bool bank_excess = false;
    // The oldest chunks in flight are presumed to have left flight once they have been out longer
    // than flight_expiry_rtts times the sender's acknowledged round trip (ack_rtt_ns()), even while
    // other credits keep arriving: their units most likely went to other workers after an
    // in-network merge (docs/transport.md, "The other half: flight expiry"). Checked by
    // on_timeout(); nothing expires before the first sample. 0: off. The default, 2, is the one
    // the simulator's study and the lab's rack measured (docs/transport.md, "Slow start, and the
    // expiry on by default"). YAML transport.flight_expiry_rtts, shesha-sim transport.flight_expiry_rtts.
    double flight_expiry_rtts = 2;
    // A fixed expiry instead (0: use flight_expiry_rtts). YAML transport.flight_expiry_ms,
    // shesha-sim transport.flight_expiry_us.
    std::uint64_t flight_expiry_ns = 0;
};

// Empty if the config is usable, else the first problem found.
std::string validate(const SenderConfig& cfg);

// The credit loop's leak repairs (banked credit, flight expiry) belong to congestion control: a
// sender without it (shesha-worker --congestion-control off, shesha-sim's window_control: false,
// the FIFO baseline) runs without them. How the window is pinned open differs between the two and
// stays with each caller.
inline void turn_off_leak_repairs(SenderConfig& cfg) noexcept {
    cfg.bank_excess = false;
    cfg.flight_expiry_ns = 0;
    cfg.flight_expiry_rtts = 0;
}

// A chunk ready to go: a complete GRADIENT header and its elements. elements points into the
// sender's pending slot and stays valid until the next offer_update().
struct OutgoingChunk {
    proto::Header header;
    std::span<const float> elements;
};

enum class OfferResult : std::uint8_t {
    Ok,
    WrongSize,  // the gradient is not model_elems long
    NonFinite,  // NaN or infinity somewhere: the whole update is refused (it would poison merges)
};

struct SenderCounters {
    std::uint64_t updates_offered = 0;     // accepted by offer_update()
    std::uint64_t updates_rejected = 0;    // WrongSize or NonFinite
    std::uint64_t chunks_queued = 0;       // chunks that took a free pending slot
    std::uint64_t chunks_merged = 0;       // chunks summed into a waiting one (sender-side merge)
    std::uint64_t chunks_dropped_overflow = 0;  // merge refused: contrib_count would pass 65535
    std::uint64_t chunks_replaced_stale = 0;    // waiting chunk too old (merge_version_gap): replaced
    std::uint64_t chunks_sent = 0;
    std::uint64_t contributions_sent = 0;  // sum of contrib_count over sent chunks
    std::uint64_t credit_messages = 0;
    std::uint64_t credits_received = 0;    // sum of CreditBody::credits
    std::uint64_t credits_excess = 0;      // credit units beyond the chunks in flight, not kept (ignored)
    std::uint64_t credits_banked = 0;      // bank_excess: units beyond the chunks in flight, kept
    std::uint64_t credits_forfeited = 0;   // of those, dropped from the bank later (cut, timeout)
    std::uint64_t chunks_prepaid = 0;      // chunks sent on a kept unit: they never enter flight
    std::uint64_t marks_echoed = 0;        // CE marks reported by the learner (ce_count)
    std::uint64_t feedback_received = 0;
    std::uint64_t feedback_reductions = 0; // window cuts caused by FEEDBACK
    std::uint64_t feedback_ignored = 0;    // FEEDBACK in a round that already had its cut
    std::uint64_t merge_floor_lifts = 0;   // merge_aware: window raised to merge_floor by a merging queue's FEEDBACK
    std::uint64_t rounds = 0;              // window-rounds completed
    std::uint64_t round_reductions = 0;    // end-of-round cuts caused by echoed marks
    std::uint64_t round_increases = 0;     // end-of-round additive increases
    std::uint64_t slow_start_increases = 0;  // of those, doublings in slow start (slow_start)
    std::uint64_t credit_timeouts = 0;
    // Left flight without a credit unit: in flight when a credit timeout fired, or retired by a
    // CREDIT's acked_seq (chunks_acked_past), so that chunks_sent = credits_received - credits_excess
    // - banked() + chunks_presumed_lost + in_flight() still holds (units kept and later forfeited
    // count in credits_excess; units spent count as credited).
    std::uint64_t chunks_presumed_lost = 0;
    // Of chunks_presumed_lost: retired by acked_seq, sent before a chunk of a later update that the
    // learner has seen (their CREDIT was lost, or its unit spread to another worker after a merge).
    std::uint64_t chunks_acked_past = 0;
    // Of chunks_presumed_lost: retired by flight_expiry_ns, in flight longer than that.
    std::uint64_t chunks_expired = 0;
};

class CreditSender {
public:
    // Throws std::invalid_argument if validate(cfg) fails (construction is not on the data path).
    explicit CreditSender(const SenderConfig& cfg);

    // Splits a flat gradient computed on model `version`, generated at ts_ns, into chunks and puts
    // each into the pending buffer: into a free slot, or summed into the chunk of the same index
    // that still waits (elements added, contrib_count added, ts_earliest min, ts_latest max,
    // version min, SENDER_MERGED). Each accepted update takes the next seq.
    OfferResult offer_update(std::uint32_t version, std::uint64_t ts_ns, std::span<const float> flat_gradient) noexcept;

    // The oldest pending chunk, if in_flight() < floor(window()); it then counts as in flight.
    std::optional<OutgoingChunk> next_to_send(std::uint64_t now_ns) noexcept;

    // A CREDIT from the learner (the caller checked its header: cluster, worker). First, every chunk
    // in flight that was sent before the first chunk of update acked_seq (0: none) leaves flight, as
    // a cumulative acknowledgement: the learner has seen that update's chunk, and the ones sent before
    // it took the same path ahead of it (counted chunks_acked_past). Then credits chunks leave flight
    // (at most in_flight(); the rest is counted as excess). flags may carry CONGESTION_ECHO: an echo
    // with ce_count 0 counts as one mark.
    void on_credit(const proto::CreditBody& credit, std::uint8_t flags, std::uint64_t now_ns) noexcept;

    // A FEEDBACK from the switch. Cuts the window at most once per window-round.
    void on_feedback(const proto::FeedbackBody& feedback, std::uint64_t now_ns) noexcept;

    // Call periodically. If chunks are in flight and no credit came for credit_timeout_ns, they
    // are presumed lost (or credited to another worker after an in-network merge): in_flight
    // drops to 0 so the window opens again. Returns true if the timeout fired. With
    // flight_expiry_ns, the runs of chunks sent longer ago than that leave flight first.
    bool on_timeout(std::uint64_t now_ns) noexcept;

    // State, for the caller's sampling and for tests.
    double window() const noexcept { return window_; }
    std::uint32_t usable_window() const noexcept { return window_ < 1.0 ? 1u : static_cast<std::uint32_t>(window_); }
    bool pacing() const noexcept { return window_ < 1.0; }
    std::uint64_t srtt_ns() const noexcept { return srtt_ns_; }
    // The acknowledged round trip: smoothed (1/8) time from sending an update's first chunk to the
    // first CREDIT that acknowledges that update (acked_seq moves to it). Only this worker's own
    // acknowledgements count: units the learner spreads after a merge arrive at any time and say
    // nothing about this worker's path. 0: no sample yet.
    std::uint64_t ack_rtt_ns() const noexcept { return ack_rtt_ns_; }
    // The expiry on_timeout() applies now (0: none).
    std::uint64_t flight_expiry_ns() const noexcept;
    double alpha() const noexcept { return alpha_; }
    std::uint32_t in_flight() const noexcept { return in_flight_; }
    bool in_slow_start() const noexcept { return in_slow_start_; }
    std::uint32_t banked() const noexcept { return bank_; }  // bank_excess: kept units not yet spent
    std::uint32_t credits_available() const noexcept;
    std::uint32_t pending_chunks() const noexcept { return pending_count_; }
    bool is_pending(std::uint16_t chunk_index) const noexcept;
    std::uint32_t next_seq() const noexcept { return next_seq_; }
    std::uint32_t acked_seq() const noexcept { return acked_seq_; }       // highest seen (serial order)
    std::uint32_t learner_version() const noexcept { return learner_version_; }
    const proto::FeedbackBody& last_feedback() const noexcept { return last_feedback_; }
    std::size_t pending_buffer_bytes() const noexcept { return storage_.size() * sizeof(float); }
    const ChunkLayout& layout() const noexcept { return layout_; }
    const SenderConfig& config() const noexcept { return cfg_; }
    const SenderCounters& counters() const noexcept { return c_; }

    // The congestion fraction a FEEDBACK stands for: max(mark_permille / 1000, depth / capacity),
    // clamped to [0, 1]. Public so the simulator and the docs' examples use the same formula.
    static double feedback_fraction(const proto::FeedbackBody& f) noexcept;

private:
    struct Slot {
        bool pending = false;
        std::uint16_t contrib_count = 0;
        std::uint32_t version = 0;
        std::uint32_t seq = 0;
        std::uint64_t ts_earliest = 0;
        std::uint64_t ts_latest = 0;
    };

    void end_round() noexcept;
    void retire_oldest(std::uint32_t n) noexcept;                 // the n oldest chunks in flight left it
    std::uint32_t retire_before(std::uint32_t acked_seq) noexcept;  // the oldest ones with seq before acked_seq
    std::uint32_t retire_sent_before(std::uint64_t ns) noexcept;    // the oldest runs sent before ns
    // Pops the oldest runs while leaves(run) holds; returns the chunks they held.
    template <typename Leaves>
    std::uint32_t retire_runs_while(Leaves leaves) noexcept;
    void start_round() noexcept;
    void cut_window(double a) noexcept;
    void trim_bank(std::uint32_t limit) noexcept;
    double merge_fraction() const noexcept;  // the latest FEEDBACK's merge_permille / 1000 (merge_aware)
    double floor() const noexcept;           // w_min, or the merge floor while the queue merges

    SenderConfig cfg_;
    ChunkLayout layout_;
    std::vector<float> storage_;        // model_elems floats: slot k at layout_.offset(k)
    std::vector<Slot> slots_;           // chunk_count
    std::vector<std::uint16_t> order_;  // FIFO ring of pending chunk indexes, chunk_count entries
    std::uint32_t order_head_ = 0;
    std::uint32_t pending_count_ = 0;

    double window_;
    double alpha_;
    bool in_slow_start_;  // slow_start, until the first cut or credit timeout
    std::uint32_t in_flight_ = 0;
    std::uint32_t bank_ = 0;  // bank_excess: credit units kept for chunks that find the window full
    // The chunks in flight in send order, as runs of equal seq: seqs go out in non-decreasing order (a
    // waiting chunk keeps its first seq and its place), so a cumulative acknowledgement retires a
    // prefix. The runs hold in_flight_ chunks in all. Fixed capacity, allocated at construction
    // (min(w_max, 1024) + 1 runs); with a larger window, a chunk that finds it full joins the last run.
    struct FlightRun {
        std::uint32_t seq = 0;
        std::uint32_t count = 0;
        std::uint64_t sent_ns = 0;  // when its first chunk went out
    };
    std::vector<FlightRun> runs_;
    std::uint32_t runs_head_ = 0;
    std::uint32_t runs_count_ = 0;
    std::uint32_t next_seq_;
    std::uint32_t acked_seq_ = 0;
    bool any_ack_ = false;
    std::uint32_t learner_version_ = 0;
    proto::FeedbackBody last_feedback_{};

    // Window-round accounting. Every chunk sent is eventually retired (credited, or forgotten by a
    // timeout): sent == retired + in_flight. A round ends at the first credit after which every
    // chunk sent before the round began is retired.
    std::uint64_t retired_total_ = 0;
    std::uint64_t round_end_ = 0;         // chunks_sent when the round began
    std::uint64_t round_credited_ = 0;
    std::uint64_t round_marked_ = 0;
    bool round_cut_ = false;              // the window was already cut in this round (FEEDBACK)
    std::uint64_t last_progress_ns_ = 0;  // last credit, or first send into an empty window
    std::uint64_t last_send_ns_ = 0;      // the latest chunk sent (pacing: the one in flight)
    std::uint64_t srtt_ns_ = 0;           // smoothed send-to-credit time of paced chunks (0: none yet)
    // When the first chunk of each of the last kSentLog updates went out, by seq % kSentLog: the
    // round-trip samples of ack_rtt_ns_.
    static constexpr std::uint32_t kSentLog = 64;
    struct SentMark {
        std::uint32_t seq = 0;
        bool valid = false;
        std::uint64_t sent_ns = 0;
    };
    std::array<SentMark, kSentLog> sent_log_{};
    std::uint64_t ack_rtt_ns_ = 0;
    std::uint64_t next_send_ns_ = 0;      // pacing: no chunk before this

    SenderCounters c_;
};

}  // namespace shesha::transport
