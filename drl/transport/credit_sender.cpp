#include "transport/credit_sender.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "merge_kernel.h"

namespace shesha::transport {

namespace {
// merge_floor applies while the latest FEEDBACK reports at least this fraction of the mergeable
// arrivals merged. Low on purpose: a queue that merges a tenth of its arrivals absorbs load that a
// window cut would only move to the sender. With the threshold at one half, the leaf-spine study
// point (4,096 workers) fell below it, the windows were cut and staleness rose from 29 to 118.
constexpr double kMergeFloorFraction = 0.1;
// Runs of in-flight seqs tracked for cumulative acknowledgement (runs_): enough for every window up
// to this many chunks to give each chunk in flight its own run.
constexpr double kMaxFlightRuns = 1024;
}  // namespace

std::string validate(const SenderConfig& cfg) {
    std::string error;
    if (!make_layout(cfg.model_elems, cfg.chunk_elems, &error)) return error;
    auto finite = [](double x) { return std::isfinite(x); };
    if (!finite(cfg.w_min) || !finite(cfg.w_max) || !finite(cfg.w_init)) return "window sizes must be finite";
    if (cfg.w_min <= 0) return "w_min must be above 0 (below 1 the sender paces one chunk over several round trips)";
    if (cfg.w_max < cfg.w_min) return "w_max must be >= w_min";
    if (cfg.w_init < cfg.w_min || cfg.w_init > cfg.w_max) return "w_init must lie in [w_min, w_max]";
    if (cfg.w_max > 1e9) return "w_max is unreasonably large";
    if (!finite(cfg.additive_increase) || cfg.additive_increase < 0) return "additive_increase must be >= 0";
    if (!finite(cfg.gain) || cfg.gain <= 0 || cfg.gain > 1) return "gain must lie in (0, 1]";
    if (!finite(cfg.alpha_init) || cfg.alpha_init < 0 || cfg.alpha_init > 1) return "alpha_init must lie in [0, 1]";
    if (!finite(cfg.merge_floor) || (cfg.merge_floor != 0 && (cfg.merge_floor < cfg.w_min || cfg.merge_floor > cfg.w_max)))
        return "merge_floor must be 0 (off) or lie in [w_min, w_max]";
    if (cfg.merge_floor != 0 && !cfg.merge_aware) return "merge_floor needs merge_aware";
    if (!finite(cfg.flight_expiry_rtts) || cfg.flight_expiry_rtts < 0 || cfg.flight_expiry_rtts > 1000)
        return "flight_expiry_rtts must lie in [0, 1000] (0: off)";
    if (cfg.flight_expiry_rtts != 0 && cfg.flight_expiry_rtts < 1)
        return "flight_expiry_rtts must be 0 (off) or at least 1 (below one round trip it retires chunks still on their way)";
    return {};
}

CreditSender::CreditSender(const SenderConfig& cfg) : cfg_(cfg) {
    const std::string error = validate(cfg);
    if (!error.empty()) throw std::invalid_argument("CreditSender: " + error);
    layout_ = *make_layout(cfg.model_elems, cfg.chunk_elems);
    storage_.assign(layout_.model_elems, 0.0f);
    slots_.assign(layout_.chunk_count, Slot{});
    order_.assign(layout_.chunk_count, 0);
    window_ = cfg.w_init;
    alpha_ = cfg.alpha_init;
    in_slow_start_ = cfg.slow_start;
    runs_.assign(static_cast<std::size_t>(std::min(cfg.w_max, kMaxFlightRuns)) + 1, FlightRun{});
    next_seq_ = cfg.first_seq;
}

OfferResult CreditSender::offer_update(std::uint32_t version, std::uint64_t ts_ns,
                                       std::span<const float> flat_gradient) noexcept {
    if (flat_gradient.size() != layout_.model_elems) {
        ++c_.updates_rejected;
        return OfferResult::WrongSize;
    }
    // Checked up front: one NaN merged into a waiting chunk would destroy the contributions
    // already summed there, and the learner would reject the whole chunk.
    if (!all_finite(flat_gradient)) {
        ++c_.updates_rejected;
        return OfferResult::NonFinite;
    }
    const std::uint32_t seq = next_seq_++;
    ++c_.updates_offered;
    for (std::uint16_t k = 0; k < layout_.chunk_count; ++k) {
        const std::span<const float> src = chunk_slice(layout_, flat_gradient, k);
        float* dst = storage_.data() + layout_.offset(k);
        Slot& s = slots_[k];
        if (s.pending) {
            if (version > s.version && version - s.version > cfg_.merge_version_gap) {
                // Too stale to be worth summing: the newer gradient takes its place in the queue.
                std::memcpy(dst, src.data(), src.size_bytes());
                s.contrib_count = 1;
                s.version = version;
                s.seq = seq;
                s.ts_earliest = s.ts_latest = ts_ns;
                ++c_.chunks_replaced_stale;
                continue;
            }
            if (s.contrib_count == proto::kMaxContributions) {
                ++c_.chunks_dropped_overflow;
                continue;
            }
            // Same kernel and operand order as the switch (waiting += arrival), so a sender-side
            // merge and an in-network merge of the same gradients give the same bits.
            core::add_f32(dst, src.data(), src.size());
            ++s.contrib_count;
            s.version = std::min(s.version, version);
            s.ts_earliest = std::min(s.ts_earliest, ts_ns);
            s.ts_latest = std::max(s.ts_latest, ts_ns);
            // seq stays the waiting chunk's, as in the switch (the first contribution names it).
            ++c_.chunks_merged;
            continue;
        }
        std::memcpy(dst, src.data(), src.size_bytes());
        s.pending = true;
        s.contrib_count = 1;
        s.version = version;
        s.seq = seq;
        s.ts_earliest = s.ts_latest = ts_ns;
        order_[(order_head_ + pending_count_) % layout_.chunk_count] = k;
        ++pending_count_;
        ++c_.chunks_queued;
    }
    return OfferResult::Ok;
}

std::uint32_t CreditSender::credits_available() const noexcept {
    const std::uint32_t w = usable_window();
    return (in_flight_ < w ? w - in_flight_ : 0) + bank_;
}

bool CreditSender::is_pending(std::uint16_t chunk_index) const noexcept {
    return chunk_index < slots_.size() && slots_[chunk_index].pending;
}

std::optional<OutgoingChunk> CreditSender::next_to_send(std::uint64_t now_ns) noexcept {
    if (pending_count_ == 0 || credits_available() == 0) return std::nullopt;
    if (window_ < 1.0 && now_ns < next_send_ns_) return std::nullopt;  // pacing below one chunk
    const std::uint16_t k = order_[order_head_];
    order_head_ = (order_head_ + 1) % layout_.chunk_count;
    --pending_count_;
    Slot& s = slots_[k];
    s.pending = false;

    OutgoingChunk out;
    proto::Header& h = out.header;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.flags = s.contrib_count > 1 ? proto::flag::kSenderMerged : 0;
    h.cluster_id = cfg_.cluster_id;
    h.worker_id = cfg_.worker_id;
    h.model_version = s.version;
    h.seq = s.seq;
    set_chunk_fields(layout_, k, h);
    h.contrib_count = s.contrib_count;
    h.packet_count = 1;  // one packet, however many contributions it sums
    h.ts_earliest_ns = s.ts_earliest;
    h.ts_latest_ns = s.ts_latest;
    out.elements = {storage_.data() + layout_.offset(k), h.elem_count};

    ++c_.chunks_sent;
    c_.contributions_sent += s.contrib_count;
    if (SentMark& m = sent_log_[s.seq % kSentLog]; !m.valid || m.seq != s.seq) m = SentMark{s.seq, true, now_ns};
    if (in_flight_ >= usable_window()) {
        // Spent a kept unit: the chunk is paid for, so it never enters flight (sent and retired).
        --bank_;
        ++c_.chunks_prepaid;
        ++retired_total_;
        ++round_credited_;
        return out;
    }
    if (in_flight_ == 0) last_progress_ns_ = now_ns;  // the timeout counts from the first chunk out
    last_send_ns_ = now_ns;
    ++in_flight_;
    const auto n_runs = static_cast<std::uint32_t>(runs_.size());
    FlightRun* last = runs_count_ != 0 ? &runs_[(runs_head_ + runs_count_ - 1) % n_runs] : nullptr;
    if (last != nullptr && (last->seq == s.seq || runs_count_ == n_runs)) {
        ++last->count;  // same update (or no run left: acknowledged with the last run, a little early)
    } else {
        runs_[(runs_head_ + runs_count_) % n_runs] = FlightRun{s.seq, 1, now_ns};
        ++runs_count_;
    }
    return out;
}

void CreditSender::on_credit(const proto::CreditBody& credit, std::uint8_t flags, std::uint64_t now_ns) noexcept {
    ++c_.credit_messages;
    c_.credits_received += credit.credits;
    // Cumulative acknowledgement first: a named CREDIT's unit is for the acknowledged chunk itself,
    // not for one sent before it. Without it, a lost CREDIT (or a unit the planner spread to another
    // worker) would hold its chunk in flight until a whole credit timeout passed with no CREDIT at all,
    // which never comes while other credits arrive: the window would fill with such chunks.
    const std::uint32_t past = cfg_.cumulative_ack && credit.acked_seq != 0 ? retire_before(credit.acked_seq) : 0;
    in_flight_ -= past;
    retired_total_ += past;
    c_.chunks_acked_past += past;
    c_.chunks_presumed_lost += past;
    const std::uint32_t applied = std::min(credit.credits, in_flight_);
    std::uint32_t excess = credit.credits - applied;
    if (cfg_.bank_excess && excess != 0 && window_ >= 1.0) {
        const std::uint32_t room = usable_window() > bank_ ? usable_window() - bank_ : 0;
        const std::uint32_t kept = std::min(excess, room);
        bank_ += kept;
        c_.credits_banked += kept;
        excess -= kept;
    }
    c_.credits_excess += excess;
    if (applied > 0 && in_flight_ == 1 && now_ns >= last_send_ns_) {
        // One chunk was in flight: its send-to-credit time is a clean round-trip sample.
        const std::uint64_t sample = now_ns - last_send_ns_;
        srtt_ns_ = srtt_ns_ == 0 ? sample : srtt_ns_ - srtt_ns_ / 8 + sample / 8;
    }
    in_flight_ -= applied;
    retire_oldest(applied);
    retired_total_ += applied;
    round_credited_ += applied;

    std::uint64_t marks = credit.ce_count;
    if (marks == 0 && (flags & proto::flag::kCongestionEcho) != 0) marks = 1;
    c_.marks_echoed += marks;
    round_marked_ += marks;

    learner_version_ = credit.learner_version;
    // Serial-number order (RFC 1982) so the highest acked seq survives a wrap of the counter.
    if (!any_ack_ || static_cast<std::int32_t>(credit.acked_seq - acked_seq_) > 0) {
        acked_seq_ = credit.acked_seq;
        // The first acknowledgement of one of this worker's updates: a round-trip sample.
        const SentMark& m = sent_log_[credit.acked_seq % kSentLog];
        if (m.valid && m.seq == credit.acked_seq && now_ns >= m.sent_ns) {
            const std::uint64_t sample = std::max<std::uint64_t>(now_ns - m.sent_ns, 1);
            ack_rtt_ns_ = ack_rtt_ns_ == 0 ? sample : ack_rtt_ns_ - ack_rtt_ns_ / 8 + sample / 8;
        }
    }
    any_ack_ = true;
    last_progress_ns_ = now_ns;

    if ((applied > 0 || past > 0 || marks > 0) && retired_total_ >= round_end_) end_round();
    // Pacing: the next chunk waits (1/W - 1) round trips after this credit.
    if (applied > 0 && window_ < 1.0)
        next_send_ns_ = now_ns + static_cast<std::uint64_t>(static_cast<double>(srtt_ns_) * (1.0 / window_ - 1.0));
}

double CreditSender::feedback_fraction(const proto::FeedbackBody& f) noexcept {
    double frac = f.mark_permille / 1000.0;
    if (f.queue_capacity != 0) frac = std::max(frac, static_cast<double>(f.queue_depth) / f.queue_capacity);
    return std::clamp(frac, 0.0, 1.0);
}

void CreditSender::on_feedback(const proto::FeedbackBody& feedback, std::uint64_t /*now_ns*/) noexcept {
    ++c_.feedback_received;
    last_feedback_ = feedback;
    if (window_ < floor()) {
        // Merge-aware: the queue merges what arrives, so hold no fewer than the merge floor back.
        window_ = floor();
        ++c_.merge_floor_lifts;
    }
    if (round_cut_) {
        // One cut per window-round: the feedback for the other chunks of the same burst describes
        // the same congestion episode.
        ++c_.feedback_ignored;
        return;
    }
    double cut = std::max(alpha_, feedback_fraction(feedback));
    if (cfg_.merge_aware) cut *= 1.0 - merge_fraction();
    cut_window(cut);
    round_cut_ = true;
    ++c_.feedback_reductions;
}

std::uint64_t CreditSender::flight_expiry_ns() const noexcept {
    if (cfg_.flight_expiry_ns != 0) return cfg_.flight_expiry_ns;
    if (cfg_.flight_expiry_rtts == 0) return 0;
    return static_cast<std::uint64_t>(cfg_.flight_expiry_rtts * static_cast<double>(ack_rtt_ns_));
}

bool CreditSender::on_timeout(std::uint64_t now_ns) noexcept {
    if (const std::uint64_t expiry = flight_expiry_ns(); expiry != 0 && now_ns >= expiry) {
        const std::uint32_t n = retire_sent_before(now_ns - expiry + 1);
        in_flight_ -= n;
        retired_total_ += n;
        c_.chunks_expired += n;
        c_.chunks_presumed_lost += n;
    }
    if (cfg_.credit_timeout_ns == 0 || in_flight_ == 0) return false;
    // A progress time stamped after now (caller clocks race) is simply not expired yet.
    if (now_ns < last_progress_ns_ || now_ns - last_progress_ns_ < cfg_.credit_timeout_ns) return false;
    ++c_.credit_timeouts;
    in_slow_start_ = false;
    trim_bank(0);  // the learner fell silent: nothing kept from before counts
    c_.chunks_presumed_lost += in_flight_;
    retired_total_ += in_flight_;
    in_flight_ = 0;
    runs_head_ = runs_count_ = 0;
    last_progress_ns_ = now_ns;
    // Close the round on what it did see; a round that saw nothing just restarts (a timeout is not
    // taken as congestion: after an in-network merge the credit legitimately goes to another worker).
    if (round_credited_ > 0 || round_marked_ > 0) {
        end_round();
    } else {
        start_round();
    }
    return true;
}

double CreditSender::merge_fraction() const noexcept {
    return cfg_.merge_aware ? std::clamp(last_feedback_.merge_permille / 1000.0, 0.0, 1.0) : 0.0;
}

double CreditSender::floor() const noexcept {
    return cfg_.merge_floor != 0 && merge_fraction() >= kMergeFloorFraction ? std::max(cfg_.w_min, cfg_.merge_floor) : cfg_.w_min;
}

void CreditSender::cut_window(double a) noexcept {
    in_slow_start_ = false;
    window_ = std::max(floor(), window_ * (1.0 - a / 2.0));
    trim_bank(window_ >= 1.0 ? usable_window() : 0);
}

void CreditSender::trim_bank(std::uint32_t limit) noexcept {
    if (bank_ <= limit) return;
    c_.credits_forfeited += bank_ - limit;
    c_.credits_excess += bank_ - limit;
    bank_ = limit;
}

void CreditSender::end_round() noexcept {
    ++c_.rounds;
    double fraction = 0;
    if (round_credited_ > 0) {
        fraction = std::min(1.0, static_cast<double>(round_marked_) / static_cast<double>(round_credited_));
    } else if (round_marked_ > 0) {
        fraction = 1.0;
    }
    alpha_ = (1.0 - cfg_.gain) * alpha_ + cfg_.gain * fraction;
    if (round_cut_) {
        // Already cut by FEEDBACK in this round: neither a second cut nor growth.
    } else if (round_marked_ > 0) {
        // Merge-aware: echoed marks from a queue that merges most arrivals stand for less load
        // than their count (the merged arrivals did not grow it), as for a FEEDBACK cut.
        cut_window(alpha_ * (1.0 - merge_fraction()));
        ++c_.round_reductions;
    } else {
        // Below one chunk the window grows in proportion (doubling at most per round), so a paced
        // sender climbs back as fast as it was cut.
        if (in_slow_start_ && window_ >= 1.0) {
            // Doubling at most: by what the round had credited, so an idle sender does not grow.
            window_ = std::min(cfg_.w_max, window_ + std::min(window_, static_cast<double>(round_credited_)));
            ++c_.slow_start_increases;
        } else {
            window_ = std::min(cfg_.w_max, window_ + cfg_.additive_increase * std::min(1.0, window_));
        }
        ++c_.round_increases;
    }
    start_round();
}

void CreditSender::retire_oldest(std::uint32_t n) noexcept {
    while (n != 0 && runs_count_ != 0) {
        FlightRun& r = runs_[runs_head_];
        const std::uint32_t k = std::min(n, r.count);
        r.count -= k;
        n -= k;
        if (r.count == 0) {
            runs_head_ = (runs_head_ + 1) % static_cast<std::uint32_t>(runs_.size());
            --runs_count_;
        }
    }
}

template <typename Leaves>
std::uint32_t CreditSender::retire_runs_while(Leaves leaves) noexcept {
    std::uint32_t n = 0;
    while (runs_count_ != 0 && leaves(runs_[runs_head_])) {
        n += runs_[runs_head_].count;
        runs_head_ = (runs_head_ + 1) % static_cast<std::uint32_t>(runs_.size());
        --runs_count_;
    }
    return n;
}

std::uint32_t CreditSender::retire_before(std::uint32_t acked_seq) noexcept {
    // Serial-number order (RFC 1982), as acked_seq_ is kept; stops at the first run not before it.
    return retire_runs_while([&](const FlightRun& r) { return static_cast<std::int32_t>(acked_seq - r.seq) > 0; });
}

std::uint32_t CreditSender::retire_sent_before(std::uint64_t ns) noexcept {
    return retire_runs_while([&](const FlightRun& r) { return r.sent_ns < ns; });
}

void CreditSender::start_round() noexcept {
    round_end_ = c_.chunks_sent;
    round_credited_ = 0;
    round_marked_ = 0;
    round_cut_ = false;
}

}  // namespace shesha::transport
