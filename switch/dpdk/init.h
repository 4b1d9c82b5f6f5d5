// Start-up and shut-down of the DPDK side of shesha-switch: EAL arguments and initialisation, the
// mbuf pool, attaching ports (vdev specs through rte_dev_probe, PCI addresses found by name) and
// configuring them (port.rx_queues RX queues, one TX queue per forwarding lcore, promiscuous,
// bounded wait for the link).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "switch_config.h"

struct rte_mempool;

namespace shesha::sw {

class InitError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// argv for rte_eal_init: program name, config eal args, then the CLI extras; adds "-l 0-(N-1)"
// for config.lcores when neither names the lcores (-l, -c, --lcores).
std::vector<std::string> build_eal_args(const core::SwitchConfig& cfg, std::span<const std::string> extra,
                                        const std::string& program = "shesha-switch");
// rte_eal_init; throws InitError with DPDK's reason. Returns false (without throwing) when the
// failure is a lack of privileges (EACCES/EPERM), so tests can skip.
bool init_eal(const std::vector<std::string>& args, std::string& error);

// The mbuf pool every port receives into (cfg.mbufs mbufs, default data room).
rte_mempool* create_mbuf_pool(const core::SwitchConfig& cfg, const std::string& name = "shesha_mbufs");

// Finds or probes the device of one configured port; returns its port id. Throws InitError.
std::uint16_t attach_port(const core::PortConfig& port);
// Configures port.rx_queues RX queues (with RSS on the destination IPv4 address when more than
// one) and tx_queues TX queues (one per forwarding lcore), starts the port, turns promiscuous mode
// on and waits at most link_wait_ms for the link (a link still down is logged, not fatal). Throws
// InitError, naming the key and the PMD's limit, when the PMD has too few queues or cannot steer.
void setup_port(std::uint16_t port_id, const core::PortConfig& port, rte_mempool* pool, std::uint16_t tx_queues,
                std::uint32_t link_wait_ms = 3000);
// attach_port + setup_port for every configured port, in order.
std::vector<std::uint16_t> attach_and_setup_ports(const core::SwitchConfig& cfg, rte_mempool* pool,
                                                  std::uint32_t link_wait_ms = 3000);
// Frees whatever the ports received before forwarding starts (at most max_bursts bursts each) and
// returns how many frames that was. An af_packet socket sees every interface's traffic until the
// PMD binds it to its own, so frames of unrelated interfaces can sit in its ring at start.
std::uint64_t discard_startup_frames(std::span<const std::uint16_t> port_ids, unsigned max_bursts = 64);
// Stops and closes the ports (errors are logged).
void stop_ports(std::span<const std::uint16_t> port_ids);

}  // namespace shesha::sw
