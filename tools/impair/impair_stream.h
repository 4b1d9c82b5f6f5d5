// The decisions of shesha-impair for one direction of one link, without sockets or clocks: which
// packets are dropped, duplicated, delayed (delay and jitter) or held back so that later packets
// overtake them (reordering), and when each one is released. Time is given by the caller (ns), so
// the tests drive it with a virtual clock. Decisions come from a seeded generator that draws the
// same four numbers for every packet, so for a given seed and arrival order they are identical on
// every run.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace shesha::tools::impair {

struct ImpairSpec {
    double loss_pct = 0;        // each packet dropped with this probability
    double duplicate_pct = 0;   // each passed packet sent twice with this probability
    double reorder_pct = 0;     // each passed packet held until reorder_gap later ones have passed
    std::int64_t delay_ns = 0;  // added to every passed packet
    std::int64_t jitter_ns = 0; // uniform in [-jitter, +jitter], on top of delay; never reorders
    std::uint32_t reorder_gap = 3;
    std::int64_t reorder_max_hold_ns = 50'000'000;  // a held packet leaves by then even if traffic stops

    bool holds_packets() const { return delay_ns > 0 || jitter_ns > 0 || reorder_pct > 0; }
};

struct StreamCounters {
    std::uint64_t received = 0;    // packets seen
    std::uint64_t passed = 0;      // originals accepted (released)
    std::uint64_t dropped = 0;
    std::uint64_t delayed = 0;     // passed packets that were held for any time
    std::uint64_t reorder_held = 0;  // packets picked for reordering
    std::uint64_t reordered = 0;   // released after a packet that arrived later (what a receiver sees)
    std::uint64_t duplicated = 0;  // copies asked for (one per duplicated packet)
};

// One verdict to give: accept (and maybe send a copy) or drop the packet with this id.
struct Verdict {
    std::uint32_t id = 0;
    bool accept = false;
    bool duplicate = false;
};

class ImpairStream {
public:
    ImpairStream(const ImpairSpec& spec, std::uint64_t seed);

    // A packet arrived at now_ns. Appends the verdicts due now (possibly this packet's, possibly
    // others' that it let go, e.g. a reordered packet whose gap it completed).
    void on_packet(std::uint32_t id, std::int64_t now_ns, std::vector<Verdict>& out);
    // Appends the verdicts due at or before now_ns, in release order.
    void release_due(std::int64_t now_ns, std::vector<Verdict>& out);
    // Appends every held packet, in release order (at exit: nothing may stay queued).
    void release_all(std::vector<Verdict>& out);
    // When the next held packet is due; nullopt when nothing is held.
    std::optional<std::int64_t> next_due() const;
    std::size_t held() const { return in_order_.size() + reorder_held_.size(); }

    const StreamCounters& counters() const { return counters_; }

private:
    struct Held {
        std::uint64_t seq = 0;  // arrival order
        std::uint32_t id = 0;
        std::int64_t due_ns = 0;
        std::uint32_t gap_left = 0;  // reorder-held only: later packets still to overtake it
        bool duplicate = false;
    };
    static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

    double draw();  // uniform in [0, 1)
    void emit(const Held& h, std::vector<Verdict>& out);
    void release_until(std::int64_t limit_ns, std::vector<Verdict>& out);
    std::size_t earliest_reorder_held() const;

    ImpairSpec spec_;
    std::mt19937_64 rng_;
    StreamCounters counters_;
    std::uint64_t next_seq_ = 0;
    std::optional<std::uint64_t> max_released_seq_;
    std::int64_t last_in_order_due_ = std::numeric_limits<std::int64_t>::min();
    std::deque<Held> in_order_;       // due times never decrease
    std::vector<Held> reorder_held_;  // few at a time
};

}  // namespace shesha::tools::impair
