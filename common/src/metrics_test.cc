#include "sinew/metrics.h"

#include <gtest/gtest.h>

namespace sinew {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInTheTextFormat) {
  Metrics metrics({0.5, 1});
  metrics.Describe("jobs_total", MetricType::kCounter, "Jobs done.");
  metrics.Add("jobs_total", "kind=\"a\"");
  metrics.Add("jobs_total", "kind=\"a\"", 2);
  metrics.Set("depth", "", 4);
  metrics.Observe("latency_seconds", "op=\"x\"", 0.25);
  metrics.Observe("latency_seconds", "op=\"x\"", 0.75);
  metrics.Observe("latency_seconds", "op=\"x\"", 3);
  EXPECT_EQ(metrics.Render("extra 1\n"),
            "# HELP jobs_total Jobs done.\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{kind=\"a\"} 3\n"
            "# TYPE depth gauge\n"
            "depth 4\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{op=\"x\",le=\"0.5\"} 1\n"
            "latency_seconds_bucket{op=\"x\",le=\"1\"} 2\n"
            "latency_seconds_bucket{op=\"x\",le=\"+Inf\"} 3\n"
            "latency_seconds_sum{op=\"x\"} 4\n"
            "latency_seconds_count{op=\"x\"} 3\n"
            "extra 1\n");
}

TEST(MetricsTest, FamiliesKeepTheirDescribedOrderAndEmptyOnesRenderNothing) {
  Metrics metrics({1});
  metrics.Describe("b_total", MetricType::kCounter, "B.");
  metrics.Describe("a_total", MetricType::kCounter, "A.");
  metrics.Describe("unused_total", MetricType::kCounter, "Never used.");
  metrics.Add("a_total", "");
  metrics.Add("b_total", "", 0.125);
  metrics.Observe("h", "", 0.5);
  EXPECT_EQ(metrics.Render(),
            "# HELP b_total B.\n# TYPE b_total counter\nb_total 0.125\n"
            "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5\nh_count 1\n");
}

TEST(MetricsTest, LargeWholeNumbersPrintInFull) {
  Metrics metrics({});
  metrics.Add("tokens_total", "", 12345678901.0);
  EXPECT_EQ(metrics.Render(), "# TYPE tokens_total counter\ntokens_total 12345678901\n");
}

}  // namespace
}  // namespace sinew
