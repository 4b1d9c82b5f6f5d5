// The `shesha` Python module: the public C++ API (api/include/shesha/transport.h) for PyTorch and
// NumPy users. Buffers are taken without copying (any C-contiguous float32 buffer: NumPy arrays,
// tensor.numpy()); anything else is refused with a clear TypeError/ValueError. Calls that wait
// release the GIL. shesha::Error becomes shesha.Error (a RuntimeError) with the same message.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "shesha/transport.h"

namespace py = pybind11;

namespace {

// A read-only view of a C-contiguous float32 buffer, checked strictly (no conversion, no copy).
std::span<const float> float32_view(const py::buffer& b, const char* what, py::buffer_info& keep) {
    keep = b.request();
    if (keep.format != py::format_descriptor<float>::format() || keep.itemsize != 4)
        throw py::type_error(std::string(what) + ": expected a float32 buffer, got dtype format '" + keep.format + "'");
    // C-contiguous: strides are the row-major ones.
    py::ssize_t expected = keep.itemsize;
    for (py::ssize_t d = keep.ndim - 1; d >= 0; --d) {
        if (keep.shape[d] > 1 && keep.strides[d] != expected)
            throw py::value_error(std::string(what) + ": expected a contiguous buffer (use .contiguous() or np.ascontiguousarray)");
        expected *= keep.shape[d];
    }
    return {static_cast<const float*>(keep.ptr), static_cast<std::size_t>(keep.size)};
}

py::array_t<float> to_array(const std::vector<float>& v) {
    py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

py::dict worker_counters(const shesha::WorkerCounters& c) {
    py::dict d;
#define SHESHA_FIELD(name) d[#name] = c.name
    SHESHA_FIELD(updates_offered); SHESHA_FIELD(updates_rejected); SHESHA_FIELD(chunks_queued);
    SHESHA_FIELD(chunks_sent); SHESHA_FIELD(contributions_sent); SHESHA_FIELD(sender_merges);
    SHESHA_FIELD(chunks_dropped_overflow); SHESHA_FIELD(chunks_replaced_stale); SHESHA_FIELD(credit_messages);
    SHESHA_FIELD(credits_received); SHESHA_FIELD(credits_excess); SHESHA_FIELD(credits_banked);
    SHESHA_FIELD(chunks_prepaid); SHESHA_FIELD(banked); SHESHA_FIELD(ce_echoes);
    SHESHA_FIELD(feedback_received); SHESHA_FIELD(feedback_reductions); SHESHA_FIELD(feedback_ignored);
    SHESHA_FIELD(round_reductions); SHESHA_FIELD(round_increases); SHESHA_FIELD(slow_start_increases);
    SHESHA_FIELD(credit_timeouts);
    SHESHA_FIELD(chunks_presumed_lost); SHESHA_FIELD(chunks_expired); SHESHA_FIELD(ack_rtt_ns); SHESHA_FIELD(flight_expiry_ns); SHESHA_FIELD(window); SHESHA_FIELD(alpha); SHESHA_FIELD(in_flight);
    SHESHA_FIELD(pending_chunks); SHESHA_FIELD(datagrams); SHESHA_FIELD(decode_errors); SHESHA_FIELD(foreign);
    SHESHA_FIELD(unexpected); SHESHA_FIELD(marks_ignored); SHESHA_FIELD(models_adopted);
    SHESHA_FIELD(model_chunks_staged); SHESHA_FIELD(model_chunks_stale); SHESHA_FIELD(model_chunks_duplicate);
    SHESHA_FIELD(model_chunks_rejected); SHESHA_FIELD(model_assemblies_abandoned); SHESHA_FIELD(learner_restarts);
    SHESHA_FIELD(learner_restarts_seen); SHESHA_FIELD(model_resends); SHESHA_FIELD(model_requests); SHESHA_FIELD(send_errors);
    SHESHA_FIELD(learner_version); SHESHA_FIELD(model_version); SHESHA_FIELD(incarnation);
#undef SHESHA_FIELD
    return d;
}

py::dict learner_counters(const shesha::LearnerCounters& c) {
    py::dict d;
#define SHESHA_FIELD(name) d[#name] = c.name
    SHESHA_FIELD(datagrams); SHESHA_FIELD(decode_errors); SHESHA_FIELD(not_admitted); SHESHA_FIELD(chunks_received);
    SHESHA_FIELD(chunks_applied); SHESHA_FIELD(contributions_applied); SHESHA_FIELD(chunks_rejected);
    SHESHA_FIELD(versions_published); SHESHA_FIELD(model_chunks_sent); SHESHA_FIELD(credit_messages);
    SHESHA_FIELD(model_group_chunks_sent); SHESHA_FIELD(credit_batches);
    SHESHA_FIELD(send_errors); SHESHA_FIELD(receive_errors); SHESHA_FIELD(version); SHESHA_FIELD(active_workers);
    SHESHA_FIELD(aom_mean_ms); SHESHA_FIELD(aom_peak_ms); SHESHA_FIELD(staleness_mean); SHESHA_FIELD(staleness_max);
#undef SHESHA_FIELD
    return d;
}

py::tuple step_tuple(const shesha::StepResult& r) {
    return py::make_tuple(to_array(r.observation), r.reward, r.terminated, r.truncated);
}

}  // namespace

PYBIND11_MODULE(shesha, m) {
    m.doc() = "Shesha: push gradients through credit-based senders and Shesha switches (docs/api.md)";
    m.attr("__version__") = shesha::version_string();
    static py::exception<shesha::Error> error(m, "Error", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const shesha::Error& e) {
            error(e.what());
        }
    });

    py::class_<shesha::WorkerTransport>(m, "Worker",
        "A worker's transport: send(version, gradient), take_model(), wait_model(timeout_ms), poll(timeout_ms).")
        .def(py::init([](const std::string& config, int cluster, std::uint32_t worker_id, const std::string& learner,
                         std::uint32_t model_elems, int port, const std::string& bind, bool congestion_control) {
                 if (cluster < 0 || cluster > 65535) throw py::value_error("cluster: expected 0..65535, got " + std::to_string(cluster));
                 if (port < 0 || port > 65535) throw py::value_error("port: expected 0..65535, got " + std::to_string(port));
                 shesha::WorkerOptions o;
                 o.config_path = config;
                 o.cluster_id = static_cast<std::uint16_t>(cluster);
                 o.worker_id = worker_id;
                 o.learner_address = learner;
                 o.learner_port = static_cast<std::uint16_t>(port);
                 o.bind_address = bind;
                 o.model_elems = model_elems;
                 o.congestion_control = congestion_control;
                 return std::make_unique<shesha::WorkerTransport>(o);
             }),
             py::arg("config"), py::arg("cluster"), py::arg("worker_id"), py::arg("learner"), py::arg("model_elems"),
             py::arg("port") = 0, py::arg("bind") = "0.0.0.0", py::arg("congestion_control") = true)
        .def("send",
             [](shesha::WorkerTransport& t, std::uint32_t version, const py::buffer& gradient, std::uint32_t env_steps) {
                 py::buffer_info keep;
                 const auto view = float32_view(gradient, "gradient", keep);
                 py::gil_scoped_release release;
                 t.send(version, view, env_steps);
             },
             py::arg("version"), py::arg("gradient"), py::arg("env_steps") = 0,
             "Offer one flat float32 gradient (model_elems values, C-contiguous; not copied) computed on `version`.")
        .def("send_parts",
             [](shesha::WorkerTransport& t, std::uint32_t version, const std::vector<py::buffer>& parts, std::uint32_t env_steps) {
                 std::vector<py::buffer_info> keep(parts.size());
                 std::vector<std::span<const float>> views;
                 for (std::size_t i = 0; i < parts.size(); ++i)
                     views.push_back(float32_view(parts[i], ("parts[" + std::to_string(i) + "]").c_str(), keep[i]));
                 py::gil_scoped_release release;
                 t.send(version, views, env_steps);
             },
             py::arg("version"), py::arg("parts"), py::arg("env_steps") = 0,
             "Offer a gradient given as several float32 buffers (e.g. one per parameter tensor), in order.")
        .def("poll", [](shesha::WorkerTransport& t, int timeout_ms) {
                 py::gil_scoped_release release;
                 t.poll(timeout_ms);
             }, py::arg("timeout_ms") = 0)
        .def("take_model", [](shesha::WorkerTransport& t) -> py::object {
                 shesha::Model model;
                 if (!t.take_model(model)) return py::none();
                 return py::make_tuple(model.version, to_array(model.parameters));
             }, "(version, parameters) of the newest model not taken yet, or None; never blocks.")
        .def("wait_model", [](shesha::WorkerTransport& t, int timeout_ms) -> py::object {
                 shesha::Model model;
                 bool got = false;
                 {
                     py::gil_scoped_release release;
                     got = t.wait_model(model, timeout_ms);
                 }
                 if (!got) return py::none();
                 return py::make_tuple(model.version, to_array(model.parameters));
             }, py::arg("timeout_ms"), "Like take_model, waiting up to timeout_ms for a newer model (GIL released).")
        .def_property_readonly("has_model", &shesha::WorkerTransport::has_model)
        .def_property_readonly("model_version", &shesha::WorkerTransport::model_version)
        .def_property_readonly("model_elems", &shesha::WorkerTransport::model_elems)
        .def_property_readonly("local_port", &shesha::WorkerTransport::local_port)
        .def("counters", [](const shesha::WorkerTransport& t) { return worker_counters(t.counters()); });

    py::class_<shesha::LearnerEndpoint>(m, "Learner",
        "A learner endpoint: poll(timeout_ms) receives, validates, applies (or hands to a handler) and credits.")
        .def(py::init([](const std::string& config, int cluster, const py::buffer& initial, int port, const std::string& bind) {
                 if (cluster < 0 || cluster > 65535) throw py::value_error("cluster: expected 0..65535, got " + std::to_string(cluster));
                 if (port < -1 || port > 65535) throw py::value_error("port: expected -1 (the YAML's), 0 (any) or 1..65535, got " + std::to_string(port));
                 py::buffer_info keep;
                 const auto view = float32_view(initial, "initial_parameters", keep);
                 shesha::LearnerOptions o;
                 o.config_path = config;
                 o.cluster_id = static_cast<std::uint16_t>(cluster);
                 o.bind_address = bind;
                 o.port = port;
                 o.initial_parameters.assign(view.begin(), view.end());
                 return std::make_unique<shesha::LearnerEndpoint>(o);
             }),
             py::arg("config"), py::arg("cluster"), py::arg("initial_parameters"), py::arg("port") = -1,
             py::arg("bind") = "0.0.0.0")
        .def("poll", [](shesha::LearnerEndpoint& l, int timeout_ms) {
                 py::gil_scoped_release release;
                 l.poll(timeout_ms);
             }, py::arg("timeout_ms") = 0)
        .def("set_update_handler", [](shesha::LearnerEndpoint& l, py::object handler) {
                 if (handler.is_none()) {
                     l.set_update_handler({});
                     return;
                 }
                 // Called from poll() (GIL released there): take the GIL for the Python call. The
                 // gradient is a copy: the chunk's memory is reused after the call.
                 l.set_update_handler([handler](const shesha::ChunkUpdate& u) {
                     py::gil_scoped_acquire gil;
                     py::array_t<float> g(static_cast<py::ssize_t>(u.gradient.size()));
                     std::copy(u.gradient.begin(), u.gradient.end(), g.mutable_data());
                     py::dict info;
                     info["offset"] = u.offset;
                     info["scale"] = u.scale;
                     info["chunk_index"] = u.chunk_index;
                     info["contributions"] = u.contributions;
                     info["staleness"] = u.staleness;
                     info["base_version"] = u.base_version;
                     info["worker_id"] = u.worker_id;
                     info["merged"] = u.merged;
                     handler(g, info);
                 });
             }, py::arg("handler"),
             "handler(gradient, info) receives each accepted chunk (the clipped average of its contributions; "
             "info['scale'] is the staleness factor) instead of the built-in optimizer; None restores it.")
        .def("set_parameters", [](shesha::LearnerEndpoint& l, const py::buffer& values) {
                 py::buffer_info keep;
                 const auto view = float32_view(values, "parameters", keep);
                 auto p = l.mutable_parameters();
                 if (view.size() != p.size())
                     throw shesha::Error("set_parameters: got " + std::to_string(view.size()) + " values, the model has " +
                                         std::to_string(p.size()));
                 std::copy(view.begin(), view.end(), p.begin());
             }, py::arg("parameters"), "Overwrite the current parameters (published by the next publish()).")
        .def("parameters", [](shesha::LearnerEndpoint& l) {
                 const auto p = l.parameters();
                 return to_array(std::vector<float>(p.begin(), p.end()));
             }, "A copy of the current parameters.")
        .def("publish", &shesha::LearnerEndpoint::publish)
        .def_property_readonly("version", &shesha::LearnerEndpoint::version)
        .def_property_readonly("model_elems", &shesha::LearnerEndpoint::model_elems)
        .def_property_readonly("local_port", &shesha::LearnerEndpoint::local_port)
        .def("counters", [](const shesha::LearnerEndpoint& l) { return learner_counters(l.counters()); });

    py::class_<shesha::Environment>(m, "Env", "A Gymnasium classic-control environment, bit-exact with Gymnasium's dynamics.")
        .def(py::init<const std::string&>(), py::arg("name"))
        .def("reset", [](shesha::Environment& e, py::object seed) {
                 return to_array(seed.is_none() ? e.reset() : e.reset(seed.cast<std::uint64_t>()));
             }, py::arg("seed") = py::none())
        .def("step", [](shesha::Environment& e, py::object action) {
                 if (e.discrete()) {
                     if (!py::isinstance<py::int_>(action) && !py::hasattr(action, "__index__"))
                         throw py::type_error(e.name() + " takes an integer action");
                     return step_tuple(e.step_discrete(action.cast<std::int64_t>()));
                 }
                 std::vector<float> values;
                 if (py::isinstance<py::float_>(action) || py::isinstance<py::int_>(action))
                     values.push_back(action.cast<float>());
                 else
                     values = action.cast<std::vector<float>>();
                 return step_tuple(e.step_continuous(values));
             }, py::arg("action"), "(observation, reward, terminated, truncated)")
        .def("set_state", [](shesha::Environment& e, const std::vector<double>& state) { return to_array(e.set_state(state)); })
        .def_property_readonly("state", &shesha::Environment::state)
        .def_property_readonly("discrete", &shesha::Environment::discrete)
        .def_property_readonly("action_count", &shesha::Environment::action_count)
        .def_property_readonly("observation_size", &shesha::Environment::observation_size)
        .def_property_readonly("action_low", &shesha::Environment::action_low)
        .def_property_readonly("action_high", &shesha::Environment::action_high)
        .def_property_readonly("name", &shesha::Environment::name)
        .def_static("names", &shesha::Environment::names);
}
