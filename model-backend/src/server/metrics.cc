#include "metrics.h"

namespace sinew::model {
namespace {

constexpr const char* kRequests = "sinew_model_requests_total";
constexpr const char* kRequestSeconds = "sinew_model_request_duration_seconds";
constexpr const char* kFirstTokenSeconds = "sinew_model_time_to_first_token_seconds";
constexpr const char* kPromptTokens = "sinew_model_prompt_tokens_total";
constexpr const char* kGeneratedTokens = "sinew_model_generated_tokens_total";
constexpr const char* kGenerationSeconds = "sinew_model_generation_seconds_total";
constexpr const char* kQueueDepth = "sinew_model_queue_depth";
constexpr const char* kDeviceInfo = "sinew_model_device_info";

// The serving engine's counters and gauges, read at each scrape.
struct ServingMetric {
  const char* name;
  MetricType type;
  const char* help;
  double (*value)(const ServingStats&);
};
const ServingMetric kServingMetrics[] = {
    {"sinew_model_prefix_cache_hit_tokens_total", MetricType::kCounter,
     "Prompt tokens whose KV came from the prefix cache.",
     [](const ServingStats& s) { return static_cast<double>(s.prefix_hit_tokens); }},
    {"sinew_model_prefix_cache_miss_tokens_total", MetricType::kCounter,
     "Prompt tokens that had to be computed.",
     [](const ServingStats& s) { return static_cast<double>(s.prefix_miss_tokens); }},
    {"sinew_model_preemptions_total", MetricType::kCounter,
     "Generations preempted when KV blocks ran out (swapped out or recomputed later).",
     [](const ServingStats& s) { return static_cast<double>(s.preemptions); }},
    {"sinew_model_kv_swap_outs_total", MetricType::kCounter,
     "Preemptions that swapped the generation's KV out to host memory.",
     [](const ServingStats& s) { return static_cast<double>(s.swap_outs); }},
    {"sinew_model_kv_swap_in_tokens_total", MetricType::kCounter,
     "Positions whose KV came back from the swap space instead of being recomputed.",
     [](const ServingStats& s) { return static_cast<double>(s.swap_in_tokens); }},
    {"sinew_model_batch_steps_total", MetricType::kCounter, "Batched forward steps.",
     [](const ServingStats& s) { return static_cast<double>(s.steps); }},
    {"sinew_model_step_graph_captures_total", MetricType::kCounter,
     "Decode steps captured into a step graph (CUDA graphs, one per batch bucket).",
     [](const ServingStats& s) { return static_cast<double>(s.step_graph_captures); }},
    {"sinew_model_step_graph_replays_total", MetricType::kCounter,
     "Decode steps run by replaying a captured step graph.",
     [](const ServingStats& s) { return static_cast<double>(s.step_graph_replays); }},
    {"sinew_model_step_graph_misses_total", MetricType::kCounter,
     "Replays whose step no longer matched its graph (run directly, captured again).",
     [](const ServingStats& s) { return static_cast<double>(s.step_graph_misses); }},
    {"sinew_model_overlapped_steps_total", MetricType::kCounter,
     "Steps planned and queued while the step before them ran (step overlap).",
     [](const ServingStats& s) { return static_cast<double>(s.overlapped_steps); }},
    {"sinew_model_overlap_dropped_rows_total", MetricType::kCounter,
     "Rows an overlapped step computed for generations the step before it finished.",
     [](const ServingStats& s) { return static_cast<double>(s.overlap_dropped_rows); }},
    {"sinew_model_backend_sampled_tokens_total", MetricType::kCounter,
     "Tokens sampled by the backend (on a GPU: only the token came back, not the logits).",
     [](const ServingStats& s) { return static_cast<double>(s.backend_sampled_tokens); }},
    {"sinew_model_host_sampled_tokens_total", MetricType::kCounter,
     "Tokens sampled on the host from logits read back (penalties, top_logprobs, or "
     "--no-device-sampling).",
     [](const ServingStats& s) { return static_cast<double>(s.host_sampled_tokens); }},
    {"sinew_model_batch_tokens_total", MetricType::kCounter, "Tokens run in batched steps.",
     [](const ServingStats& s) { return static_cast<double>(s.step_tokens); }},
    {"sinew_model_spec_verifications_total", MetricType::kCounter,
     "Decodes that carried a draft (speculative decoding).",
     [](const ServingStats& s) { return static_cast<double>(s.spec_verifications); }},
    {"sinew_model_spec_draft_tokens_total", MetricType::kCounter,
     "Tokens drafted, by prompt lookup or the draft model.",
     [](const ServingStats& s) { return static_cast<double>(s.spec_drafted_tokens); }},
    {"sinew_model_spec_accepted_tokens_total", MetricType::kCounter,
     "Drafted tokens that equalled the sampled ones.",
     [](const ServingStats& s) { return static_cast<double>(s.spec_accepted_tokens); }},
    {"sinew_model_spec_emitted_tokens_total", MetricType::kCounter,
     "Tokens produced by decodes that carried a draft.",
     [](const ServingStats& s) { return static_cast<double>(s.spec_emitted_tokens); }},
    {"sinew_model_spec_model_draft_tokens_total", MetricType::kCounter,
     "Tokens drafted by the draft model (--draft-model).",
     [](const ServingStats& s) { return static_cast<double>(s.spec_model_drafted_tokens); }},
    {"sinew_model_spec_model_accepted_tokens_total", MetricType::kCounter,
     "Draft-model tokens that equalled the sampled ones.",
     [](const ServingStats& s) { return static_cast<double>(s.spec_model_accepted_tokens); }},
    {"sinew_model_spec_model_prefix_hit_tokens_total", MetricType::kCounter,
     "Tokens whose draft-model KV came from its prefix cache.",
     [](const ServingStats& s) { return static_cast<double>(s.spec_model_prefix_hit_tokens); }},
    {"sinew_model_spec_acceptance_ratio", MetricType::kGauge,
     "Accepted / drafted tokens since start (0 before any draft).",
     [](const ServingStats& s) {
       return s.spec_drafted_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) /
                                              static_cast<double>(s.spec_drafted_tokens)
                                        : 0.0;
     }},
    {"sinew_model_spec_tokens_per_verification", MetricType::kGauge,
     "Tokens per forward pass of the decodes that carried a draft (plain decoding: 1).",
     [](const ServingStats& s) {
       return s.spec_verifications > 0 ? static_cast<double>(s.spec_emitted_tokens) /
                                             static_cast<double>(s.spec_verifications)
                                       : 0.0;
     }},
    {"sinew_model_kv_blocks", MetricType::kGauge, "Paged KV cache blocks.",
     [](const ServingStats& s) { return static_cast<double>(s.blocks_total); }},
    {"sinew_model_kv_blocks_available", MetricType::kGauge, "KV blocks free or evictable.",
     [](const ServingStats& s) { return static_cast<double>(s.blocks_available); }},
    {"sinew_model_kv_blocks_used", MetricType::kGauge,
     "KV blocks held by generations (not free, not evictable).",
     [](const ServingStats& s) {
       return static_cast<double>(s.blocks_total - s.blocks_available);
     }},
    {"sinew_model_kv_swap_slots", MetricType::kGauge, "KV blocks the host swap space holds.",
     [](const ServingStats& s) { return static_cast<double>(s.swap_slots_total); }},
    {"sinew_model_kv_swap_slots_used", MetricType::kGauge,
     "Swap slots holding the KV of preempted generations.",
     [](const ServingStats& s) { return static_cast<double>(s.swap_slots_used); }},
    {"sinew_model_running_sequences", MetricType::kGauge, "Generations in the running batch.",
     [](const ServingStats& s) { return static_cast<double>(s.running); }},
    {"sinew_model_waiting_sequences", MetricType::kGauge, "Generations waiting for admission.",
     [](const ServingStats& s) { return static_cast<double>(s.waiting); }},
};

}  // namespace

Metrics::Metrics()
    : metrics_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0}) {
  metrics_.Describe(kRequests, MetricType::kCounter,
                    "Finished requests by endpoint and status code.");
  metrics_.Describe(kRequestSeconds, MetricType::kHistogram, "Request latency by endpoint.");
  metrics_.Describe(kFirstTokenSeconds, MetricType::kHistogram,
                    "Prompt processing time until the first token.");
  metrics_.Describe(kPromptTokens, MetricType::kCounter, "Prompt tokens processed.");
  metrics_.Describe(kGeneratedTokens, MetricType::kCounter, "Tokens generated.");
  metrics_.Describe(kGenerationSeconds, MetricType::kCounter,
                    "Time spent generating after the first token.");
  metrics_.Describe(kQueueDepth, MetricType::kGauge, "Generations waiting or running.");
  for (const auto& metric : kServingMetrics)
    metrics_.Describe(metric.name, metric.type, metric.help);
  metrics_.Describe(kDeviceInfo, MetricType::kGauge, "The device and backend the model runs on.");
  metrics_.Add(kPromptTokens, "", 0);
  metrics_.Add(kGeneratedTokens, "", 0);
  metrics_.Add(kGenerationSeconds, "", 0);
  metrics_.Set(kQueueDepth, "", 0);
}

void Metrics::RecordRequest(const std::string& endpoint, int status, double seconds) {
  const std::string labels = "endpoint=\"" + endpoint + "\"";
  metrics_.Add(kRequests, labels + ",code=\"" + std::to_string(status) + "\"");
  metrics_.Observe(kRequestSeconds, labels, seconds);
}

void Metrics::RecordGeneration(int64_t prompt_tokens, int64_t generated_tokens,
                               double time_to_first_token_s, double generation_s) {
  metrics_.Add(kPromptTokens, "", static_cast<double>(prompt_tokens));
  metrics_.Add(kGeneratedTokens, "", static_cast<double>(generated_tokens));
  metrics_.Observe(kFirstTokenSeconds, "", time_to_first_token_s);
  metrics_.Add(kGenerationSeconds, "", generation_s);
}

void Metrics::SetQueueDepth(int64_t depth) {
  metrics_.Set(kQueueDepth, "", static_cast<double>(depth));
}

void Metrics::SetServingStats(std::function<ServingStats()> source) {
  serving_stats_ = std::move(source);
}

void Metrics::SetDevice(std::string device, std::string backend) {
  metrics_.Set(kDeviceInfo, "device=\"" + device + "\",backend=\"" + backend + "\"", 1);
}

std::string Metrics::Render() {
  if (serving_stats_) {
    const ServingStats stats = serving_stats_();
    for (const auto& metric : kServingMetrics) metrics_.Set(metric.name, "", metric.value(stats));
  }
  return metrics_.Render();
}

}  // namespace sinew::model
