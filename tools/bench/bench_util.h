// Shared plumbing for shesha-bench: timing, medians, result tables printed as text and JSON.
// Benchmarks are not tests: they measure and report; the only hard failure is a number that is not
// finite (a broken measurement), which the caller turns into a non-zero exit status.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "json_io.h"

namespace shesha::bench {

// Common knobs every subcommand honours.
struct RunOptions {
    bool quick = false;      // smoke run: few repetitions, short durations
    double seconds = 2.0;    // window per forwarding measurement (forward only)
    int forward_rounds = 3;  // alternating testpmd/shesha rounds per forwarding workload
};

using Cell = std::variant<std::string, double>;

// A result table: one row per measurement. Numeric cells are printed with `precision` decimals
// and written to JSON as numbers.
class Table {
public:
    Table(std::string name, std::vector<std::string> columns, int precision = 2);
    void add_row(std::vector<Cell> cells);
    void add_note(std::string note);
    void print() const;
    // JSON object {"name": ..., "columns": [...], "rows": [{col: value, ...}], "notes": [...]};
    // numbers with 6 significant digits, non-finite ones null.
    json::Json to_json() const;
    // False if any numeric cell is NaN or infinite.
    bool all_finite() const;
    const std::string& name() const { return name_; }

private:
    std::string name_;
    std::vector<std::string> columns_;
    std::vector<std::vector<Cell>> rows_;
    std::vector<std::string> notes_;
    int precision_;
};

double median(std::vector<double> v);

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Keeps the compiler from proving a buffer dead or caching it in registers across the barrier.
inline void clobber_memory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Machine description for reports: CPU model, online CPUs, best SIMD level.
std::string cpu_model();
unsigned online_cpus();

}  // namespace shesha::bench
