#include "learner/learner_core.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "drl_wire.h"

namespace shesha::learner {

namespace {

transport::ChunkLayout checked_layout(std::size_t model_elems, std::uint32_t chunk_elems) {
    std::string error;
    auto layout = transport::make_layout(static_cast<std::uint32_t>(model_elems), chunk_elems, &error);
    if (!layout) throw std::invalid_argument("chunk layout: " + error);
    return *layout;
}

}  // namespace

LearnerCore::LearnerCore(const drl::ClusterConfig& config, std::uint16_t cluster_id, std::vector<float> initial,
                         std::uint32_t incarnation, SendFn send)
    : config_(config),
      cluster_id_(cluster_id),
      layout_(checked_layout(initial.size(), config.transport.chunk_elems)),
      incarnation_(incarnation),
      send_(std::move(send)),
      parameters_(std::move(initial)),
      published_(parameters_),
      scratch_(parameters_.size(), 0.0F),
      reassembler_(layout_, cluster_id, proto::MsgType::Gradient, transport::ApplyMode::Accumulate),
      tx_(proto::kHeaderSize + std::size_t{proto::kMaxElements} * sizeof(float)) {
    if (config.learner.model_delivery == drl::ModelDelivery::Replicated) {
        if (config.learner.model_group == 0) throw std::invalid_argument("learner.model_group: missing (model_delivery is replicated)");
        replicated_ = true;
        group_.sin_family = AF_INET;
        group_.sin_addr.s_addr = htonl(config.learner.model_group);
        group_.sin_port = htons(config.udp_port);
    }
    publish_interval_ns_ = static_cast<std::uint64_t>(std::llround(config.learner.publish_interval_ms * 1e6));
    clip_norm_ = config.learner.max_grad_norm >= 0 ? config.learner.max_grad_norm
                                                   : std::max(0.0, static_cast<double>(config.a3c.loss.max_grad_norm));
    for (std::uint16_t k = 0; k < layout_.chunk_count; ++k)
        optimizers_.push_back(rl::Optimizer::create(config.optimizer, layout_.elems_in(k)));
    rebuild_planner();
}

bool LearnerCore::restore(const LearnerState& state, std::string& error) {
    if (state.parameters.size() != parameters_.size()) {
        error = "checkpoint has " + std::to_string(state.parameters.size()) + " parameters, the model has " +
                std::to_string(parameters_.size());
        return false;
    }
    if (state.optimizers.size() != optimizers_.size()) {
        error = "checkpoint has " + std::to_string(state.optimizers.size()) + " optimizer slices, the layout has " +
                std::to_string(optimizers_.size()) + " chunks (different transport.chunk_elems?)";
        return false;
    }
    for (std::size_t i = 0; i < state.parameters.size(); ++i) {
        if (!std::isfinite(state.parameters[i])) {
            error = "checkpoint parameter " + std::to_string(i) + " is not finite";
            return false;
        }
    }
    // Check every slice before changing any, so a mismatch leaves the learner as it was.
    for (std::size_t k = 0; k < optimizers_.size(); ++k) {
        auto probe = rl::Optimizer::create(config_.optimizer, optimizers_[k]->parameter_count());
        if (!probe->restore(state.optimizers[k])) {
            error = "checkpoint optimizer state of chunk " + std::to_string(k) +
                    " does not fit the configured optimizer (different optimizer.kind?)";
            return false;
        }
        if (const std::string why = probe->check_state(state.optimizers[k]); !why.empty()) {
            error = "checkpoint optimizer state of chunk " + std::to_string(k) + " is unusable: " + why;
            return false;
        }
    }
    for (std::size_t k = 0; k < optimizers_.size(); ++k) optimizers_[k]->restore(state.optimizers[k]);
    parameters_ = state.parameters;
    published_ = state.parameters;
    version_ = state.version;
    resumed_ = true;
    resumed_env_steps_ = state.env_steps;
    resumed_chunks_ = state.chunks_applied;
    for (WorkerInfo& w : workers_) w.any_steps = false;
    return true;
}

LearnerState LearnerCore::snapshot_state() const {
    LearnerState s;
    s.cluster_id = cluster_id_;
    s.version = version_;
    s.env_steps = env_steps();
    s.chunks_applied = resumed_chunks_ + c_.chunks_applied;
    s.parameters = parameters_;
    for (const auto& o : optimizers_) s.optimizers.push_back(o->state());
    return s;
}

std::size_t LearnerCore::active_workers() const noexcept {
    return static_cast<std::size_t>(std::count_if(workers_.begin(), workers_.end(), [](const WorkerInfo& w) { return w.active; }));
}

std::uint64_t LearnerCore::env_steps() const noexcept {
    // A fresh learner counts every step a worker reports; a resumed one only the steps reported
    // after the first chunk it saw from each worker (the checkpoint holds the ones before).
    std::uint64_t total = resumed_env_steps_;
    for (const WorkerInfo& w : workers_) {
        if (!w.any_steps) continue;
        total += w.env_steps_since_first + (resumed_ ? 0 : w.env_steps_first);
    }
    return total;
}

WorkerInfo* LearnerCore::find_worker(std::uint32_t id) noexcept {
    for (WorkerInfo& w : workers_)
        if (w.id == id) return &w;
    return nullptr;
}

WorkerInfo* LearnerCore::register_worker(std::uint32_t id, const sockaddr_in& from, std::uint64_t now_mono) {
    WorkerInfo* w = find_worker(id);
    if (w == nullptr) {
        if (workers_.size() >= config_.learner.max_workers) {
            ++c_.workers_overflow;
            return nullptr;
        }
        WorkerInfo info;
        info.id = id;
        info.addr = from;
        info.last_heard_ns = now_mono;
        info.seen.resize(layout_.chunk_count);
        workers_.push_back(std::move(info));
        rebuild_planner();
        return &workers_.back();
    }
    w->addr = from;  // a restarted worker may come back on another port
    w->last_heard_ns = now_mono;
    w->models_since_heard = 0;
    if (!w->active) {
        w->active = true;
        w->quiet = false;
        rebuild_planner();
    } else if (w->quiet) {
        w->quiet = false;
        if (planner_) planner_->set_quiet(id, false);
    }
    return w;
}

namespace {
void add_planner_stats(transport::CreditPlannerStats& total, const transport::CreditPlannerStats& s) {
    total.chunks += s.chunks;
    total.units_named += s.units_named;
    total.units_spread += s.units_spread;
    total.echoes += s.echoes;
    total.units_spread_past_quiet += s.units_spread_past_quiet;
    total.merged_without_packet_count += s.merged_without_packet_count;
    total.unknown_worker += s.unknown_worker;
    total.wrong_cluster += s.wrong_cluster;
}
}  // namespace

transport::CreditPlannerStats LearnerCore::planner_stats() const noexcept {
    transport::CreditPlannerStats total = planner_stats_total_;
    if (planner_) add_planner_stats(total, planner_->stats());
    return total;
}

void LearnerCore::rebuild_planner() {
    if (planner_) add_planner_stats(planner_stats_total_, planner_->stats());
    std::vector<std::uint32_t> ids;
    for (const WorkerInfo& w : workers_)
        if (w.active) ids.push_back(w.id);
    // CreditPlanner needs at least one worker; with none active there is nobody to credit.
    planner_.reset();
    if (ids.empty()) return;
    planner_ = std::make_unique<transport::CreditPlanner>(cluster_id_, ids);
    for (const WorkerInfo& w : workers_)
        if (w.active && w.quiet) planner_->set_quiet(w.id, true);
    grants_.resize(planner_->max_grants());
}

void LearnerCore::on_datagram(std::span<const std::uint8_t> bytes, const sockaddr_in& from, std::uint64_t now_real,
                              std::uint64_t now_mono) {
    ++c_.datagrams;
    proto::Message m;
    const proto::DecodeError err = proto::decode(bytes, m);
    if (err != proto::DecodeError::Ok) {
        ++c_.decode_errors[static_cast<std::size_t>(err)];
        ++c_.decode_errors_total;
        return;
    }
    if (m.hdr.type == proto::MsgType::Gradient) {
        handle_gradient(m, bytes, from, now_real, now_mono);
    } else if (drl::is_model_request(m.hdr)) {
        handle_model_request(m.hdr, from, now_mono);
    } else {
        ++c_.unexpected_type;
    }
}

bool LearnerCore::admitted(std::uint32_t worker_id, const sockaddr_in& from) const noexcept {
    const drl::LearnerConfig& l = config_.learner;
    if (!l.admit_worker_ids.empty() &&
        !std::binary_search(l.admit_worker_ids.begin(), l.admit_worker_ids.end(), worker_id))
        return false;
    if (l.admit_sources.empty()) return true;
    const std::uint32_t ip = ntohl(from.sin_addr.s_addr);
    return std::any_of(l.admit_sources.begin(), l.admit_sources.end(),
                       [ip](const drl::Ipv4Prefix& p) { return p.contains(ip); });
}

void LearnerCore::handle_gradient(const proto::Message& m, std::span<const std::uint8_t> bytes,
                                  const sockaddr_in& from, std::uint64_t now_real, std::uint64_t now_mono) {
    const proto::Header& h = m.hdr;
    ++c_.gradient_chunks;
    if (h.flags & proto::flag::kCongestionExperienced) ++c_.ce_chunks;
    const bool ours = h.cluster_id == cluster_id_;
    if (ours && !admitted(h.worker_id, from)) {
        ++c_.not_admitted;  // no registration, no credit, no model: nothing to amplify
        return;
    }

    // A copy of a chunk already taken (a link or a relay duplicated the datagram): not applied, not
    // credited (only one of the copies was ever in the worker's flight). The window is per known,
    // active worker and chunk index; a first chunk from a new worker has nothing to repeat.
    WorkerInfo* sender = ours && h.chunk_count == layout_.chunk_count && h.chunk_index < layout_.chunk_count
                             ? find_worker(h.worker_id)
                             : nullptr;
    if (sender != nullptr && !sender->active) sender = nullptr;
    if (sender != nullptr) {
        const SeqVerdict seen = sender->seen[h.chunk_index].classify(h.seq);
        if (seen == SeqVerdict::Duplicate) {
            ++c_.duplicates;
            return;
        }
        if (seen == SeqVerdict::TooOld) {
            ++c_.rejected_replay_window;
            return;
        }
    }

    // The Reassembler validates (type, F32, cluster, chunk count and index, element count, length,
    // finite) and adds the chunk into a zeroed slice of scratch_; refusals are counted there.
    const auto slice = transport::chunk_slice(layout_, std::span<float>(scratch_), h.chunk_index);
    std::fill(slice.begin(), slice.end(), 0.0F);
    const transport::ApplyResult result = reassembler_.apply(m, scratch_);
    // Only a chunk that passed every check registers (or refreshes) its sender: a rejected
    // datagram must not buy MODEL broadcasts. A known worker's rejected chunk still left flight,
    // so it is credited below.
    WorkerInfo* worker = nullptr;
    bool applied = false;
    if (result == transport::ApplyResult::Ok) {
        applied = apply_chunk(h);
        if (applied) {
            worker = register_worker(h.worker_id, from, now_mono);
            if (worker != nullptr) worker->seen[h.chunk_index].mark(h.seq);
            aom_.on_receive(now_real, h.ts_latest_ns);
            ++applied_since_publish_;
            if (worker != nullptr) {
                ++worker->chunks_applied;
                const std::uint32_t steps = drl::gradient_env_steps(bytes);
                if (steps != 0) {
                    if (!worker->any_steps) {
                        worker->any_steps = true;
                        worker->env_steps_first = steps;
                        worker->env_steps_since_first = 0;
                    } else {
                        // The newest count seen is first + advance so far, modulo 2^24.
                        const auto last = static_cast<std::uint32_t>(worker->env_steps_first + worker->env_steps_since_first);
                        worker->env_steps_since_first += drl::env_steps_advance(steps, last);
                    }
                }
            }
        }
    }
    if (ours && (worker != nullptr || find_worker(h.worker_id) != nullptr)) send_credits(h);
}

bool LearnerCore::apply_chunk(const proto::Header& h) {
    const drl::LearnerConfig& l = config_.learner;
    // Versions are serial numbers: the signed 32-bit distance tells behind from ahead across the
    // wrap, and anything farther than max_staleness either way is refused.
    const auto distance = static_cast<std::int32_t>(version_ - h.model_version);
    std::uint32_t staleness = 0;
    if (distance >= 0) {
        staleness = static_cast<std::uint32_t>(distance);
        if (staleness > l.max_staleness) {
            ++c_.rejected_too_stale;
            return false;
        }
    } else {
        // Computed on a newer model than ours: a learner resumed from an older checkpoint.
        if (static_cast<std::uint32_t>(-static_cast<std::int64_t>(distance)) > l.max_staleness) {
            ++c_.rejected_too_new;
            return false;
        }
        ++c_.version_ahead;
    }

    const auto slice = transport::chunk_slice(layout_, std::span<float>(scratch_), h.chunk_index);
    const float average = 1.0F / static_cast<float>(h.contrib_count);
    // Magnitude bound and norm of the averaged chunk (what the optimizer will see at scale 1).
    // Eight accumulators in a fixed order: the same sum on every machine (the clip factor
    // depends on it), without one long dependency chain.
    std::array<double, 8> squares{};
    std::array<float, 8> peaks{};
    std::size_t i = 0;
    for (; i + 8 <= slice.size(); i += 8)
        for (std::size_t k = 0; k < 8; ++k) {
            const float x = slice[i + k];
            squares[k] += static_cast<double>(x) * static_cast<double>(x);
            peaks[k] = std::max(peaks[k], std::fabs(x));
        }
    for (std::size_t k = 0; i < slice.size(); ++i, ++k) {
        const float x = slice[i];
        squares[k] += static_cast<double>(x) * static_cast<double>(x);
        peaks[k] = std::max(peaks[k], std::fabs(x));
    }
    double square_sum = 0.0;
    float peak = 0.0F;
    for (std::size_t k = 0; k < 8; ++k) {
        square_sum += squares[k];
        peak = std::max(peak, peaks[k]);
    }
    const double norm = std::sqrt(square_sum) * average;
    if (l.max_abs_element > 0 && static_cast<double>(peak) * average > l.max_abs_element) {
        ++c_.rejected_magnitude;
        return false;
    }
    float scale = average;
    // A slice of an update is never longer than the update, so an honest worker's update clipped
    // to a norm at most max_grad_norm passes unchanged; only outliers are scaled down.
    // The 1e-4 slack absorbs the rounding of a norm the worker clipped exactly to the bound.
    if (clip_norm_ > 0 && norm > clip_norm_ * (1 + 1e-4)) {
        scale = static_cast<float>(static_cast<double>(scale) * (clip_norm_ / norm));
        ++c_.chunks_clipped;
    }
    const float average_scale = scale;  // the clipped average, before staleness scaling
    if (l.staleness_scaling) scale /= static_cast<float>(1.0 + staleness);

    if (handler_) {
        ExternalChunk x;
        x.chunk_index = h.chunk_index;
        x.offset = layout_.offset(h.chunk_index);
        x.elements = slice;
        x.average_scale = average_scale;
        x.staleness_scale = l.staleness_scaling ? 1.0F / static_cast<float>(1.0 + staleness) : 1.0F;
        x.contributions = h.contrib_count;
        x.staleness = staleness;
        x.base_version = h.model_version;
        x.worker_id = h.worker_id;
        x.merged = (h.flags & proto::flag::kMerged) != 0;
        handler_(x);
        ++c_.optimizer_steps;
    } else if (!step_builtin(h, slice, scale, staleness)) {
        return false;
    }
    ++c_.chunks_applied;
    c_.contributions_applied += h.contrib_count;
    if (h.flags & proto::flag::kMerged) ++c_.merged_chunks;
    if (h.flags & proto::flag::kSenderMerged) ++c_.sender_merged_chunks;
    ++staleness_.count;
    staleness_.sum += staleness;
    staleness_.max = std::max(staleness_.max, staleness);
    ++staleness_.histogram[std::min<std::size_t>(staleness, kStalenessBuckets)];
    return true;
}

bool LearnerCore::step_builtin(const proto::Header& h, std::span<const float> slice, float scale, std::uint32_t staleness) {
    const drl::LearnerConfig& l = config_.learner;
    const auto params = transport::chunk_slice(layout_, std::span<float>(parameters_), h.chunk_index);
    rl::Optimizer& optimizer = *optimizers_[h.chunk_index];
    rollback_parameters_.assign(params.begin(), params.end());
    optimizer.save_state(rollback_state_);
    // A merged chunk is the sum of contrib_count updates: apply their average once, or once
    // per contribution (merged_steps: per_contribution), bounded so that a forged count
    // cannot buy unbounded work.
    // merged_steps: sqrt applies it once at sqrt(k) times the learning rate, k bounded the same way,
    // but only to a fresh chunk (staleness at most sqrt_max_staleness): the square-root rule is about
    // a batch of gradients at the current parameters. Larger steps on gradients 30 versions old
    // made Acrobot behind a FIFO port diverge (docs/aom.md).
    std::uint32_t steps = 1;
    float lr_multiplier = 1.0F;
    if (l.merged_steps != drl::MergedSteps::One) {
        const std::uint32_t k = std::min<std::uint32_t>(h.contrib_count, drl::kMaxStepsPerChunk);
        if (h.contrib_count > drl::kMaxStepsPerChunk) ++c_.steps_capped;
        if (l.merged_steps == drl::MergedSteps::PerContribution) steps = k;
        else if (staleness <= l.sqrt_max_staleness) lr_multiplier = std::sqrt(static_cast<float>(k));
    }
    for (std::uint32_t i = 0; i < steps; ++i) optimizer.apply(params, slice, scale, lr_multiplier);
    // A step that overflowed (the state or the parameters went Inf/NaN) would poison every later
    // step of this slice: undo it.
    if (!optimizer.state_finite() || !transport::all_finite(std::span<const float>(params.data(), params.size()))) {
        std::copy(rollback_parameters_.begin(), rollback_parameters_.end(), params.begin());
        optimizer.restore(rollback_state_);
        ++c_.steps_rolled_back;
        return false;
    }
    c_.optimizer_steps += steps;
    return true;
}

void LearnerCore::send_credits(const proto::Header& h) {
    if (!planner_) return;
    const std::size_t n = planner_->plan(h, version_, grants_);
    proto::Header out;
    out.type = proto::MsgType::Credit;
    out.elem_type = proto::ElemType::None;
    out.cluster_id = cluster_id_;
    out.model_version = version_;
    out.seq = incarnation_;
    out.elem_count = 0;
    out.ts_earliest_ns = h.ts_latest_ns;
    out.ts_latest_ns = h.ts_latest_ns;
    if (drl::batches_credits(config_.learner)) {
        // Only workers the learner knows, as below; the switch finds each one's port by its join.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (find_worker(grants_[i].worker_id) != nullptr) grants_[kept++] = grants_[i];
        transport::encode_credit_batches(out, std::span<const transport::CreditGrant>(grants_.data(), kept), tx_,
                                         [&](std::span<const std::uint8_t> bytes, std::span<const transport::CreditGrant> sent) {
                                             if (!send_(group_, bytes)) return;
                                             ++c_.credit_batches;
                                             for (const transport::CreditGrant& g : sent) count_credit(g, find_worker(g.worker_id));
                                         });
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const transport::CreditGrant& g = grants_[i];
        WorkerInfo* w = find_worker(g.worker_id);
        if (w == nullptr) continue;
        out.flags = g.flags;
        out.worker_id = g.worker_id;
        std::array<std::uint8_t, proto::kCreditBodySize> body{};
        proto::encode_credit(g.body, body);
        const std::size_t len = proto::encode(out, body, tx_);
        if (len != 0 && send_(w->addr, {tx_.data(), len})) count_credit(g, w);
    }
}

void LearnerCore::count_credit(const transport::CreditGrant& g, WorkerInfo* w) {
    ++c_.credit_messages;
    c_.credit_units += g.body.credits;
    if (w != nullptr) w->credit_units += g.body.credits;
}

void LearnerCore::handle_model_request(const proto::Header& h, const sockaddr_in& from, std::uint64_t now_mono) {
    if (h.cluster_id != cluster_id_) {
        ++c_.foreign_requests;
        return;
    }
    if (!admitted(h.worker_id, from)) {
        ++c_.not_admitted;
        return;
    }
    ++c_.model_requests;
    WorkerInfo* w = register_worker(h.worker_id, from, now_mono);
    if (w == nullptr) return;
    if (w->last_model_sent_ns != 0 && now_mono - w->last_model_sent_ns < kModelResendMinNs) {
        ++c_.model_requests_rate_limited;
        return;
    }
    send_model(*w, now_mono);
    send_owed();
}

SendResult LearnerCore::send_chunk(const sockaddr_in& to, std::uint32_t worker_id, std::uint16_t k) {
    proto::Header h;
    h.type = proto::MsgType::Model;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = cluster_id_;
    h.worker_id = worker_id;
    h.model_version = version_;
    h.seq = incarnation_;
    transport::set_chunk_fields(layout_, k, h);
    h.ts_earliest_ns = published_real_ns_;
    h.ts_latest_ns = published_real_ns_;
    const auto elems = transport::chunk_slice(layout_, std::span<const float>(published_), k);
    const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(elems.data()), elems.size_bytes());
    const std::size_t len = proto::encode(h, body, tx_);
    if (len == 0) return SendStatus::Failed;
    return send_(to, {tx_.data(), len});
}

std::uint64_t LearnerCore::send_chunks(const sockaddr_in& to, std::uint32_t worker_id) {
    std::uint64_t sent = 0;
    for (std::uint16_t k = 0; k < layout_.chunk_count; ++k)
        if (send_chunk(to, worker_id, k)) ++sent;
    return sent;
}

void LearnerCore::send_model(WorkerInfo& w, std::uint64_t now_mono) {
    w.last_model_sent_ns = now_mono;
    ++w.models_since_heard;
    if (replicated_) {
        // Only answers are unicast here, and the next group copy reaches the worker anyway: an
        // answer the socket refuses is dropped rather than queued ahead of that copy.
        c_.model_chunks_sent += send_chunks(w.addr, w.id);
        return;
    }
    ++c_.model_copies_owed;
    if (w.model_owed) return;  // still waiting: it leaves as the newest version anyway
    w.model_owed = true;
    w.owed_version = version_;
    w.owed_chunk = 0;
    ++owed_copies_;
}

void LearnerCore::send_owed() {
    // Workers in turn from where the last call stopped, so that a buffer that keeps filling up
    // does not always serve the same workers first.
    for (std::size_t looked = 0; looked < workers_.size() && owed_copies_ != 0 && !send_blocked_; ++looked) {
        if (owed_cursor_ >= workers_.size()) owed_cursor_ = 0;
        WorkerInfo& w = workers_[owed_cursor_];
        if (w.model_owed) {
            if (w.owed_version != version_) {  // published since: the newer version, from its first chunk
                w.owed_version = version_;
                w.owed_chunk = 0;
                ++c_.model_copies_renewed;
            }
            while (w.active && w.owed_chunk < layout_.chunk_count) {
                const SendResult r = send_chunk(w.addr, w.id, w.owed_chunk);
                if (r.status == SendStatus::WouldBlock) {
                    send_blocked_ = true;
                    ++c_.model_sends_deferred;
                    return;  // the cursor stays here: this copy goes on first
                }
                if (r) ++c_.model_chunks_sent;  // Failed (not EAGAIN): lost, as any datagram; not retried
                ++w.owed_chunk;
            }
            if (w.active) ++c_.model_copies_sent;
            w.model_owed = false;  // sent, or the worker expired while it waited
            --owed_copies_;
        }
        ++owed_cursor_;
    }
    // All sent: the next broadcast starts with the first worker again, in registration order.
    if (owed_copies_ == 0) owed_cursor_ = 0;
}

void LearnerCore::on_writable() {
    send_blocked_ = false;
    send_owed();
}

void LearnerCore::broadcast_model(std::uint64_t now_mono) {
    if (replicated_) {
        broadcast_group(now_mono);
        return;
    }
    for (WorkerInfo& w : workers_) {
        if (!w.active) continue;
        // A worker that has gone quiet gets at most model_budget copies; it asks again (a model
        // request) when it needs one. This bounds what one datagram, forged or not, can draw.
        if (w.models_since_heard >= config_.learner.model_budget) {
            ++c_.models_withheld;
            continue;
        }
        send_model(w, now_mono);
    }
    send_owed();
}

void LearnerCore::broadcast_group(std::uint64_t now_mono) {
    // One copy for the whole cluster: the switch delivers it to each member. It goes out while
    // some active worker has budget left, so a cluster gone silent stops drawing MODEL after
    // model_budget copies, as with unicast; it counts as a copy (and as a recent send, for the
    // request rate limit) for each of those workers.
    // With no active worker at all there is nobody to send to, and nothing is counted.
    bool any_active = false;
    bool any_budget = false;
    for (WorkerInfo& w : workers_) {
        if (!w.active) continue;
        any_active = true;
        if (w.models_since_heard >= config_.learner.model_budget) continue;
        any_budget = true;
        w.last_model_sent_ns = now_mono;
        ++w.models_since_heard;
    }
    if (!any_budget) {
        if (any_active) ++c_.model_group_withheld;
        return;
    }
    ++c_.model_group_sends;
    c_.model_group_chunks_sent += send_chunks(group_, drl::kEveryWorker);
}

bool LearnerCore::publish_now(std::uint64_t now_real, std::uint64_t now_mono) {
    if (applied_since_publish_ == 0) return false;
    ++version_;
    published_ = parameters_;
    published_real_ns_ = now_real;
    applied_since_publish_ = 0;
    last_publish_mono_ = now_mono;
    last_rebroadcast_mono_ = now_mono;
    ++c_.versions_published;
    broadcast_model(now_mono);
    return true;
}

void LearnerCore::update_quiet(std::uint64_t now_mono) {
    // Past twice its credit timeout without a word, a worker has forgotten its chunks in flight:
    // spread units sent to it would be stranded there (docs/transport.md, "Credit protocol").
    // Without a credit timeout it never forgets, and only expiry takes it out of the plan.
    const std::uint64_t quiet_after = 2 * std::uint64_t{config_.transport.credit_timeout_ms} * 1'000'000;
    if (quiet_after == 0) return;
    for (WorkerInfo& w : workers_) {
        if (!w.active) continue;
        const bool quiet = now_mono > w.last_heard_ns && now_mono - w.last_heard_ns > quiet_after;
        if (quiet == w.quiet) continue;
        w.quiet = quiet;
        if (planner_) planner_->set_quiet(w.id, quiet);
    }
}

bool LearnerCore::on_tick(std::uint64_t now_real, std::uint64_t now_mono) {
    if (published_real_ns_ == 0) published_real_ns_ = now_real;  // version 1 (or the resumed one)
    // Workers silent for too long stop receiving broadcasts (and credits in the plan).
    const std::uint64_t timeout = std::uint64_t{config_.learner.worker_timeout_ms} * 1'000'000;
    bool changed = false;
    for (WorkerInfo& w : workers_) {
        if (w.active && now_mono - w.last_heard_ns > timeout) {
            w.active = false;
            ++c_.workers_expired;
            // Forget its seqs: a worker that comes back after expiry may be a new process whose
            // seqs start anywhere (docs/transport.md, "Duplicates").
            for (SeqWindow& window : w.seen) window.clear();
            changed = true;
        }
    }
    if (changed) rebuild_planner();
    update_quiet(now_mono);
    // Owed copies go on at every tick too, for an embedder that never polls for POLLOUT.
    on_writable();

    if (now_mono - last_publish_mono_ >= publish_interval_ns_ &&
        publish_now(now_real, now_mono))
        return true;
    if (now_mono - last_rebroadcast_mono_ >= std::uint64_t{config_.learner.rebroadcast_ms} * 1'000'000) {
        last_rebroadcast_mono_ = now_mono;
        ++c_.rebroadcasts;
        broadcast_model(now_mono);
    }
    return false;
}

}  // namespace shesha::learner
