#include "transport/credit_planner.h"

#include <algorithm>
#include <stdexcept>

namespace shesha::transport {

CreditPlanner::CreditPlanner(std::uint16_t cluster_id, std::span<const std::uint32_t> worker_ids)
    : cluster_id_(cluster_id) {
    if (worker_ids.empty()) throw std::invalid_argument("CreditPlanner: a cluster needs at least one worker");
    for (std::uint32_t id : worker_ids) {
        if (index_of(id) != workers_.size()) throw std::invalid_argument("CreditPlanner: duplicate worker id");
        workers_.push_back(Worker{id, 0, false, false});
    }
    units_.assign(workers_.size(), 0);
}

std::size_t CreditPlanner::index_of(std::uint32_t worker_id) const noexcept {
    for (std::size_t i = 0; i < workers_.size(); ++i)
        if (workers_[i].id == worker_id) return i;
    return workers_.size();
}

void CreditPlanner::set_quiet(std::uint32_t worker_id, bool quiet) noexcept {
    const std::size_t i = index_of(worker_id);
    if (i != workers_.size()) workers_[i].quiet = quiet;
}

std::size_t CreditPlanner::plan(const proto::Header& chunk, std::uint32_t learner_version,
                                std::span<CreditGrant> out) noexcept {
    if (chunk.cluster_id != cluster_id_) {
        ++stats_.wrong_cluster;
        return 0;
    }
    const std::size_t named = index_of(chunk.worker_id);
    if (named == workers_.size()) {
        ++stats_.unknown_worker;
        return 0;
    }
    ++stats_.chunks;
    Worker& nw = workers_[named];
    if (!nw.any || static_cast<std::int32_t>(chunk.seq - nw.acked_seq) > 0) nw.acked_seq = chunk.seq;
    nw.any = true;

    const std::size_t n = workers_.size();
    for (std::uint32_t& u : units_) u = 0;
    units_[named] = 1;
    stats_.units_named += 1;
    // A merged chunk stands for packet_count packets that left flight, one of them the named
    // worker's. Without a count (0: a sender or switch that does not keep one), contrib_count is the
    // upper bound: right when every sender sent its contributions one per packet, over otherwise.
    std::uint32_t extra = 0;
    if ((chunk.flags & proto::flag::kMerged) != 0 && chunk.contrib_count > 1) {
        if (chunk.packet_count == 0) {
            ++stats_.merged_without_packet_count;
            extra = chunk.contrib_count - 1u;
        } else {
            extra = std::min<std::uint32_t>(chunk.packet_count, chunk.contrib_count) - 1u;
        }
    }
    std::uint32_t live_others = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (i != named && !workers_[i].quiet) ++live_others;
    if (extra != 0 && live_others + 1 < n) stats_.units_spread_past_quiet += extra;
    if (live_others == 0) {
        // A one-worker cluster (or every other worker quiet): the switch merged the named worker's
        // own successive updates.
        units_[named] += extra;
    } else {
        // Whole rounds over the other live workers first, then the remainder one unit at a time
        // from the cursor on, so partial merges share the surplus fairly over time.
        const std::uint32_t whole = extra / live_others;
        std::uint32_t rest = extra % live_others;
        for (std::size_t i = 0; i < n; ++i)
            if (i != named && !workers_[i].quiet) units_[i] += whole;
        while (rest != 0) {
            if (cursor_ != named && !workers_[cursor_].quiet) {
                ++units_[cursor_];
                --rest;
            }
            cursor_ = (cursor_ + 1) % n;
        }
    }
    stats_.units_spread += extra;

    const bool ce = (chunk.flags & proto::flag::kCongestionExperienced) != 0;
    if (ce) ++stats_.echoes;
    std::size_t written = 0;
    auto emit = [&](std::size_t i) {
        if (units_[i] == 0 || written >= out.size()) return;
        CreditGrant& g = out[written++];
        g.worker_id = workers_[i].id;
        g.body.credits = units_[i];
        g.body.acked_seq = workers_[i].acked_seq;
        g.body.learner_version = learner_version;
        g.body.ce_count = (i == named && ce) ? 1 : 0;
        g.flags = g.body.ce_count != 0 ? proto::flag::kCongestionEcho : 0;
    };
    emit(named);  // the named worker first: it carries the echo
    for (std::size_t i = 0; i < n; ++i)
        if (i != named) emit(i);
    return written;
}

}  // namespace shesha::transport
