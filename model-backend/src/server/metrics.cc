#include "metrics.h"

#include <cstdio>

namespace sinew::model {
namespace {

std::string Number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}

}  // namespace

void Metrics::Histogram::Observe(double value) {
  for (size_t index = 0; index < kBuckets.size(); ++index) {
    if (value <= kBuckets[index]) ++counts[index];
  }
  ++count;
  sum += value;
}

void Metrics::Histogram::Render(const std::string& name, const std::string& labels,
                                std::string& out) const {
  std::string prefix = labels.empty() ? "" : labels + ",";
  for (size_t index = 0; index < kBuckets.size(); ++index) {
    out += name + "_bucket{" + prefix + "le=\"" + Number(kBuckets[index]) + "\"} " +
           std::to_string(counts[index]) + "\n";
  }
  out += name + "_bucket{" + prefix + "le=\"+Inf\"} " + std::to_string(count) + "\n";
  std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + Number(sum) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count) + "\n";
}

void Metrics::RecordRequest(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
  request_seconds_[endpoint].Observe(seconds);
}

void Metrics::RecordGeneration(int64_t prompt_tokens, int64_t generated_tokens,
                               double time_to_first_token_s, double generation_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generated_tokens_ += static_cast<uint64_t>(generated_tokens);
  first_token_seconds_.Observe(time_to_first_token_s);
  generation_seconds_ += generation_s;
}

void Metrics::SetQueueDepth(int64_t depth) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_depth_ = depth;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out += "# HELP sinew_model_requests_total Finished requests by endpoint and status code.\n";
  out += "# TYPE sinew_model_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += "sinew_model_requests_total{endpoint=\"" + key.first + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  out += "# HELP sinew_model_request_duration_seconds Request latency by endpoint.\n";
  out += "# TYPE sinew_model_request_duration_seconds histogram\n";
  for (const auto& [endpoint, histogram] : request_seconds_) {
    histogram.Render("sinew_model_request_duration_seconds", "endpoint=\"" + endpoint + "\"", out);
  }
  out +=
      "# HELP sinew_model_time_to_first_token_seconds Prompt processing time until the first "
      "token.\n";
  out += "# TYPE sinew_model_time_to_first_token_seconds histogram\n";
  first_token_seconds_.Render("sinew_model_time_to_first_token_seconds", "", out);
  out += "# HELP sinew_model_prompt_tokens_total Prompt tokens processed.\n";
  out += "# TYPE sinew_model_prompt_tokens_total counter\n";
  out += "sinew_model_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  out += "# HELP sinew_model_generated_tokens_total Tokens generated.\n";
  out += "# TYPE sinew_model_generated_tokens_total counter\n";
  out += "sinew_model_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  out +=
      "# HELP sinew_model_generation_seconds_total Time spent generating after the first token.\n";
  out += "# TYPE sinew_model_generation_seconds_total counter\n";
  out += "sinew_model_generation_seconds_total " + Number(generation_seconds_) + "\n";
  out += "# HELP sinew_model_queue_depth Generations waiting or running.\n";
  out += "# TYPE sinew_model_queue_depth gauge\n";
  out += "sinew_model_queue_depth " + std::to_string(queue_depth_) + "\n";
  if (serving_stats_) RenderServing(serving_stats_(), out);
  if (!device_.empty()) {
    out += "# HELP sinew_model_device_info The device and backend the model runs on.\n";
    out += "# TYPE sinew_model_device_info gauge\n";
    out += "sinew_model_device_info{device=\"" + device_ + "\",backend=\"" + backend_ + "\"} 1\n";
  }
  return out;
}

void Metrics::SetDevice(std::string device, std::string backend) {
  device_ = std::move(device);
  backend_ = std::move(backend);
}

void Metrics::SetServingStats(std::function<ServingStats()> source) {
  std::lock_guard<std::mutex> lock(mutex_);
  serving_stats_ = std::move(source);
}

void Metrics::RenderServing(const ServingStats& s, std::string& out) {
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  metric("sinew_model_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens whose KV came from the prefix cache.", s.prefix_hit_tokens);
  metric("sinew_model_prefix_cache_miss_tokens_total", "counter",
         "Prompt tokens that had to be computed.", s.prefix_miss_tokens);
  metric("sinew_model_preemptions_total", "counter",
         "Generations preempted when KV blocks ran out (swapped out or recomputed later).",
         s.preemptions);
  metric("sinew_model_kv_swap_outs_total", "counter",
         "Preemptions that swapped the generation's KV out to host memory.", s.swap_outs);
  metric("sinew_model_kv_swap_in_tokens_total", "counter",
         "Positions whose KV came back from the swap space instead of being recomputed.",
         s.swap_in_tokens);
  metric("sinew_model_batch_steps_total", "counter", "Batched forward steps.", s.steps);
  metric("sinew_model_step_graph_captures_total", "counter",
         "Decode steps captured into a step graph (CUDA graphs, one per batch bucket).",
         s.step_graph_captures);
  metric("sinew_model_step_graph_replays_total", "counter",
         "Decode steps run by replaying a captured step graph.", s.step_graph_replays);
  metric("sinew_model_step_graph_misses_total", "counter",
         "Replays whose step no longer matched its graph (run directly, captured again).",
         s.step_graph_misses);
  metric("sinew_model_overlapped_steps_total", "counter",
         "Steps planned and queued while the step before them ran (step overlap).",
         s.overlapped_steps);
  metric("sinew_model_overlap_dropped_rows_total", "counter",
         "Rows an overlapped step computed for generations the step before it finished.",
         s.overlap_dropped_rows);
  metric("sinew_model_backend_sampled_tokens_total", "counter",
         "Tokens sampled by the backend (on a GPU: only the token came back, not the logits).",
         s.backend_sampled_tokens);
  metric("sinew_model_host_sampled_tokens_total", "counter",
         "Tokens sampled on the host from logits read back (penalties, top_logprobs, or "
         "--no-device-sampling).",
         s.host_sampled_tokens);
  metric("sinew_model_batch_tokens_total", "counter", "Tokens run in batched steps.",
         s.step_tokens);
  metric("sinew_model_spec_verifications_total", "counter",
         "Decodes that carried a draft (speculative decoding).", s.spec_verifications);
  metric("sinew_model_spec_draft_tokens_total", "counter",
         "Tokens drafted, by prompt lookup or the draft model.", s.spec_drafted_tokens);
  metric("sinew_model_spec_accepted_tokens_total", "counter",
         "Drafted tokens that equalled the sampled ones.", s.spec_accepted_tokens);
  metric("sinew_model_spec_emitted_tokens_total", "counter",
         "Tokens produced by decodes that carried a draft.", s.spec_emitted_tokens);
  metric("sinew_model_spec_model_draft_tokens_total", "counter",
         "Tokens drafted by the draft model (--draft-model).", s.spec_model_drafted_tokens);
  metric("sinew_model_spec_model_accepted_tokens_total", "counter",
         "Draft-model tokens that equalled the sampled ones.", s.spec_model_accepted_tokens);
  metric("sinew_model_spec_model_prefix_hit_tokens_total", "counter",
         "Tokens whose draft-model KV came from its prefix cache.",
         s.spec_model_prefix_hit_tokens);
  auto ratio = [&out](const char* name, const char* help, double value) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.6g", value);
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name +
           " " + text + "\n";
  };
  ratio("sinew_model_spec_acceptance_ratio",
        "Accepted / drafted tokens since start (0 before any draft).",
        s.spec_drafted_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) /
                                        static_cast<double>(s.spec_drafted_tokens)
                                  : 0.0);
  ratio("sinew_model_spec_tokens_per_verification",
        "Tokens per forward pass of the decodes that carried a draft (plain decoding: 1).",
        s.spec_verifications > 0 ? static_cast<double>(s.spec_emitted_tokens) /
                                       static_cast<double>(s.spec_verifications)
                                 : 0.0);
  metric("sinew_model_kv_blocks", "gauge", "Paged KV cache blocks.",
         static_cast<uint64_t>(s.blocks_total));
  metric("sinew_model_kv_blocks_available", "gauge", "KV blocks free or evictable.",
         static_cast<uint64_t>(s.blocks_available));
  metric("sinew_model_kv_blocks_used", "gauge",
         "KV blocks held by generations (not free, not evictable).",
         static_cast<uint64_t>(s.blocks_total - s.blocks_available));
  metric("sinew_model_kv_swap_slots", "gauge", "KV blocks the host swap space holds.",
         static_cast<uint64_t>(s.swap_slots_total));
  metric("sinew_model_kv_swap_slots_used", "gauge",
         "Swap slots holding the KV of preempted generations.",
         static_cast<uint64_t>(s.swap_slots_used));
  metric("sinew_model_running_sequences", "gauge", "Generations in the running batch.",
         static_cast<uint64_t>(s.running));
  metric("sinew_model_waiting_sequences", "gauge", "Generations waiting for admission.",
         static_cast<uint64_t>(s.waiting));
}

}  // namespace sinew::model
