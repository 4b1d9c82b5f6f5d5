// A Pipeline Io over heap frames, for the code that runs the pipeline without DPDK on real bytes:
// the unit tests (tests/test_pipeline.cpp) and shesha-replay. A frame is a byte vector; what the
// pipeline transmits (tx_burst) or sends at once (send_now: FEEDBACK) is appended to that port's
// `sent` list in the order it was handed over, for the caller to take. `alive` counts the frames
// not yet freed, so a test can check that nothing leaks. Not for the data path: every frame is a
// heap allocation.
#pragma once

#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace shesha::core {

struct MemoryFrame {
    std::vector<std::uint8_t> bytes;
};

class MemoryIo {
public:
    using Handle = MemoryFrame*;

    explicit MemoryIo(std::size_t ports = 0) : sent(ports) {}

    static std::uint8_t* data(MemoryFrame* f) noexcept { return f->bytes.data(); }
    static std::uint32_t pkt_len(MemoryFrame* f) noexcept { return static_cast<std::uint32_t>(f->bytes.size()); }
    static std::uint32_t data_len(MemoryFrame* f) noexcept { return static_cast<std::uint32_t>(f->bytes.size()); }
    static bool multi_segment(MemoryFrame*) noexcept { return false; }
    static void prefetch(MemoryFrame*) noexcept {}

    // A new frame holding `bytes` (nullptr when out of memory).
    MemoryFrame* make(std::vector<std::uint8_t> bytes) noexcept {
        auto* f = new (std::nothrow) MemoryFrame{std::move(bytes)};
        if (f != nullptr) ++alive;
        return f;
    }
    void free(MemoryFrame* f) noexcept {
        delete f;
        --alive;
    }
    void free_bulk(MemoryFrame** f, std::uint32_t n) noexcept {
        for (std::uint32_t i = 0; i < n; ++i) free(f[i]);
    }
    MemoryFrame* copy(MemoryFrame* f) noexcept { return make(f->bytes); }
    // Heap frames share nothing: a replica is a whole copy whose header is its first bytes.
    MemoryFrame* replicate(MemoryFrame* f, std::uint32_t header_len, std::uint8_t** header) noexcept {
        if (header_len == 0 || header_len >= f->bytes.size()) return nullptr;
        MemoryFrame* c = make(f->bytes);
        if (c != nullptr) *header = c->bytes.data();
        return c;
    }
    MemoryFrame* alloc(std::uint32_t len, std::uint8_t** bytes) noexcept {
        MemoryFrame* f = make(std::vector<std::uint8_t>(len));
        if (f != nullptr) *bytes = f->bytes.data();
        return f;
    }
    bool send_now(std::uint16_t port, MemoryFrame* f) noexcept {
        sent[port].push_back(f);
        return true;
    }
    std::uint16_t tx_burst(std::uint16_t port, MemoryFrame** f, std::uint16_t n) noexcept {
        for (std::uint16_t i = 0; i < n; ++i) sent[port].push_back(f[i]);
        return n;
    }

    // The frames a port has sent since the last take, in order; the caller frees them.
    std::vector<MemoryFrame*> take(std::size_t port) { return std::exchange(sent[port], {}); }

    std::vector<std::vector<MemoryFrame*>> sent;  // per port
    long alive = 0;
};

}  // namespace shesha::core
