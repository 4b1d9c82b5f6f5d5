#include "init.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <rte_pci.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <spdlog/spdlog.h>

namespace shesha::sw {

namespace {

bool names_lcores(std::string_view arg) {
    return arg == "-l" || arg == "-c" || arg == "--lcores" || arg.starts_with("--lcores=") ||
           (arg.starts_with("-l") && arg.size() > 2 && arg[2] != '-') || (arg.starts_with("-c") && arg.size() > 2);
}

// The name ethdev knows a device by: the part of a vdev spec before the first comma.
std::string device_name(const std::string& spec) { return spec.substr(0, spec.find(',')); }

}  // namespace

std::vector<std::string> build_eal_args(const core::SwitchConfig& cfg, std::span<const std::string> extra,
                                        const std::string& program) {
    std::vector<std::string> args{program};
    bool has_lcores = false;
    for (const auto& a : cfg.eal_args) {
        has_lcores |= names_lcores(a);
        args.push_back(a);
    }
    for (const auto& a : extra) {
        has_lcores |= names_lcores(a);
        args.push_back(a);
    }
    if (!has_lcores) {
        args.push_back("-l");
        args.push_back(cfg.lcores == 1 ? std::string("0") : fmt::format("0-{}", cfg.lcores - 1));
    }
    return args;
}

bool init_eal(const std::vector<std::string>& args, std::string& error) {
    std::vector<std::string> copy = args;  // rte_eal_init may permute argv
    std::vector<char*> argv;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
    if (rc >= 0) return true;
    const int err = rte_errno;
    error = fmt::format("EAL initialisation failed: {} ({})", rte_strerror(err), fmt::join(args, " "));
    if (err == EACCES || err == EPERM) return false;
    throw InitError(error);
}

namespace {

// The value of `key=` in a vdev string ("net_af_packet0,iface=x,framesz=4096"), if present.
std::optional<std::string> devarg(const std::string& device, std::string_view key) {
    std::size_t at = 0;
    while ((at = device.find(',', at)) != std::string::npos) {
        ++at;
        if (device.compare(at, key.size(), key) == 0 && device.size() > at + key.size() && device[at + key.size()] == '=') {
            const std::size_t start = at + key.size() + 1;
            return device.substr(start, device.find(',', start) - start);
        }
    }
    return std::nullopt;
}

}  // namespace

rte_mempool* create_mbuf_pool(const core::SwitchConfig& cfg, const std::string& name) {
    const unsigned cache = std::min(256u, cfg.mbufs / 8);
    // One segment per frame: the data room holds the largest frame of any port (the switch never
    // merges or marks a multi-segment frame), at least DPDK's default 2 KB.
    std::uint32_t data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
    for (const auto& p : cfg.ports) {
        data_room = std::max<std::uint32_t>(data_room, RTE_PKTMBUF_HEADROOM + p.mtu + core::kFrameOverhead);
        // af_packet wants an mbuf to hold a whole ring frame (framesz) whatever the MTU.
        if (const auto framesz = devarg(p.device, "framesz"); framesz && p.device.find("af_packet") != std::string::npos)
            data_room = std::max<std::uint32_t>(data_room, RTE_PKTMBUF_HEADROOM + static_cast<std::uint32_t>(std::strtoul(framesz->c_str(), nullptr, 10)));
    }
    data_room = (data_room + 63) & ~63u;
    rte_mempool* pool = rte_pktmbuf_pool_create(name.c_str(), cfg.mbufs, cache, 0, static_cast<std::uint16_t>(data_room),
                                                static_cast<int>(rte_socket_id()));
    if (pool == nullptr)
        throw InitError(fmt::format("cannot create mbuf pool '{}' of {} mbufs of {} bytes: {} (more EAL memory: -m)", name,
                                    cfg.mbufs, data_room, rte_strerror(rte_errno)));
    return pool;
}

std::uint16_t attach_port(const core::PortConfig& port) {
    const std::string name = device_name(port.device);
    std::uint16_t id = 0;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;  // --vdev or PCI scan at EAL init
    // A PCI address may be written short ("01:00.0"); ethdev names it in full ("0000:01:00.0").
    rte_pci_addr pci{};
    if (rte_pci_addr_parse(name.c_str(), &pci) == 0) {
        char full[PCI_PRI_STR_SIZE];
        rte_pci_device_name(&pci, full, sizeof(full));
        if (rte_eth_dev_get_port_by_name(full, &id) == 0) return id;
    }
    const int rc = rte_dev_probe(port.device.c_str());
    if (rc != 0)
        throw InitError(fmt::format("port '{}': cannot probe device '{}': {}", port.name, port.device, rte_strerror(-rc)));
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;
    if (rte_pci_addr_parse(name.c_str(), &pci) == 0) {
        char full[PCI_PRI_STR_SIZE];
        rte_pci_device_name(&pci, full, sizeof(full));
        if (rte_eth_dev_get_port_by_name(full, &id) == 0) return id;
    }
    throw InitError(fmt::format("port '{}': device '{}' probed but no ethdev named '{}'", port.name, port.device, name));
}

namespace {

void check_af_packet_mtu(const core::PortConfig& port, std::uint32_t frame) {
    // The PMD's ring frames (TPACKET_V2) hold a header before the packet: 64 bytes cover it.
    constexpr std::uint32_t kTpacketHeader = 64;
    const auto framesz_text = devarg(port.device, "framesz");
    const std::uint32_t framesz = framesz_text ? static_cast<std::uint32_t>(std::strtoul(framesz_text->c_str(), nullptr, 10)) : 2048;
    if (frame + kTpacketHeader > framesz)
        throw InitError(fmt::format("port '{}' ({}): mtu {} needs {}-byte frames, but the af_packet ring frames are {} "
                                    "bytes (framesz{}): set framesz={} or more, with blocksz= a multiple of it",
                                    port.name, port.device, port.mtu, frame, framesz, framesz_text ? "" : " default",
                                    (frame + kTpacketHeader + 511) / 512 * 512));
    if (const auto iface = devarg(port.device, "iface")) {
        ifreq req{};
        std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", iface->c_str());
        const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
        const bool got = fd >= 0 && ::ioctl(fd, SIOCGIFMTU, &req) == 0;
        if (fd >= 0) ::close(fd);
        if (got && req.ifr_mtu < static_cast<int>(port.mtu))
            throw InitError(fmt::format("port '{}' ({}): mtu {}, but interface {} has mtu {} (ip link set {} mtu {})",
                                        port.name, port.device, port.mtu, *iface, req.ifr_mtu, *iface, port.mtu));
    }
}

}  // namespace

void setup_port(std::uint16_t port_id, const core::PortConfig& port, rte_mempool* pool, std::uint16_t tx_queues,
                std::uint32_t link_wait_ms) {
    auto fail = [&](std::string_view what, int rc) {
        throw InitError(fmt::format("port '{}' ({}): {} failed: {}", port.name, port.device, what, rte_strerror(-rc)));
    };
    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0) fail("rte_eth_dev_info_get", rc);
    // Jumbo frames: refuse a port whose PMD cannot carry the configured MTU, naming its limit,
    // rather than losing large frames silently later (DPDK 22.11's af_xdp has no multi-buffer).
    const std::uint32_t frame = port.mtu + core::kFrameOverhead;
    rte_eth_conf conf{};
    if (std::string_view(info.driver_name).find("af_packet") != std::string_view::npos) {
        // DPDK 22.11's af_packet reports 1518-byte frames whatever its ring holds, and ethdev
        // refuses a larger MTU on that basis; its real limit is the ring's frame size (framesz=)
        // and the kernel interface's MTU. Check those instead and leave ethdev's MTU alone.
        check_af_packet_mtu(port, frame);
    } else {
        if (port.mtu > info.max_mtu || frame > info.max_rx_pktlen)
            throw InitError(fmt::format("port '{}' ({}): mtu {} needs {}-byte frames, but the {} driver takes at most "
                                        "mtu {} (frames of {} bytes)",
                                        port.name, port.device, port.mtu, frame, info.driver_name, info.max_mtu,
                                        info.max_rx_pktlen));
        conf.rxmode.mtu = port.mtu;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    const bool af_packet = std::string_view(info.driver_name).find("af_packet") != std::string_view::npos;
    if (info.max_tx_queues < tx_queues)
        throw InitError(fmt::format("port '{}' ({}): lcores: {} needs {} TX queues (one per forwarding lcore), but the {} "
                                    "driver offers {}{}",
                                    port.name, port.device, tx_queues, tx_queues, info.driver_name, info.max_tx_queues,
                                    af_packet ? " (add qpairs=N to the device)" : ""));
    if (info.max_rx_queues < port.rx_queues)
        throw InitError(fmt::format("port '{}' ({}): rx_queues: {}, but the {} driver offers {}{}", port.name, port.device,
                                    port.rx_queues, info.driver_name, info.max_rx_queues,
                                    af_packet ? " (add qpairs=N to the device)" : ""));
    if (port.rx_queues > 1 && !af_packet) {
        // A cluster's gradients all go to its learner: hashing on the destination address alone
        // brings them to one queue, so they meet on one lcore and can merge. (af_packet spreads
        // by the kernel's fanout hash instead, and says nothing about it to ethdev.)
        const std::uint64_t wanted = RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_L3_DST_ONLY;
        if ((info.flow_type_rss_offloads & (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP)) == 0)
            throw InitError(fmt::format("port '{}' ({}): rx_queues: {} needs RSS on IPv4, which the {} driver cannot do "
                                        "(use rx_queues: 1 and give each lcore whole ports)",
                                        port.name, port.device, port.rx_queues, info.driver_name));
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = wanted & info.flow_type_rss_offloads;
        if ((info.flow_type_rss_offloads & RTE_ETH_RSS_L3_DST_ONLY) == 0)
            spdlog::warn("port '{}' ({}): the {} driver cannot hash on the destination address alone; a cluster's "
                         "gradients may reach several lcores and merge less", port.name, port.device, info.driver_name);
    }
    if (int rc = rte_eth_dev_configure(port_id, port.rx_queues, tx_queues, &conf); rc != 0) fail("rte_eth_dev_configure", rc);
    std::uint16_t rx_desc = port.rx_desc, tx_desc = port.tx_desc;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc); rc != 0) fail("adjusting descriptors", rc);
    const int socket = rte_eth_dev_socket_id(port_id);
    const unsigned socket_id = socket < 0 ? SOCKET_ID_ANY : static_cast<unsigned>(socket);
    for (std::uint16_t q = 0; q < port.rx_queues; ++q)
        if (int rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, socket_id, nullptr, pool); rc != 0) fail("RX queue setup", rc);
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    for (std::uint16_t q = 0; q < tx_queues; ++q)
        if (int rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, socket_id, &txconf); rc != 0) fail("TX queue setup", rc);
    if (int rc = rte_eth_dev_start(port_id); rc != 0) fail("rte_eth_dev_start", rc);
    if (int rc = rte_eth_promiscuous_enable(port_id); rc != 0 && rc != -ENOTSUP)
        spdlog::warn("port '{}': cannot enable promiscuous mode: {}", port.name, rte_strerror(-rc));

    rte_eth_link link{};
    for (std::uint32_t waited = 0;; waited += 100) {
        if (rte_eth_link_get_nowait(port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) break;
        if (waited >= link_wait_ms) {
            spdlog::warn("port '{}' ({}): link still down after {} ms, continuing", port.name, port.device, link_wait_ms);
            break;
        }
        rte_delay_ms(100);
    }
    rte_ether_addr mac{};
    rte_eth_macaddr_get(port_id, &mac);
    spdlog::info("port '{}' = ethdev {} ({}): {:02x}, mtu {}, rx/tx desc {}/{}, link {} {} Mb/s, shaper {}", port.name,
                 port_id, port.device, fmt::join(mac.addr_bytes, ":"), port.mtu, rx_desc, tx_desc,
                 link.link_status == RTE_ETH_LINK_UP ? "up" : "down", link.link_speed,
                 port.shaper.rate_bps ? fmt::format("{} bit/s", port.shaper.rate_bps) : std::string("off"));
}

std::vector<std::uint16_t> attach_and_setup_ports(const core::SwitchConfig& cfg, rte_mempool* pool,
                                                  std::uint32_t link_wait_ms) {
    std::vector<std::uint16_t> ids;
    for (const auto& p : cfg.ports) {
        const std::uint16_t id = attach_port(p);
        for (std::size_t j = 0; j < ids.size(); ++j)
            if (ids[j] == id)
                throw InitError(fmt::format("ports '{}' and '{}' are the same device", cfg.ports[j].name, p.name));
        setup_port(id, p, pool, static_cast<std::uint16_t>(cfg.lcores), link_wait_ms);
        ids.push_back(id);
    }
    return ids;
}

std::uint64_t discard_startup_frames(std::span<const std::uint16_t> port_ids, unsigned max_bursts) {
    constexpr std::uint16_t kBurst = 32;
    std::uint64_t discarded = 0;
    for (std::uint16_t id : port_ids) {
        rte_eth_dev_info info{};
        if (rte_eth_dev_info_get(id, &info) != 0) continue;
        for (std::uint16_t q = 0; q < info.nb_rx_queues; ++q) {
            rte_mbuf* pkts[kBurst];
            for (unsigned i = 0; i < max_bursts; ++i) {
                const std::uint16_t n = rte_eth_rx_burst(id, q, pkts, kBurst);
                if (n == 0) break;
                rte_pktmbuf_free_bulk(pkts, n);
                discarded += n;
            }
        }
    }
    return discarded;
}

void stop_ports(std::span<const std::uint16_t> port_ids) {
    for (std::uint16_t id : port_ids) {
        if (int rc = rte_eth_dev_stop(id); rc != 0) spdlog::warn("ethdev {}: stop failed: {}", id, rte_strerror(-rc));
        rte_eth_dev_close(id);
    }
}

}  // namespace shesha::sw
