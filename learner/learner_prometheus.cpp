#include "learner_prometheus.h"

#include "json_io.h"
#include "prometheus.h"


namespace shesha::learner {

std::string learner_prometheus_text(LearnerCore& core, const LearnerRunMetrics& run, std::uint64_t now_real) {
    using prom::Type;
    prom::TextWriter w;
    const prom::Labels l{{"cluster", std::to_string(run.cluster)}};
    const auto counter = [&](const char* name, const char* help, std::uint64_t v) { w.add(name, Type::Counter, help, l, v); };
    const auto gauge = [&](const char* name, const char* help, auto v) { w.add(name, Type::Gauge, help, l, v); };

    w.add("shesha_learner_info", Type::Gauge, "Constant 1; labels: environment and incarnation",
          {{"cluster", std::to_string(run.cluster)}, {"env", run.env}, {"incarnation", std::to_string(core.incarnation())}},
          std::uint64_t{1});
    gauge("shesha_learner_uptime_seconds", "Seconds since the learner started", run.wall_s);
    gauge("shesha_learner_version", "Current model version (learner.json version)", std::uint64_t{core.version()});
    counter("shesha_learner_env_steps_total", "Environment steps reported by the workers (learner.json env_steps)",
            core.env_steps());

    const LearnerCounters& c = core.counters();
    const transport::ReassemblerStats& r = core.reassembler_stats();
    counter("shesha_learner_datagrams_total", "Datagrams received", c.datagrams);
    counter("shesha_learner_chunks_received_total", "GRADIENT chunks decoded (learner.json chunks.received)",
            c.gradient_chunks);
    counter("shesha_learner_chunks_applied_total", "GRADIENT chunks applied (chunks.applied)", c.chunks_applied);
    counter("shesha_learner_contributions_total",
            "Worker updates carried by the applied chunks: merged chunks count k (chunks.contributions)",
            c.contributions_applied);
    counter("shesha_learner_optimizer_steps_total", "Optimizer steps (chunks.optimizer_steps)", c.optimizer_steps);
    counter("shesha_learner_steps_capped_total", "Chunks whose steps were capped (chunks.steps_capped)", c.steps_capped);
    counter("shesha_learner_merged_chunks_total", "Applied chunks merged in the network (chunks.merged)", c.merged_chunks);
    counter("shesha_learner_sender_merged_chunks_total", "Applied chunks merged by their sender (chunks.sender_merged)",
            c.sender_merged_chunks);
    counter("shesha_learner_ce_marked_chunks_total", "Chunks carrying ECN CE (chunks.ce_marked)", c.ce_chunks);
    counter("shesha_learner_version_ahead_total", "Chunks based on a version newer than ours (chunks.version_ahead)",
            c.version_ahead);
    for (std::size_t i = 1; i < transport::kApplyResultCount; ++i)
        w.add("shesha_learner_chunks_rejected_total", Type::Counter, "GRADIENT chunks rejected, by reason (chunks.rejected)",
              {l[0], {"reason", json::snake_key(transport::to_string(static_cast<transport::ApplyResult>(i)))}},
              r.rejected[i]);
    // The learner's own rejections (docs/aom.md, "How the learner applies a chunk").
    const std::pair<const char*, std::uint64_t> hardening[] = {
        {"too_stale", c.rejected_too_stale}, {"too_new", c.rejected_too_new},
        {"magnitude", c.rejected_magnitude}, {"rolled_back", c.steps_rolled_back},
        {"replay_window", c.rejected_replay_window}};
    for (const auto& [reason, n] : hardening)
        w.add("shesha_learner_chunks_rejected_total", Type::Counter, "GRADIENT chunks rejected, by reason (chunks.rejected)",
              {l[0], {"reason", reason}}, n);
    counter("shesha_learner_duplicate_chunks_total", "Duplicated GRADIENT datagrams, neither applied nor credited (chunks.duplicates)",
            c.duplicates);
    counter("shesha_learner_chunks_clipped_total", "Chunks scaled down to learner.max_grad_norm (chunks.clipped)",
            c.chunks_clipped);
    counter("shesha_learner_not_admitted_total", "Datagrams from sources or worker ids not admitted (not_admitted)",
            c.not_admitted);
    counter("shesha_learner_models_withheld_total", "MODEL copies withheld: the worker's model_budget was spent (model.withheld)",
            c.models_withheld);
    for (int i = 1; i < proto::kDecodeErrorCount; ++i)
        w.add("shesha_learner_decode_errors_total", Type::Counter, "Undecodable datagrams, by reason (decode_errors)",
              {l[0], {"reason", json::snake_key(proto::to_string(static_cast<proto::DecodeError>(i)))}},
              c.decode_errors[static_cast<std::size_t>(i)]);
    counter("shesha_learner_unexpected_messages_total", "Messages of a type the learner does not take", c.unexpected_type);

    metrics::AomTracker& aom = core.aom();
    aom.advance(now_real);
    counter("shesha_learner_aom_samples_total", "Age-of-Model samples taken (1 ms grid, docs/aom.md)", aom.samples());
    gauge("shesha_learner_aom_mean_seconds", "Time-average Age-of-Model since the first chunk (aom.mean_ms / 1000)",
          aom.mean_ns() / 1e9);
    gauge("shesha_learner_aom_peak_seconds", "Largest Age-of-Model sample (aom.peak_ms / 1000)",
          static_cast<double>(aom.peak_ns()) / 1e9);
    if (aom.started())
        gauge("shesha_learner_aom_seconds", "Current Age-of-Model: now minus the newest generation time received",
              static_cast<double>(static_cast<std::int64_t>(now_real - aom.latest_generation_ns())) / 1e9);

    const StalenessStats& st = core.staleness();
    counter("shesha_learner_staleness_samples_total", "Applied chunks measured for staleness (staleness.count)", st.count);
    gauge("shesha_learner_staleness_mean", "Mean staleness of applied chunks in versions (staleness.mean)", st.mean());
    gauge("shesha_learner_staleness_max", "Largest staleness seen in versions (staleness.max)", std::uint64_t{st.max});

    counter("shesha_learner_evaluations_total", "Policy evaluations finished (eval.count)", run.evaluations);
    gauge("shesha_learner_eval_mean_return", "Mean return of the last evaluation (eval.last_mean_return)", run.last_eval_mean);
    gauge("shesha_learner_eval_min_return", "Lowest return of the last evaluation (eval.last_min_return)", run.last_eval_min);
    gauge("shesha_learner_eval_best_mean_return", "Best evaluation mean so far (eval.best_mean_return)", run.best_eval_mean);
    if (run.target) gauge("shesha_learner_target_return", "--target-return", *run.target);
    gauge("shesha_learner_target_reached", "1 once an evaluation reached --target-return", std::uint64_t{run.target_reached});

    counter("shesha_learner_credit_messages_total", "CREDIT messages sent (credits.messages)", c.credit_messages);
    counter("shesha_learner_credit_batches_total", "CREDIT_BATCH datagrams sent (credits.batches)", c.credit_batches);
    counter("shesha_learner_credit_units_total", "Credit units granted (credits.units)", c.credit_units);
    counter("shesha_learner_versions_published_total", "Model versions published (model.versions_published)",
            c.versions_published);
    counter("shesha_learner_model_chunks_sent_total", "MODEL chunks sent by unicast (model.chunks_sent)", c.model_chunks_sent);
    counter("shesha_learner_model_copies_owed_total", "Unicast MODEL copies decided: publish, rebroadcast, answer (model.copies_owed)",
            c.model_copies_owed);
    counter("shesha_learner_model_copies_sent_total", "Unicast MODEL copies that went out whole (model.copies_sent)",
            c.model_copies_sent);
    counter("shesha_learner_model_sends_deferred_total",
            "Times the socket buffer was full and unicast MODEL copies waited in the learner (model.sends_deferred)",
            c.model_sends_deferred);
    counter("shesha_learner_model_group_sends_total",
            "Publishes and rebroadcasts sent once to learner.model_group (model.group_sends)", c.model_group_sends);
    counter("shesha_learner_model_group_chunks_sent_total", "MODEL chunks sent to learner.model_group (model.group_chunks_sent)",
            c.model_group_chunks_sent);
    counter("shesha_learner_model_group_withheld_total",
            "Group MODEL sends skipped: no active worker had model_budget left (model.group_withheld)", c.model_group_withheld);
    counter("shesha_learner_rebroadcasts_total", "Rebroadcasts of the published model (model.rebroadcasts)", c.rebroadcasts);
    counter("shesha_learner_model_requests_total", "Model requests from workers (model.requests)", c.model_requests);

    gauge("shesha_learner_workers_expected", "--workers", std::uint64_t{run.workers_expected});
    gauge("shesha_learner_workers_known", "Workers registered (workers.known)", std::uint64_t{core.workers().size()});
    gauge("shesha_learner_workers_active", "Workers heard from recently (workers.active)", std::uint64_t{core.active_workers()});
    counter("shesha_learner_workers_expired_total", "Workers expired for silence (workers.expired)", c.workers_expired);

    counter("shesha_learner_checkpoints_written_total", "Checkpoints written", run.checkpoints_written);
    counter("shesha_learner_checkpoint_errors_total", "Checkpoints that failed", run.checkpoint_errors);
    counter("shesha_learner_send_errors_total", "Datagrams the socket refused to send", run.send_errors);
    counter("shesha_learner_receive_errors_total", "Receive errors other than EAGAIN/EINTR", run.receive_errors);
    return w.str();
}

}  // namespace shesha::learner
