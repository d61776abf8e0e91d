// The placement rule of placement.h, case by case, and what a decision costs.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "placement.h"

namespace sinew::harness {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

v1::Resources Defaults() {
  v1::Resources r;
  r.set_cpu_millicores(1000);
  r.set_memory_limit_bytes(kGiB);
  r.set_pids_limit(256);
  r.set_workspace_bytes(256ull << 20);
  r.set_lifetime_seconds(3600);
  r.set_network("none");
  r.set_image("default");
  r.set_runtime("runc");
  return r;
}

// A host with `mem_gib` of capacity, 4 CPUs, and `running` default-shape sandboxes.
HostLoad Host(const std::string& id, uint64_t mem_gib, uint32_t running = 0, uint32_t warm = 0) {
  HostLoad h;
  auto& r = h.record;
  r.set_host_id(id);
  r.set_address("127.0.0.1:1" + id);
  r.set_memory_capacity_bytes(mem_gib * kGiB);
  r.set_cpu_capacity_millicores(4000);
  r.set_max_sandboxes(64);
  *r.mutable_defaults() = Defaults();
  r.set_running(running);
  r.set_memory_reserved_bytes(running * kGiB);
  r.set_cpu_reserved_millicores(running * 1000);
  if (running + warm > 0) {
    auto* s = r.add_shapes();
    *s->mutable_resources() = FillResources(v1::Resources(), Defaults());
    s->set_running(running);
    s->set_warm(warm);
  }
  return h;
}

std::vector<std::string> Order(const Placement& p) {
  std::vector<std::string> ids;
  for (const auto& c : p.ranked) ids.push_back(c.host_id);
  return ids;
}

TEST(PlacementTest, FillsZeroFieldsFromTheHostsDefaults) {
  v1::Resources req;
  req.set_memory_limit_bytes(2 * kGiB);
  auto r = FillResources(req, Defaults());
  EXPECT_EQ(r.memory_guaranteed_bytes(), 2 * kGiB);  // a zero guarantee is the limit
  EXPECT_EQ(r.cpu_millicores(), 1000u);
  EXPECT_EQ(r.image(), "default");
  auto d = Defaults();
  d.set_memory_guaranteed_bytes(kGiB / 4);
  EXPECT_EQ(FillResources(req, d).memory_guaranteed_bytes(), kGiB / 4);
}

TEST(PlacementTest, LeastLoadedFirstAndTiesById) {
  auto p = PlaceSandbox(v1::Resources(), {Host("c", 8, 2), Host("a", 8, 1), Host("b", 8, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(p.refused.empty());
  EXPECT_DOUBLE_EQ(p.ranked[0].load, 0.25);  // 1 of 4 CPUs (memory 1/8, count 1/64)
}

TEST(PlacementTest, AWarmSandboxOfTheShapeWinsOverALowerLoad) {
  auto p = PlaceSandbox(v1::Resources(), {Host("a", 8, 0), Host("b", 8, 2, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(p.ranked[0].warm);
  // A warm sandbox of another shape does not count.
  v1::Resources big;
  big.set_memory_limit_bytes(2 * kGiB);
  p = PlaceSandbox(big, {Host("a", 8, 0), Host("b", 8, 2, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(p.ranked[1].warm);
}

TEST(PlacementTest, OnlyHostsWhereTheGuaranteeFits) {
  // a: 2 GiB, 1 used -> 1 GiB free; b: 4 GiB, 1 used -> 3 free.
  v1::Resources two;
  two.set_memory_limit_bytes(2 * kGiB);
  auto p = PlaceSandbox(two, {Host("a", 2, 1), Host("b", 4, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"b"}));
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_NE(p.refused[0].find("a: memory"), std::string::npos) << p.refused[0];
  // Exactly full still fits; one byte more does not.
  two.set_memory_guaranteed_bytes(kGiB);
  EXPECT_EQ(Order(PlaceSandbox(two, {Host("a", 2, 1)})), (std::vector<std::string>{"a"}));
  two.set_memory_guaranteed_bytes(kGiB + 1);
  EXPECT_TRUE(PlaceSandbox(two, {Host("a", 2, 1)}).ranked.empty());
}

TEST(PlacementTest, CpuAndSandboxCountLimitToo) {
  v1::Resources cpu;
  cpu.set_cpu_millicores(3500);
  auto p = PlaceSandbox(cpu, {Host("a", 64, 1)});  // 3000 of 4000 left
  EXPECT_TRUE(p.ranked.empty());
  EXPECT_NE(p.refused.at(0).find("cpu"), std::string::npos);
  HostLoad h = Host("a", 64, 0);
  h.record.set_max_sandboxes(2);
  h.record.set_running(2);
  p = PlaceSandbox(v1::Resources(), {h});
  EXPECT_TRUE(p.ranked.empty());
  EXPECT_NE(p.refused.at(0).find("sandboxes"), std::string::npos);
}

TEST(PlacementTest, AFullHostWithAWarmSandboxOfTheShapeStillTakesIt) {
  auto p = PlaceSandbox(v1::Resources(), {Host("a", 2, 2, 1)});
  ASSERT_EQ(Order(p), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(p.ranked[0].warm);
}

TEST(PlacementTest, PendingPlacementsCountUntilTheRecordShowsThem) {
  HostLoad a = Host("a", 2, 0);
  HostLoad b = Host("b", 2, 0);
  a.pending.push_back(FillResources(v1::Resources(), Defaults()));
  EXPECT_EQ(Order(PlaceSandbox(v1::Resources(), {a, b})), (std::vector<std::string>{"b", "a"}));
  a.pending.push_back(FillResources(v1::Resources(), Defaults()));
  EXPECT_EQ(Order(PlaceSandbox(v1::Resources(), {a, b})), (std::vector<std::string>{"b"}));
  // A pending placement of a shape with a warm sandbox takes that one, not new memory.
  HostLoad w = Host("w", 2, 1, 1);
  w.pending.push_back(FillResources(v1::Resources(), Defaults()));
  auto p = PlaceSandbox(v1::Resources(), {w});
  ASSERT_EQ(Order(p), (std::vector<std::string>{"w"}));
  EXPECT_FALSE(p.ranked[0].warm);  // the warm one is spoken for; 1 GiB is still free
}

TEST(PlacementTest, NoHostsGivesNothing) {
  auto p = PlaceSandbox(v1::Resources(), {});
  EXPECT_TRUE(p.ranked.empty());
  EXPECT_TRUE(p.refused.empty());
}

// What one decision costs (reported, not asserted: no timing thresholds in tests).
TEST(PlacementTest, CostOfADecision) {
  for (size_t n : {3u, 100u, 1000u}) {
    std::vector<HostLoad> hosts;
    for (size_t i = 0; i < n; ++i)
      hosts.push_back(Host("h" + std::to_string(i), 64, static_cast<uint32_t>(i % 4), i % 3));
    const int rounds = n >= 1000 ? 20 : 200;
    size_t placed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) placed += PlaceSandbox(v1::Resources(), hosts).ranked.size();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        rounds;
    EXPECT_EQ(placed, n * rounds);
    std::cout << "placement over " << n << " hosts: " << us << " us per decision\n";
    RecordProperty("placement_us_" + std::to_string(n), std::to_string(us));
  }
}

}  // namespace
}  // namespace sinew::harness
