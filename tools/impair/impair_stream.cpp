#include "impair_stream.h"

#include <algorithm>

namespace shesha::tools::impair {

ImpairStream::ImpairStream(const ImpairSpec& spec, std::uint64_t seed) : spec_(spec), rng_(seed) {}

double ImpairStream::draw() {
    // 53 random bits: the same doubles with every standard library (std distributions may differ).
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void ImpairStream::on_packet(std::uint32_t id, std::int64_t now_ns, std::vector<Verdict>& out) {
    ++counters_.received;
    // Always four draws per packet, so one packet's fate never shifts the next one's draws.
    const double loss_draw = draw();
    const double duplicate_draw = draw();
    const double reorder_draw = draw();
    const double jitter_draw = draw();

    if (loss_draw * 100.0 < spec_.loss_pct) {
        ++counters_.dropped;
        out.push_back({id, false, false});
        return;
    }
    Held h;
    h.seq = next_seq_++;
    h.id = id;
    h.duplicate = duplicate_draw * 100.0 < spec_.duplicate_pct;
    const auto jitter = static_cast<std::int64_t>((jitter_draw * 2.0 - 1.0) * static_cast<double>(spec_.jitter_ns));
    const std::int64_t due = now_ns + std::max<std::int64_t>(0, spec_.delay_ns + jitter);
    if (reorder_draw * 100.0 < spec_.reorder_pct) {
        ++counters_.reorder_held;
        h.due_ns = due + spec_.reorder_max_hold_ns;
        h.gap_left = std::max<std::uint32_t>(1, spec_.reorder_gap);
        reorder_held_.push_back(h);
    } else {
        // Jitter never reorders: a packet leaves no earlier than the one before it.
        h.due_ns = std::max(due, last_in_order_due_);
        last_in_order_due_ = h.due_ns;
        in_order_.push_back(h);
    }
    release_until(now_ns, out);
    // Anything of this packet's still held counts as delayed.
    const bool still_held = (!in_order_.empty() && in_order_.back().seq == h.seq) ||
                            std::any_of(reorder_held_.begin(), reorder_held_.end(),
                                        [&](const Held& r) { return r.seq == h.seq; });
    if (still_held) ++counters_.delayed;
}

void ImpairStream::release_due(std::int64_t now_ns, std::vector<Verdict>& out) { release_until(now_ns, out); }

void ImpairStream::release_all(std::vector<Verdict>& out) { release_until(kNever, out); }

std::optional<std::int64_t> ImpairStream::next_due() const {
    std::int64_t due = kNever;
    if (!in_order_.empty()) due = in_order_.front().due_ns;
    if (!reorder_held_.empty()) due = std::min(due, reorder_held_[earliest_reorder_held()].due_ns);
    if (due == kNever) return std::nullopt;
    return due;
}

std::size_t ImpairStream::earliest_reorder_held() const {
    std::size_t best = 0;
    for (std::size_t i = 1; i < reorder_held_.size(); ++i) {
        if (reorder_held_[i].due_ns < reorder_held_[best].due_ns) best = i;
    }
    return best;
}

void ImpairStream::emit(const Held& h, std::vector<Verdict>& out) {
    ++counters_.passed;
    if (max_released_seq_ && h.seq < *max_released_seq_) ++counters_.reordered;
    if (!max_released_seq_ || h.seq > *max_released_seq_) max_released_seq_ = h.seq;
    if (h.duplicate) ++counters_.duplicated;
    out.push_back({h.id, true, h.duplicate});
}

void ImpairStream::release_until(std::int64_t limit_ns, std::vector<Verdict>& out) {
    for (;;) {
        const std::int64_t in_order_due = in_order_.empty() ? kNever : in_order_.front().due_ns;
        const std::size_t r = reorder_held_.empty() ? 0 : earliest_reorder_held();
        const std::int64_t reorder_due = reorder_held_.empty() ? kNever : reorder_held_[r].due_ns;
        const std::int64_t next = std::min(in_order_due, reorder_due);
        if (next == kNever || next > limit_ns) return;
        if (reorder_due < in_order_due) {
            // Its maximum hold ran out before enough later packets came.
            const Held h = reorder_held_[r];
            reorder_held_.erase(reorder_held_.begin() + static_cast<std::ptrdiff_t>(r));
            emit(h, out);
            continue;
        }
        const Held h = in_order_.front();
        in_order_.pop_front();
        emit(h, out);
        // Each later packet that leaves overtakes the held ones; those it completes leave right
        // after it, oldest first.
        for (auto& held : reorder_held_) {
            if (h.seq > held.seq && held.gap_left > 0) --held.gap_left;
        }
        std::vector<Held> done;
        for (auto it = reorder_held_.begin(); it != reorder_held_.end();) {
            if (it->gap_left == 0) {
                done.push_back(*it);
                it = reorder_held_.erase(it);
            } else {
                ++it;
            }
        }
        std::sort(done.begin(), done.end(), [](const Held& a, const Held& b) { return a.seq < b.seq; });
        for (const Held& d : done) emit(d, out);
    }
}

}  // namespace shesha::tools::impair
