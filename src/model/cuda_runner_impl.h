#pragma once
// The CUDA runner's class, shared by its source files (cuda_runner.cpp: memory, the forward
// pass and graphs; cuda_runner_sampling.cpp: tokens picked on the GPU). Internal: include
// only from src/model/cuda_runner*.cpp, in builds with CUDA.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/qk_norm_rope.cuh"
#include "backend/cuda/sample.cuh"
#include "core/error.h"
#include "model/config.h"
#include "model/cuda_runner.h"
#include "model/cuda_weights.h"
#include "model/rope.h"

namespace tandem::model::detail {

using bf16_t = __nv_bfloat16;
inline double gib(uint64_t b) {
  return double(b) / double(1ull << 30);
}

constexpr int kLogitChunk = 256;  // lm_head rows per pass (bounds the logits buffers)

// One cudaMalloc'd buffer, freed with its owner.
class DevMem {
 public:
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  ~DevMem() { cudaFree(p_); }
  void* alloc(size_t bytes, const char* what) {
    cudaFree(p_);
    p_ = nullptr;
    cudaError_t e = cudaMalloc(&p_, std::max<size_t>(bytes, 16));
    if (e != cudaSuccess)
      fail(ErrorKind::kResource, "GPU out of memory allocating {:.2f} GiB for {} ({})", gib(bytes),
           what, cudaGetErrorString(e));
    size_ = bytes;
    return p_;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// Device pointers to one step's metadata (see ForwardBatch).
struct Meta {
  int32_t* tokens = nullptr;
  int32_t* pos = nullptr;
  int64_t* slots = nullptr;
  int32_t* ctx = nullptr;
  int32_t* bt = nullptr;
  int mb = 0;
  int32_t* lrows = nullptr;
  int32_t* tiles = nullptr;
};

// Lays arrays out back to back (16-byte aligned) in a host staging buffer and the device
// arena it is copied to in one transfer.
class Packer {
 public:
  Packer(char* host, char* dev, size_t cap) : host_(host), dev_(dev), cap_(cap) {}
  template <class T>
  T* put(const T* src, size_t n, size_t reserve = 0) {
    const size_t bytes = std::max(n, reserve) * sizeof(T);
    if (off_ + bytes > cap_) fail(ErrorKind::kInternal, "metadata arena overflow");
    if (n) std::memcpy(host_ + off_, src, n * sizeof(T));
    T* d = reinterpret_cast<T*>(dev_ + off_);
    off_ += (bytes + 15) / 16 * 16;
    return d;
  }
  size_t used() const { return off_; }

 private:
  char *host_, *dev_;
  size_t cap_, off_ = 0;
};

class CudaRunner final : public Runner {
 public:
  CudaRunner(const std::string& model, const CudaRunnerOptions& opt);
  ~CudaRunner() override;
  int vocab_size() const override { return cfg_.vocab_size; }
  int max_model_len() const override { return max_len_; }
  KvLayout kv_layout() const override { return layout_; }
  std::string name() const override { return "cuda:" + model_; }
  void forward(const ForwardBatch& batch, std::span<float> logits) override;
  bool supports_greedy() const override { return true; }
  // A step of 256 rows is the largest before the products' cost jumps (H200, Qwen3-14B:
  // 64 decodes + 192 prompt tokens 14.9 ms, + 208 17.6 ms; cuBLASLt's tiles), and holding a
  // closed loop's prompts to it bought 3-4% in sustained throughput (docs/PERFORMANCE.md).
  int step_knee() const override { return 256; }
  void forward_greedy(const ForwardBatch& batch, std::span<TokenId> tokens) override;
  bool supports_sampling() const override { return true; }
  void forward_sample(const ForwardBatch& batch, std::span<const RowSampling> rows,
                      std::span<const TokenId> penalty_tokens, std::span<TokenId> tokens) override;
  bool supports_token_masks() const override { return true; }
  void set_token_masks(const TokenMasks* masks) override {
    masks_ = masks;
    masks_on_device_ = false;
  }

  CudaRunnerStats stats() const;
  const CudaWeights& weights() const { return w_; }
  cuda::Gemm& gemm() { return *gemm_; }

 private:
  void validate(const ForwardBatch& b, size_t logits_size) const;
  void run_piece(const ForwardBatch& b, std::span<float> logits);
  bool run_graph(const ForwardBatch& b, std::span<float> logits);
  // Sequences [0, D) have one row each and take the decode attention kernel (`splits`
  // splits); the rest are prefill chunks covered by `num_tiles` tiles (make_prefill_tiles
  // over sequences D..S-1, numbered from D).
  void body(const Meta& m, int T, int S, int D, int splits, int num_tiles);
  // One layer's attention on the qkv rows (qk norm, RoPE, cache write, both attentions) into
  // attn_; `in` is the input norm's row scale when the qkv product read unnormalised rows.
  void attention(const Meta& m, int l, int T, int S, int D, int splits, int num_tiles,
                 cuda::RowNormInput in);
  void final_logits(int rows);  // lm_head over rows [0, rows) of lh_ into lf_
  void copy_logits(std::span<float> out, size_t rows);
  // Greedy steps: argmax of lf_'s first `rows` rows into greedy_dev_[first, first + rows);
  // sampled steps (sample_dev_ set): the GPU sampler with the parameters of those rows.
  void greedy_rows(int first, int rows);
  // forward_sample: per-row parameters and penalty entries to the device.
  void upload_sampling(std::span<const RowSampling> rows, std::span<const TokenId> penalty_tokens);
  // Token masks (set_token_masks) of logit rows [first, first + rows) applied to `logits`;
  // the first call of a step waits for the host's masks and uploads them.
  void apply_masks(float* logits, int first, int rows);

  ModelConfig cfg_;
  CudaRunnerOptions opt_;
  std::string model_;
  int max_len_ = 0, max_blocks_per_seq_ = 0;
  KvLayout layout_;
  CudaWeights w_;
  RopeTable rope_;
  cudaStream_t stream_ = nullptr;
  // Mixed steps run prefill attention on side_ beside the decode attention on stream_
  // (fork_/join_ order them around it); TANDEM_ATTN_OVERLAP=0 keeps both on stream_.
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  bool overlap_attention_ = true;
  int num_sms_ = 0;
  std::string dev_name_;
  std::unique_ptr<cuda::Gemm> gemm_;
  // FP8 weights: their products (the bf16 Gemm keeps lm_head); null with bf16 weights.
  std::unique_ptr<cuda::Fp8Gemm> fp8_;

  DevMem inv_freq_, x_, h_, qkv_, attn_, gu_, act_, lx_, lh_, lb_, lf_, attn_ws_;
  DevMem k_cache_, v_cache_;
  size_t layer_elems_ = 0;  // K (or V) elements of one layer's cache
  // FP8 cache: one byte an element in k_cache_/v_cache_, and fp32 scales [layers][slots, Hkv].
  bool kv_fp8_ = false;
  DevMem k_scale_, v_scale_;
  size_t layer_vecs_ = 0;  // (slot, KV head) vectors of one layer
  uint64_t kv_bytes() const {
    return k_cache_.size() + v_cache_.size() + k_scale_.size() + v_scale_.size();
  }
  DevMem meta_dev_;
  char* meta_host_ = nullptr;
  size_t meta_cap_ = 0;

  // Decode graphs, one per batch-size bucket, over a fixed metadata arena.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    bool warmed = false;
  };
  std::map<int, Graph> graphs_;
  DevMem gmeta_dev_;
  char* gmeta_host_ = nullptr;
  size_t gmeta_cap_ = 0;
  int graphs_captured_ = 0;
  // Eager steps: host time to enqueue the body's kernels, and the whole step (logged at exit).
  uint64_t eager_steps_ = 0;
  double eager_enqueue_us_ = 0, eager_total_us_ = 0;

  // Set during forward_greedy: argmax ids land in greedy_dev_, then in greedy_.
  std::span<TokenId> greedy_;
  DevMem greedy_dev_;
  // Set during forward_sample: the rows' parameters on the device (null otherwise).
  const cuda::SampleRow* sample_dev_ = nullptr;
  const cuda::PenaltyEntry* penalty_dev_ = nullptr;
  DevMem sample_params_, sample_penalties_;
  const TokenMasks* masks_ = nullptr;  // set_token_masks: for the next greedy/sampled step
  bool masks_on_device_ = false;
  DevMem masks_dev_;  // [logit rows] mask_of_row, then the masks
  std::vector<cuda::SampleRow> sample_host_;
  std::vector<cuda::PenaltyEntry> penalty_host_;
  std::vector<uint64_t> stamp_of_;  // [vocab] dedup of penalty windows (upload_sampling)
  std::vector<int32_t> slot_of_;
  uint64_t stamp_ = 0;
};

}  // namespace tandem::model::detail
