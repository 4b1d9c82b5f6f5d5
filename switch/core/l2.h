// Stage 2 of the pipeline, L2 learn and lookup: the switch's MAC learning bridge.
//
// Contract: learn() records a frame's source MAC on its ingress port (the all-zero address is
// never learned); lookup() answers the egress port of a destination: a port index, or kNoPort to
// flood (unknown, aged out, broadcast or multicast). flood_peer() names, per ingress port, the
// last port a flood goes to (the one that gets the original frame, not a copy; with two ports,
// the only one). Owned by the forwarding thread (the FDB is not shared; several
// forwarding lcores each have their own and tell each other what they learn: PeerUpdate).
//
// L2Burst carries what one burst has learned about its senders: senders come in trains, so a
// learn that repeats the previous frame's (same sender, port and now) changes nothing (Fdb::learn
// says when), and until some learn runs, the FDB answers the previous destination the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fdb.h"
#include "switch_config.h"

namespace shesha::core {

class L2Stage {
public:
    // Throws ConfigError for a static FDB entry naming an unknown port, or too many static entries.
    L2Stage(const SwitchConfig& cfg, std::uint64_t ticks_per_second)
        : fdb_(cfg.fdb_capacity, std::uint64_t{cfg.mac_aging_s} * ticks_per_second), aging_interval_(ticks_per_second) {
        const std::size_t ports = cfg.ports.size();
        for (const auto& e : cfg.static_fdb) {
            auto it = std::find_if(cfg.ports.begin(), cfg.ports.end(), [&](const auto& pc) { return pc.name == e.port; });
            if (it == cfg.ports.end())
                throw ConfigError("static FDB entry " + format_mac(e.mac) + " names unknown port '" + e.port + "'");
            if (!fdb_.add_static(e.mac, static_cast<std::uint16_t>(it - cfg.ports.begin())))
                throw ConfigError("static FDB entries exceed the FDB capacity");
        }
        flood_peer_.assign(ports, kNoPort);
        for (std::size_t in = 0; in < ports; ++in)
            for (std::size_t p = ports; p-- > 0;)
                if (p != in) {
                    flood_peer_[in] = static_cast<std::uint16_t>(p);
                    break;
                }
    }

    // True when learning the same source again now would change nothing (see Fdb::learn).
    [[gnu::always_inline]] inline bool learn(MacKey src, std::uint16_t in, std::uint64_t now) noexcept {
        // The all-zero address is no station's (net_null and broken senders use it): never learned,
        // so frames to it flood instead of being pinned to whichever port sent one last.
        return src == 0 || fdb_.learn(src, in, now);
    }
    [[gnu::always_inline]] inline std::uint16_t lookup(MacKey dst, std::uint64_t now) const noexcept {
        return is_multicast(dst) ? kNoPort : fdb_.lookup(dst, now);
    }
    std::uint16_t flood_peer(std::uint16_t in) const noexcept { return flood_peer_[in]; }

    // FDB aging, about once a second of `now`.
    void housekeeping(std::uint64_t now) noexcept {
        if (now - last_aging_ >= aging_interval_) {
            fdb_.age(now);
            last_aging_ = now;
        }
    }
    const Fdb& fdb() const noexcept { return fdb_; }
    Fdb& fdb() noexcept { return fdb_; }  // peer sync (pipeline.h, PeerUpdate)

private:
    Fdb fdb_;
    std::vector<std::uint16_t> flood_peer_;
    std::uint64_t aging_interval_;
    std::uint64_t last_aging_ = 0;
};

// One burst's memo of its last learn and lookup (kept in registers by the forwarding loop).
struct L2Burst {
    MacKey src = kNoMacKey;  // the previous frame's source, if learning it again is a no-op
    MacKey dst = kNoMacKey;  // the last destination looked up since the last learn
    std::uint16_t out = kNoPort;

    [[gnu::always_inline]] inline void learn(L2Stage& l2, MacKey source, std::uint16_t in, std::uint64_t now) noexcept {
        if (source == src) return;
        dst = kNoMacKey;
        src = l2.learn(source, in, now) ? source : kNoMacKey;
    }
    [[gnu::always_inline]] inline std::uint16_t lookup(const L2Stage& l2, MacKey destination, std::uint64_t now) noexcept {
        if (destination != dst) {
            dst = destination;
            out = l2.lookup(destination, now);
        }
        return out;
    }
};

}  // namespace shesha::core
