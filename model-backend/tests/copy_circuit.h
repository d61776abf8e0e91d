// The weights of a llama model whose greedy output continues its context the way it
// went before: a hand-set two-layer induction circuit, for measuring speculative
// decoding on an edit turn (an agent re-emitting a file from its context) where no
// real instruction model is available. Only the weights are set by hand; the model is
// an ordinary llama GGUF of the given shape, read by any engine (llama.cpp included),
// and costs what a random-weight model of that shape costs.
//
// The circuit (E = n_embd, codes of kCodeDims random +-1 values per token):
// - the embedding holds the token's code and a constant;
// - layer 0: five heads attend to the token 1 to 5 places back by RoPE phase alone
//   (their queries and keys are the constant; rope_freqs leave the first 8 frequency
//   pairs and stop the rest) and copy 48 values of that token's code into five slots
//   of the residual;
// - layer 1: each of four heads matches 9 code values of each of the last five tokens
//   (current and four back) against each earlier position's five predecessors in the
//   unrotated dimensions, and three of them copy 64 values each of the matched
//   position's code into an output slot;
// - the output matrix reads that slot: the greedy token is what followed the same
//   five tokens earlier in the context (where they occur more than once, whichever
//   the heads' scores favour).
// Every other weight is zero (norms one), so the other layers pass the residual on.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "random_model.h"
#include "sinew/status.h"

namespace sinew::model::testing {

// InvalidArgument unless `spec` has the shape the circuit needs: llama, head_dim 64,
// 4 KV heads and 8 or more heads, full RoPE, n_embd >= 704, at least 2 layers.
[[nodiscard]] Status CheckCopyCircuitSpec(const RandomModelSpec& spec);

// The values of tensor `name` (n rows of k, row-major) in the circuit.
std::vector<float> CopyCircuitTensor(const RandomModelSpec& spec, const std::string& name,
                                     int64_t k, int64_t n);

}  // namespace sinew::model::testing
