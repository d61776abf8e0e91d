#include "sinew/model/sampling.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

namespace sinew::model {

Status SamplingParams::Validate() const {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 100) {
    return bad("temperature must be in [0, 100]");
  }
  if (top_k < 0) return bad("top_k must be >= 0");
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p must be in (0, 1]");
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p must be in [0, 1]");
  if (!(repetition_penalty > 0 && repetition_penalty <= 100)) {
    return bad("repetition_penalty must be in (0, 100]");
  }
  if (repetition_last_n < -1) return bad("repetition_last_n must be >= -1");
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) {
    return bad("frequency_penalty must be in [-2, 2]");
  }
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) {
    return bad("presence_penalty must be in [-2, 2]");
  }
  if (max_tokens < 1) return bad("max_tokens must be >= 1");
  if (logprobs < 0 || logprobs > 20) return bad("logprobs must be in [0, 20]");
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

void Sampler::Penalize(std::span<float> logits, std::span<const int32_t> history) const {
  const int32_t n_vocab = static_cast<int32_t>(logits.size());
  if (params_.repetition_penalty != 1.0f && !history.empty()) {
    size_t first = 0;
    if (params_.repetition_last_n >= 0 &&
        history.size() > static_cast<size_t>(params_.repetition_last_n)) {
      first = history.size() - static_cast<size_t>(params_.repetition_last_n);
    }
    std::unordered_set<int32_t> seen(history.begin() + static_cast<std::ptrdiff_t>(first),
                                     history.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for (const auto& [id, count] : generated_counts_) {
      if (id < 0 || id >= n_vocab) continue;
      logits[static_cast<size_t>(id)] -=
          params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
    }
  }
}

float LogSumExp(std::span<const float> logits) {
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  return max_logit + static_cast<float>(std::log(sum));
}

int32_t ChooseToken(std::span<const float> logits, const RowSampling& row,
                    std::vector<std::pair<float, int32_t>>& candidates) {
  const int32_t n_vocab = static_cast<int32_t>(logits.size());
  if (row.greedy || row.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  candidates.clear();
  candidates.reserve(logits.size());
  for (int32_t i = 0; i < n_vocab; ++i) candidates.emplace_back(logits[static_cast<size_t>(i)], i);
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates.size();
  if (row.top_k > 0 && static_cast<size_t>(row.top_k) < keep) {
    keep = static_cast<size_t>(row.top_k);
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates.end(), by_logit);
    candidates.resize(keep);
  } else {
    std::sort(candidates.begin(), candidates.end(), by_logit);
  }
  // Softmax with temperature; candidates are sorted, the first is the largest.
  const float top = candidates[0].first;
  double total = 0;
  for (auto& c : candidates) {
    c.first = std::exp((c.first - top) / row.temperature);
    total += c.first;
  }
  for (auto& c : candidates) c.first = static_cast<float>(c.first / total);
  if (row.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < candidates.size()) {
      cum += candidates[n].first;
      ++n;
      if (cum >= row.top_p) break;
    }
    candidates.resize(std::max<size_t>(1, n));
  }
  if (row.min_p > 0.0f) {
    const float threshold = row.min_p * candidates[0].first;
    size_t n = 1;
    while (n < candidates.size() && candidates[n].first >= threshold) ++n;
    candidates.resize(n);
  }
  double mass = 0;
  for (const auto& c : candidates) mass += c.first;
  const double target = row.u * mass;
  double acc = 0;
  for (const auto& c : candidates) {
    acc += c.first;
    if (target < acc) return c.second;
  }
  return candidates.back().second;
}

bool Sampler::SamplesOnDevice() const {
  return params_.repetition_penalty == 1.0f && params_.frequency_penalty == 0.0f &&
         params_.presence_penalty == 0.0f && params_.logprobs == 0;
}

RowSampling Sampler::Row(double draw) const {
  RowSampling row;
  row.greedy = params_.greedy || params_.temperature <= 0;
  row.temperature = params_.temperature;
  row.top_k = params_.top_k;
  row.top_p = params_.top_p;
  row.min_p = params_.min_p;
  row.u = row.greedy ? 0 : draw;
  return row;
}

namespace {
// Uniform in [0, 1) from 53 random bits: identical on every platform.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
}  // namespace

std::vector<double> Sampler::Draws(int32_t n) const {
  std::vector<double> out;
  if (params_.greedy || params_.temperature <= 0) return out;
  std::mt19937_64 copy = rng_;
  for (int32_t i = 0; i < n; ++i) out.push_back(Uniform(copy));
  return out;
}

void Sampler::Took(int32_t token) {
  if (!(params_.greedy || params_.temperature <= 0)) rng_.discard(1);
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    ++generated_counts_[token];
  }
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history,
                        GeneratedToken* out) {
  const int32_t n_vocab = static_cast<int32_t>(logits.size());
  // Model log-probabilities, before any transform.
  const float log_z = LogSumExp(logits);
  logsoftmax_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) logsoftmax_[i] = logits[i] - log_z;

  Penalize(logits, history);
  const bool greedy = params_.greedy || params_.temperature <= 0;
  const int32_t chosen = ChooseToken(logits, Row(greedy ? 0 : Uniform(rng_)), candidates_);

  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    ++generated_counts_[chosen];
  }
  out->id = chosen;
  out->logprob = logsoftmax_[static_cast<size_t>(chosen)];
  out->top_logprobs.clear();
  if (params_.logprobs > 0) {
    candidates_.clear();
    for (int32_t i = 0; i < n_vocab; ++i) {
      candidates_.emplace_back(logsoftmax_[static_cast<size_t>(i)], i);
    }
    const size_t n = std::min<size_t>(static_cast<size_t>(params_.logprobs), candidates_.size());
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                      candidates_.end(), [](const auto& a, const auto& b) {
                        return a.first > b.first || (a.first == b.first && a.second < b.second);
                      });
    for (size_t i = 0; i < n; ++i) {
      out->top_logprobs.push_back(TokenLogprob{candidates_[i].second, candidates_[i].first});
    }
  }
  return chosen;
}

}  // namespace sinew::model
