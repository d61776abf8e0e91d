// The selection of BackendOps::SampleRows (backend.h) as a fixed sequence of
// reductions over one row of logits, so that a GPU thread block runs it without
// sorting the vocabulary, and a host test runs the very same code.
//
// The tokens in RowSampling's order (larger logit first, lower id first on
// ties) are the tokens in ascending order of their Key. Every prefix that
// ChooseToken (sampling.h) cuts from that order — top-k by count, top-p and the
// draw by running sum of probabilities — is found by a radix descent over the
// keys: 4 bits per round, a 16-bucket histogram (count and probability) of the
// tokens still in play, keeping the bucket where the running total crosses the
// bound. Probabilities are computed per token exactly as ChooseToken computes
// them; sums are in double but in the reduction's order, not in sorted order,
// so a draw within rounding of a bucket boundary may pick the neighbour of
// ChooseToken's token. Masked tokens are never in play.
//
// `Block` runs one reduction at a time: Reduce<Acc>(n, map) calls map(i, acc)
// for tokens 0..n-1 spread over its threads (thread t takes t, t + T, ...),
// combines the threads' accumulators in a fixed tree (Acc::Combine) and gives
// every thread the total. The CUDA kernel's Block is a thread block
// (cuda/sample.cu); HostBlock below runs the same loop and tree over virtual
// threads, for tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sinew/model/backend.h"

#ifdef __CUDACC__
#define SINEW_HD __host__ __device__
#else
#define SINEW_HD
#endif

namespace sinew::model::select {

// Ascending with the value; -0 and +0 are one value.
SINEW_HD inline uint32_t Ordered(float x) {
  uint32_t u = 0;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof u);
#endif
  if (x == 0.0f) u = 0;
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// Ascending keys: larger logits first, then lower ids.
SINEW_HD inline uint64_t Key(float logit, int32_t id, int index_bits) {
  return (static_cast<uint64_t>(~Ordered(logit)) << index_bits) | static_cast<uint32_t>(id);
}

// The largest logit, the lowest id among equals.
struct MaxAcc {
  float v = -INFINITY;
  int32_t id = -1;
  SINEW_HD void Add(float x, int32_t i) {
    if (id < 0 || x > v || (x == v && i < id)) {
      v = x;
      id = i;
    }
  }
  SINEW_HD void Combine(const MaxAcc& o) {
    if (o.id >= 0) Add(o.v, o.id);
  }
};

struct SumAcc {
  double s = 0;
  SINEW_HD void Combine(const SumAcc& o) { s += o.s; }
};

struct KeyMaxAcc {
  uint64_t key = 0;
  bool any = false;
  SINEW_HD void Add(uint64_t k) {
    if (!any || k > key) key = k;
    any = true;
  }
  SINEW_HD void Combine(const KeyMaxAcc& o) {
    if (o.any) Add(o.key);
  }
};

struct HistAcc {
  double w[16] = {};
  uint32_t c[16] = {};
  SINEW_HD void Combine(const HistAcc& o) {
    for (int j = 0; j < 16; ++j) {
      w[j] += o.w[j];
      c[j] += o.c[j];
    }
  }
};

// The largest accumulator, for a Block's shared memory.
constexpr size_t kMaxAccBytes = sizeof(HistAcc);

// The smallest key K among the tokens in play whose running total (weights of
// the tokens in play with keys <= K) is >= bound (strict: > bound). Returns
// false if the total of all of them stays below. A lower round that finds no
// crossing (rounding: its buckets sum to a little less than their parent did)
// takes its last non-empty bucket.
template <class Block, class InPlay, class Weight>
SINEW_HD bool Descend(Block& b, int32_t n, int index_bits, InPlay in_play, Weight weight,
                      double bound, bool strict, uint64_t* out) {
  const int key_bits = 32 + index_bits;
  const int rounds = (key_bits + 3) / 4;
  uint64_t prefix = 0;  // the key's digits above the current round
  double below = 0;     // total of the tokens in play with smaller keys than the prefix's
  for (int round = rounds - 1; round >= 0; --round) {
    const int shift = 4 * round;
    const HistAcc h = b.template Reduce<HistAcc>(n, [&](int32_t i, HistAcc& a) {
      uint64_t k = 0;
      if (!in_play(i, &k)) return;
      if ((k >> (shift + 4)) != prefix) return;
      const int digit = static_cast<int>((k >> shift) & 15u);
      a.w[digit] += weight(i);
      a.c[digit] += 1;
    });
    int chosen = -1, last = -1;
    double running = below, before_last = below;
    for (int j = 0; j < 16; ++j) {
      if (h.c[j] == 0) continue;
      const double next = running + h.w[j];
      if (strict ? next > bound : next >= bound) {
        chosen = j;
        break;
      }
      last = j;
      before_last = running;
      running = next;
    }
    if (chosen < 0) {
      if (round == rounds - 1 || last < 0) return false;
      chosen = last;
      running = before_last;
    }
    below = running;
    prefix = (prefix << 4) | static_cast<uint64_t>(chosen);
  }
  *out = prefix;
  return true;
}

// The token of one row (see the top of this file): logits[0..n), mask null
// (all allowed) or MaskWords(n) words.
template <class Block>
SINEW_HD SampledToken SelectToken(Block& b, const float* logits, int32_t n, const uint32_t* mask,
                                  const RowSampling& r) {
  auto allowed = [&](int32_t i) { return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u); };
  const MaxAcc top = b.template Reduce<MaxAcc>(n, [&](int32_t i, MaxAcc& a) {
    if (allowed(i)) a.Add(logits[i], i);
  });
  if (top.id < 0) return SampledToken{};
  // Log-probabilities as Sampler computes them (LogSumExp of the masked row).
  const SumAcc z = b.template Reduce<SumAcc>(n, [&](int32_t i, SumAcc& a) {
    if (allowed(i)) a.s += exp(static_cast<double>(logits[i] - top.v));
  });
  const float log_z = top.v + static_cast<float>(log(z.s));
  auto result = [&](int32_t id) { return SampledToken{id, logits[id] - log_z}; };
  if (r.greedy || r.temperature <= 0) return result(top.id);

  int index_bits = 1;
  while (index_bits < 31 && (int64_t{1} << index_bits) < n) ++index_bits;
  const float t = r.temperature;
  // The prefix cuts, as key limits (~0: none).
  uint64_t k_limit = ~uint64_t{0}, p_limit = ~uint64_t{0};
  float min_prob = 0;  // min-p: a probability threshold
  double total = 1;    // the softmax's denominator over the top-k tokens
  auto prob = [&](int32_t i) {
    return static_cast<float>(static_cast<double>(expf((logits[i] - top.v) / t)) / total);
  };
  auto top_k_in = [&](int32_t i, uint64_t* k) {
    if (!allowed(i)) return false;
    *k = Key(logits[i], i, index_bits);
    return *k <= k_limit;
  };
  auto kept = [&](int32_t i, uint64_t* k) {
    return top_k_in(i, k) && *k <= p_limit && (min_prob <= 0 || prob(i) >= min_prob);
  };
  if (r.top_k > 0 && r.top_k < n) {
    uint64_t k = 0;
    if (Descend(
            b, n, index_bits, top_k_in, [](int32_t) { return 1.0; }, static_cast<double>(r.top_k),
            false, &k)) {
      k_limit = k;
    }
  }
  const SumAcc weights = b.template Reduce<SumAcc>(n, [&](int32_t i, SumAcc& a) {
    uint64_t k = 0;
    if (top_k_in(i, &k)) a.s += static_cast<double>(expf((logits[i] - top.v) / t));
  });
  total = weights.s;
  if (r.top_p < 1.0f) {
    uint64_t k = 0;
    if (Descend(
            b, n, index_bits, top_k_in, [&](int32_t i) { return static_cast<double>(prob(i)); },
            static_cast<double>(r.top_p), false, &k)) {
      p_limit = k;
    }
  }
  if (r.min_p > 0.0f) min_prob = r.min_p * prob(top.id);
  const SumAcc mass = b.template Reduce<SumAcc>(n, [&](int32_t i, SumAcc& a) {
    uint64_t k = 0;
    if (kept(i, &k)) a.s += static_cast<double>(prob(i));
  });
  uint64_t chosen = 0;
  if (!Descend(
          b, n, index_bits, kept, [&](int32_t i) { return static_cast<double>(prob(i)); },
          r.u * mass.s, true, &chosen)) {
    const KeyMaxAcc last = b.template Reduce<KeyMaxAcc>(n, [&](int32_t i, KeyMaxAcc& a) {
      uint64_t k = 0;
      if (kept(i, &k)) a.Add(k);
    });
    chosen = last.key;
  }
  return result(static_cast<int32_t>(chosen & ((uint64_t{1} << index_bits) - 1)));
}

#ifndef __CUDACC__
// The Block of a host run: `threads` virtual threads, the kernel's loop and tree.
struct HostBlock {
  int threads = 128;
  template <class Acc, class Map>
  Acc Reduce(int32_t n, Map map) {
    std::vector<Acc> part(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      for (int32_t i = t; i < n; i += threads) map(i, part[static_cast<size_t>(t)]);
    }
    for (int stride = threads / 2; stride > 0; stride >>= 1) {
      for (int t = 0; t < stride; ++t) {
        part[static_cast<size_t>(t)].Combine(part[static_cast<size_t>(t + stride)]);
      }
    }
    return part[0];
  }
};
#endif

}  // namespace sinew::model::select
