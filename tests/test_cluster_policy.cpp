// ClusterPolicy: verdicts per cluster, membership by MAC or IP, sorted lookup.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "cluster_policy.h"

using namespace shesha::core;

namespace {
const Mac kMacA{0x02, 0, 0, 0, 0, 0x0A};
const Mac kMacB{0x02, 0, 0, 0, 0, 0x0B};
const Mac kMacC{0x02, 0, 0, 0, 0, 0x0C};
constexpr std::uint32_t kIpA = 0x0A00000A;
constexpr std::uint32_t kIpB = 0x0A00000B;
constexpr std::uint32_t kIpC = 0x0A00000C;

std::vector<ClusterRule> sample_rules() {
    ClusterRule by_mac;
    by_mac.cluster_id = 7;
    by_mac.version_tolerance = 2;
    by_mac.allowed_macs = {kMacB, kMacA};  // unsorted on purpose
    ClusterRule by_ip;
    by_ip.cluster_id = 3;
    by_ip.version_tolerance = 0;
    by_ip.allowed_ips = {kIpB, kIpA};
    ClusterRule off;
    off.cluster_id = 5;
    off.aggregation = false;
    off.allowed_macs = {kMacA};
    ClusterRule nobody;
    nobody.cluster_id = 9;
    return {by_mac, by_ip, off, nobody};
}
}  // namespace

TEST_CASE("verdicts per cluster", "[cluster_policy]") {
    const auto rules = sample_rules();
    const ClusterPolicy policy(rules, NonMemberAction::Drop);
    CHECK(policy.cluster_count() == 4);
    CHECK(policy.non_member_action() == NonMemberAction::Drop);
    std::uint32_t tol = 99;

    CHECK(policy.check(7, kMacA, kIpC, tol) == MergeVerdict::Merge);
    CHECK(tol == 2);
    tol = 99;
    CHECK(policy.check(7, kMacB, 0, tol) == MergeVerdict::Merge);
    CHECK(tol == 2);
    CHECK(policy.check(7, kMacC, kIpA, tol) == MergeVerdict::NotMember);  // IP list is empty here

    tol = 99;
    CHECK(policy.check(3, kMacC, kIpA, tol) == MergeVerdict::Merge);  // member by IP
    CHECK(tol == 0);
    CHECK(policy.check(3, kMacA, kIpC, tol) == MergeVerdict::NotMember);

    CHECK(policy.check(5, kMacA, kIpA, tol) == MergeVerdict::NoAggregation);
    CHECK(policy.check(9, kMacA, kIpA, tol) == MergeVerdict::NotMember);  // empty lists: nobody
    CHECK(policy.check(4, kMacA, kIpA, tol) == MergeVerdict::UnknownCluster);
    CHECK(policy.check(0, kMacA, kIpA, tol) == MergeVerdict::UnknownCluster);
    CHECK(policy.check(0xFFFF, kMacA, kIpA, tol) == MergeVerdict::UnknownCluster);
}

TEST_CASE("tolerance is left alone unless the verdict is Merge", "[cluster_policy]") {
    const auto rules = sample_rules();
    const ClusterPolicy policy(rules, NonMemberAction::ForwardUnmerged);
    std::uint32_t tol = 1234;
    CHECK(policy.check(7, kMacC, kIpC, tol) == MergeVerdict::NotMember);
    CHECK(tol == 1234);
    CHECK(policy.check(5, kMacA, kIpA, tol) == MergeVerdict::NoAggregation);
    CHECK(tol == 1234);
}

TEST_CASE("an empty policy knows no cluster", "[cluster_policy]") {
    const ClusterPolicy policy;
    std::uint32_t tol = 0;
    CHECK(policy.cluster_count() == 0);
    CHECK(policy.non_member_action() == NonMemberAction::ForwardUnmerged);
    CHECK(policy.check(1, kMacA, kIpA, tol) == MergeVerdict::UnknownCluster);
}

TEST_CASE("duplicate cluster ids are rejected", "[cluster_policy]") {
    auto rules = sample_rules();
    rules.push_back(rules[0]);
    CHECK_THROWS_AS(ClusterPolicy(rules, NonMemberAction::Drop), std::invalid_argument);
}

TEST_CASE("many rules and members are all found", "[cluster_policy]") {
    std::vector<ClusterRule> rules;
    for (std::uint16_t id = 1000; id > 0; id = static_cast<std::uint16_t>(id - 3)) {
        ClusterRule r;
        r.cluster_id = id;
        r.version_tolerance = id % 17;
        for (std::uint32_t k = 0; k < 20; ++k) r.allowed_ips.push_back(id * 100u + (19 - k) * 2);
        rules.push_back(r);
        if (id < 3) break;
    }
    const ClusterPolicy policy(rules, NonMemberAction::Drop);
    CHECK(policy.cluster_count() == rules.size());
    for (std::uint16_t id = 0; id <= 1001; ++id) {
        const bool known = id >= 1 && id <= 1000 && (1000 - id) % 3 == 0;
        std::uint32_t tol = 99;
        if (!known) {
            REQUIRE(policy.check(id, kMacA, id * 100u, tol) == MergeVerdict::UnknownCluster);
            continue;
        }
        for (std::uint32_t k = 0; k < 40; ++k) {
            const auto v = policy.check(id, kMacA, id * 100u + k, tol);
            REQUIRE(v == (k % 2 == 0 ? MergeVerdict::Merge : MergeVerdict::NotMember));
        }
        REQUIRE(tol == id % 17u);
    }
}

TEST_CASE("a MAC@IP binding admits only that pair: a borrowed member IP from another MAC is refused", "[cluster_policy]") {
    ClusterRule bound;
    bound.cluster_id = 1;
    bound.allowed_bindings = {{kMacB, kIpB}, {kMacA, kIpA}};  // unsorted on purpose
    ClusterRule by_ip;
    by_ip.cluster_id = 2;
    by_ip.allowed_ips = {kIpA};
    const std::vector<ClusterRule> rules{bound, by_ip};
    const ClusterPolicy policy(rules, NonMemberAction::ForwardUnmerged);
    std::uint32_t tol = 0;
    CHECK(policy.check(1, kMacA, kIpA, tol) == MergeVerdict::Merge);
    CHECK(policy.check(1, kMacB, kIpB, tol) == MergeVerdict::Merge);
    CHECK(policy.check(1, kMacC, kIpA, tol) == MergeVerdict::NotMember);  // spoofed IP, own MAC
    CHECK(policy.check(1, kMacA, kIpB, tol) == MergeVerdict::NotMember);  // two members' halves
    CHECK(policy.check(1, kMacA, kIpC, tol) == MergeVerdict::NotMember);
    // A bare IP entry trusts the address alone: the same spoof is a member there.
    CHECK(policy.check(2, kMacC, kIpA, tol) == MergeVerdict::Merge);
}

TEST_CASE("the verdict cache answers exactly as the policy, through collisions and evictions", "[cluster_policy]") {
    const auto rules = sample_rules();
    const ClusterPolicy policy(rules, NonMemberAction::ForwardUnmerged);
    PolicyVerdictCache cache(policy);
    // 6 clusters (known, unknown, aggregation off, nobody) x 300 sources: far more than the cache's
    // 64 entries, visited three times in different orders, so entries are evicted and refilled.
    std::vector<std::uint16_t> clusters{7, 3, 5, 9, 4, 0};
    std::uint64_t checks = 0, merges = 0;
    for (int pass = 0; pass < 3; ++pass) {
        for (std::uint32_t k = 0; k < 300; ++k) {
            const std::uint32_t s = pass == 1 ? 299 - k : (k * 7) % 300;
            Mac mac = s % 3 == 0 ? kMacA : (s % 3 == 1 ? kMacB : kMacC);
            mac[4] = static_cast<std::uint8_t>(s % 5 == 0 ? 0 : s);  // MAC A/B only when s % 5 == 0
            const std::uint32_t ip = s % 4 == 0 ? kIpA : 0x0A000100u + s;
            for (std::uint16_t id : clusters) {
                std::uint32_t want_tol = 1234, got_tol = 1234;
                const MergeVerdict want = policy.check(id, mac, ip, want_tol);
                const MergeVerdict got = cache.check(id, mac.data(), ip, got_tol);
                REQUIRE(got == want);
                REQUIRE(got_tol == want_tol);  // set on Merge, untouched otherwise
                ++checks;
                merges += want == MergeVerdict::Merge;
            }
        }
    }
    CHECK(checks == 3 * 300 * 6);
    CHECK(merges > 0);
    CHECK(merges < checks);
}
