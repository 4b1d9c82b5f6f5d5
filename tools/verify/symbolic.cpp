#include "symbolic.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <z3++.h>

#include "bounded_model.h"

namespace shesha::verify {
namespace {

// D::I and D::B are Z3 terms; every free choice becomes a constrained constant.
struct Z3Domain {
    using I = z3::expr;
    using B = z3::expr;
    using R = z3::expr;

    z3::context& ctx;
    z3::solver& solver;
    std::vector<std::vector<z3::expr>> sends;  // [t][c]
    std::vector<std::vector<z3::expr>> versions;  // [t][c], model.versions > 0
    struct Cut {
        int cluster;
        z3::expr happens;
        z3::expr value;
    };
    std::vector<Cut> cuts;  // in call order
    int cut_serial = 0;

    I lit(std::int64_t v) const { return ctx.int_val(static_cast<int64_t>(v)); }
    B blit(bool b) const { return ctx.bool_val(b); }
    static I sel(const B& c, const I& a, const I& b) { return z3::ite(c, a, b); }
    static B bsel(const B& c, const B& a, const B& b) { return z3::ite(c, a, b); }
    static R rsel(const B& c, const R& a, const R& b) { return z3::ite(c, a, b); }
    static I floor_of(const R& v) { return z3::expr(v.ctx(), Z3_mk_real2int(v.ctx(), v)); }
    // The double's exact value as a rational (every finite double is m * 2^e).
    R rlit(double v) const {
        int e = 0;
        const double f = std::frexp(v, &e);  // v = f * 2^e, 0.5 <= |f| < 1
        std::int64_t num = static_cast<std::int64_t>(std::ldexp(f, 53));
        int shift = 53 - e;                  // v = num / 2^shift
        while (shift > 0 && num % 2 == 0) {
            num /= 2;
            --shift;
        }
        if (shift <= 0) return ctx.real_val(static_cast<int64_t>(num * (std::int64_t{1} << -shift)));
        if (shift > 62) return ctx.real_val(std::to_string(v).c_str());  // tiny: decimal approximation
        return ctx.real_val(static_cast<int64_t>(num), static_cast<int64_t>(std::int64_t{1} << shift));
    }
    static R to_real(const I& v) { return z3::to_real(v); }
    // min(1, marked / credited), 1 if marked > 0 = credited: a case split over the denominator
    // keeps every division by a numeral (linear); beyond max_den a true division (never reached).
    R fraction(const I& marked, const I& credited, int max_den) const {
        const R m = z3::to_real(marked);
        R f = z3::ite(m > z3::to_real(credited), ctx.real_val(1), m / z3::to_real(credited));
        for (int k = max_den; k >= 1; --k) f = z3::ite(credited == k, z3::min(ctx.real_val(1), m / ctx.real_val(k)), f);
        return z3::ite(credited > 0, f, z3::ite(marked > 0, ctx.real_val(1), ctx.real_val(0)));
    }
    R rfix(const R& v, const std::string& name) {
        z3::expr x = ctx.real_const(name.c_str());
        solver.add(x == v);
        return x;
    }
    I fix(const I& v, const std::string& name) {
        z3::expr x = ctx.int_const(name.c_str());
        solver.add(x == v);
        return x;
    }
    // The model's own construction bounds (the DRR visit bound in bounded_model.h) are argued there
    // and checked by the concrete domain on every agreement run; they add nothing to solve.
    void expect(const B&, const std::string&) {}
    B fixb(const B& v, const std::string& name) {
        z3::expr x = ctx.bool_const(name.c_str());
        solver.add(x == v);
        return x;
    }
    I choose_send(int c, int t, const I& upper) {
        z3::expr n = ctx.int_const(("send_" + std::to_string(t) + "_" + std::to_string(c)).c_str());
        solver.add(n >= 0 && n <= upper);
        if (static_cast<int>(sends.size()) <= t) sends.resize(t + 1);
        sends[t].push_back(n);
        return n;
    }
    I choose_version(int c, int t, int max_version) {
        z3::expr v = ctx.int_const(("version_" + std::to_string(t) + "_" + std::to_string(c)).c_str());
        solver.add(v >= 0 && v <= max_version);
        if (static_cast<int>(versions.size()) <= t) versions.resize(t + 1);
        versions[t].push_back(v);
        return v;
    }
    I choose_cut(int c, int t, const B& happens, const I& lo, const I& hi) {
        z3::expr v = ctx.int_const(("cut_" + std::to_string(t) + "_" + std::to_string(c) + "_" +
                                    std::to_string(cut_serial++)).c_str());
        solver.add(v >= lo && v <= hi);
        cuts.push_back({c, happens, v});
        return v;
    }
};

z3::solver make_solver(z3::context& ctx) {
    const char* mode = std::getenv("SHESHA_VERIFY_SOLVER");
    const std::string m = mode ? mode : "";
    if (m == "lia") return z3::solver(ctx, "QF_LIA");
    if (m == "plain") return z3::solver(ctx);
    // Default: the unrolling is mostly definitions (x == term); solve-eqs substitutes them away
    // before the SMT core runs, about 2-3x faster than the default solver on these models.
    return (z3::tactic(ctx, "simplify") & z3::tactic(ctx, "propagate-values") & z3::tactic(ctx, "solve-eqs") &
                z3::tactic(ctx, "smt")).mk_solver();
}

std::int64_t int_value(const z3::model& m, const z3::expr& e) {
    return m.eval(e, true).get_numeral_int64();
}

}  // namespace

const char* to_string(Property p) {
    switch (p) {
        case Property::Fairness: return "fairness";
        case Property::Responsiveness: return "responsiveness";
        case Property::Aom: return "aom";
        case Property::VersionSpread: return "version_spread";
    }
    return "?";
}

CheckResult check_property(const VerifyConfig& cfg, Property prop) {
    const auto start = std::chrono::steady_clock::now();
    CheckResult res;
    res.property = prop;

    z3::context ctx;
    z3::solver solver = make_solver(ctx);
    Z3Domain d{ctx, solver, {}, {}, {}, 0};
    Model<Z3Domain> model(d, cfg.model);
    model.run();
    std::vector<Violation<Z3Domain>> violations;
    switch (prop) {
        case Property::Fairness:
            if (!cfg.fairness) throw std::invalid_argument("fairness is not configured");
            violations = fairness_violations(d, model.trace(), *cfg.fairness);
            break;
        case Property::Responsiveness:
            if (!cfg.responsiveness) throw std::invalid_argument("responsiveness is not configured");
            violations = responsiveness_violations(d, model.trace(), *cfg.responsiveness);
            break;
        case Property::Aom:
            if (!cfg.aom) throw std::invalid_argument("aom is not configured");
            violations = aom_violations(d, model.trace(), *cfg.aom);
            break;
        case Property::VersionSpread:
            if (!cfg.version_spread) throw std::invalid_argument("version_spread is not configured");
            violations = version_spread_violations(d, model.trace(), *cfg.version_spread);
            break;
    }
    z3::expr_vector any(ctx);
    for (const auto& v : violations) any.push_back(v.happens);
    solver.add(violations.empty() ? ctx.bool_val(false) : z3::mk_or(any));

    const z3::check_result r = solver.check();
    res.solve_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == z3::unknown) throw std::runtime_error("Z3 returned unknown: " + solver.reason_unknown().substr(0, 200));
    if (r == z3::unsat) {
        res.verified = true;
        return res;
    }
    const z3::model m = solver.get_model();
    Counterexample& cex = res.cex;
    cex.property = to_string(prop);
    cex.config = cfg;
    for (const auto& row : d.sends) {
        std::vector<int> w;
        for (const auto& n : row) w.push_back(static_cast<int>(int_value(m, n)));
        cex.workload.push_back(w);
    }
    for (const auto& row : d.versions) {
        std::vector<int> v;
        for (const auto& x : row) v.push_back(static_cast<int>(int_value(m, x)));
        cex.versions.push_back(v);
    }
    for (const auto& v : violations)
        if (m.eval(v.happens, true).is_true()) {
            cex.step = v.step;
            cex.what = v.what;
            break;
        }
    // The model's trace for this workload and these cut choices, replayed concretely: it must show
    // the same violation (a cross-check of the two domains).
    ConcreteDomain cd;
    cd.requested = cex.workload;
    cd.versions = cex.versions;
    cd.cut_windows.assign(cfg.model.clusters, {});
    for (const auto& c : d.cuts)
        if (m.eval(c.happens, true).is_true()) cd.cut_windows[c.cluster].push_back(int_value(m, c.value));
    Model<ConcreteDomain> concrete(cd, cfg.model);
    concrete.run();
    cex.model_trace = concrete.trace();
    return res;
}

}  // namespace shesha::verify
