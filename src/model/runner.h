#pragma once
// The contract between the engine and a model on a backend (CPU or CUDA).
//
// The engine decides which tokens of which sequences run in a step and where their K/V
// live in the paged cache; a Runner executes that batch and returns logits. A Runner owns
// its KV cache memory: `kv_layout()` says how many blocks of which size it holds, and the
// engine's block manager hands out those block ids.
//
// Paged KV layout (per layer, K and V separately):
//   [num_blocks, block_size, num_kv_heads, head_dim]
// Slot s = block_id * block_size + offset addresses one token's K (or V) vector per head.
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/sampling_knobs.h"

namespace tandem::model {

using TokenId = int32_t;
using BlockId = int32_t;

struct ForwardBatch {
  // New tokens of all sequences, concatenated; sequence s owns rows
  // [query_start[s], query_start[s+1]). A decode step has one row per sequence; a prefill
  // chunk has many. Rows of one sequence are consecutive positions.
  std::vector<TokenId> tokens;        // [T]
  std::vector<int32_t> positions;     // [T] absolute position of each new token
  std::vector<int32_t> query_start;   // [S+1]
  std::vector<int32_t> context_lens;  // [S] tokens in the cache for s once this step ran
  std::vector<BlockId> block_tables;  // [S * max_blocks], row s = blocks of s, padded with -1
  int32_t max_blocks = 0;
  std::vector<int64_t> slot_mapping;  // [T] slot receiving each new token's K/V
  std::vector<int32_t> logit_rows;    // rows of [T] whose logits are returned, in this order

  int num_seqs() const { return int(query_start.empty() ? 0 : query_start.size() - 1); }
  int num_tokens() const { return int(tokens.size()); }
};

// What one cached K (or V) vector is stored as. kFp8: e4m3 codes plus one fp32 scale per
// (token, KV head) vector, amax / 448 (core/fp8.h): a little over half the bytes of bf16, so
// about 1.9x the tokens in the same memory and half the bytes a decode step reads, for
// e4m3's 3 mantissa bits.
enum class KvCacheDtype { kBf16, kFp8 };

inline const char* kv_cache_dtype_name(KvCacheDtype d) {
  return d == KvCacheDtype::kFp8 ? "fp8" : "bf16";
}
// "bf16" (also "auto") or "fp8" (also "fp8_e4m3"); anything else is an invalid argument.
inline KvCacheDtype parse_kv_cache_dtype(const std::string& s) {
  if (s == "bf16" || s == "auto") return KvCacheDtype::kBf16;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::kFp8;
  fail(ErrorKind::kInvalidArgument, "unknown KV cache dtype '{}' (supported: bf16, fp8)", s);
}

// What the products' weights (q/k/v/o/gate/up/down) run as. kAuto: as the checkpoint holds
// them (bf16, or FP8 for a Qwen3 FP8 checkpoint); kFp8: bf16 weights quantized at load to
// e4m3 in 128 x 128 blocks (core/fp8.h), half the bytes and the FP8 tensor cores (CUDA on
// Hopper); kBf16: bf16 (an FP8 checkpoint is then refused).
enum class WeightDtype { kAuto, kBf16, kFp8 };

// "auto", "bf16" (also "none") or "fp8"; anything else is an invalid argument.
inline WeightDtype parse_weight_dtype(const std::string& s) {
  if (s == "auto") return WeightDtype::kAuto;
  if (s == "bf16" || s == "none") return WeightDtype::kBf16;
  if (s == "fp8") return WeightDtype::kFp8;
  fail(ErrorKind::kInvalidArgument, "unknown weight quantization '{}' (supported: auto, bf16, fp8)",
       s);
}

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  int num_blocks = 0;   // blocks available to the engine
  KvCacheDtype dtype = KvCacheDtype::kBf16;
};

// How to pick the token of one logit row on the runner's side (forward_sample). The same
// rules as engine::sample (src/engine/sampler.h): penalties, then temperature 0 (or
// top_k 1) means argmax; otherwise temperature, top-k, top-p over what top-k kept, min-p,
// and `uniform` mapped to a token through the order "larger logit first, then smaller id".
// The repetition penalty applies over the whole window, presence and frequency over its
// output part.
struct RowSampling : SamplingKnobs {
  double uniform = 0.0;  // the draw in [0, 1), taken by the caller from the sequence's RNG
  // The penalty window: penalty_tokens[penalty_offset, penalty_offset + penalty_count), the
  // last tokens of the sequence in order; its last `penalty_output` tokens are output tokens.
  // Empty when the row has no penalties.
  int32_t penalty_offset = 0, penalty_count = 0, penalty_output = 0;
};

// Token masks for the runner's own sampling (forward_greedy, forward_sample): logit row r
// may pick token t only when bit t % 32 of word t / 32 of mask mask_of_row[r] is set
// (mask_of_row[r] < 0: no mask). The host computes the masks while the device runs the
// step: wait() returns them ([masks, words] words, ready once it returns) and is called at
// most once, right before the sampler needs them.
struct TokenMasks {
  int words = 0;
  std::vector<int32_t> mask_of_row;
  std::function<const uint32_t*()> wait;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual int vocab_size() const = 0;
  virtual int max_model_len() const = 0;
  virtual KvLayout kv_layout() const = 0;
  virtual std::string name() const = 0;
  // The step size (tokens in all) that steps with decodes should fill with prefill chunks
  // when the engine is left to choose (EngineOptions::decode_step_tokens < 0): where this
  // backend's step cost jumps. 0: none (prefill fills the step budget).
  virtual int step_knee() const { return 0; }
  // Runs one step. `logits` receives [batch.logit_rows.size(), vocab_size()] fp32 rows.
  // Throws tandem::Error on invalid batches (a bug in the caller) or device failure.
  virtual void forward(const ForwardBatch& batch, std::span<float> logits) = 0;

  // Optional fast path for steps whose every sampled row is greedy with nothing else asked
  // (no penalties, no logprobs): instead of logits, `tokens` receives the argmax (first
  // maximal id) of each of `batch.logit_rows`, so the vocabulary-wide rows never leave the
  // device. The engine calls it only when supports_greedy() is true.
  virtual bool supports_greedy() const { return false; }
  virtual void forward_greedy(const ForwardBatch& batch, std::span<TokenId> tokens) {
    (void)batch;
    (void)tokens;
    throw std::logic_error("forward_greedy: not supported by this runner");
  }

  // Optional: the whole sampler on the runner's side. `rows[i]` says how to pick the token of
  // `batch.logit_rows[i]` (greedy rows allowed); `tokens` receives one id per row. Log-
  // probabilities are not computed. The engine calls it only when supports_sampling().
  virtual bool supports_sampling() const { return false; }
  // Optional: masks applied by forward_greedy / forward_sample until cleared (null).
  virtual bool supports_token_masks() const { return false; }
  virtual void set_token_masks(const TokenMasks* masks) { (void)masks; }
  virtual void forward_sample(const ForwardBatch& batch, std::span<const RowSampling> rows,
                              std::span<const TokenId> penalty_tokens, std::span<TokenId> tokens) {
    (void)batch;
    (void)rows;
    (void)penalty_tokens;
    (void)tokens;
    throw std::logic_error("forward_sample: not supported by this runner");
  }
};

}  // namespace tandem::model
