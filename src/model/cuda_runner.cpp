#include "model/cuda_runner.h"

#include "core/error.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/embedding.cuh"
#include "backend/cuda/fill.cuh"
#include "backend/cuda/prefill_attention.cuh"
#include "backend/cuda/qk_norm_rope.cuh"
#include "backend/cuda/rmsnorm.cuh"
#include "core/log.h"
#include "model/cuda_runner_impl.h"
#include "model/synthetic.h"

namespace tandem::model {
namespace detail {

CudaRunner::CudaRunner(const std::string& model, const CudaRunnerOptions& opt)
    : opt_(opt), model_(model) {
  cfg_ = is_synthetic(model) ? synthetic_config(model) : load_config(model);
  const bool fp8_weights = opt.weight_dtype == WeightDtype::kFp8 ||
                           (opt.weight_dtype == WeightDtype::kAuto && cfg_.fp8.has_value());
  if (cfg_.fp8 && opt.weight_dtype == WeightDtype::kBf16)
    fail(ErrorKind::kUnsupported,
         "{} is an FP8 checkpoint; it runs with FP8 weights (quantization auto or fp8), not bf16",
         model);
  if (fp8_weights) CudaWeights::check_fp8_shapes(cfg_);
  if (opt.block_size < 1 || opt.block_size > 1024)
    fail(ErrorKind::kInvalidArgument, "block_size {} out of range [1, 1024]", opt.block_size);
  if (!(opt.gpu_memory_utilization > 0.0 && opt.gpu_memory_utilization <= 1.0))
    fail(ErrorKind::kInvalidArgument, "gpu_memory_utilization {} must be in (0, 1]",
         opt.gpu_memory_utilization);
  if (opt.max_num_tokens < 1 || opt.max_graph_batch < 0 || opt.max_graph_batch > 1024)
    fail(ErrorKind::kInvalidArgument, "max_num_tokens >= 1 and max_graph_batch in [0, 1024]");
  const int H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
  const int Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  if (H % 8 || I % 8 || D % 8 || (D != 16 && D != 32 && D != 64 && D != 128) || Hq % Hkv ||
      Hq / Hkv > 8)
    fail(ErrorKind::kUnsupported,
         "{}: shapes not supported by the CUDA kernels (hidden {} and intermediate {} must be "
         "multiples of 8, head_dim {} one of 16/32/64/128, {} query heads per KV head <= 8)",
         model, H, I, D, Hq / std::max(Hkv, 1));
  max_len_ = opt.max_model_len > 0 ? opt.max_model_len : cfg_.max_position_embeddings;
  max_blocks_per_seq_ = (max_len_ + opt.block_size - 1) / opt.block_size;

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= opt.device)
    fail(ErrorKind::kUnsupported, "no usable CUDA device {} (found {})", opt.device, count);
  TANDEM_CUDA_CHECK(cudaSetDevice(opt.device));
  cudaDeviceProp prop{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
  num_sms_ = prop.multiProcessorCount;
  dev_name_ = prop.name;
  if (prop.major < 8)
    fail(ErrorKind::kUnsupported, "GPU {} has compute capability {}.{}; tandem needs 8.0+",
         dev_name_, prop.major, prop.minor);
  if (fp8_weights && !cuda::Fp8Gemm::supported())
    fail(ErrorKind::kUnsupported,
         "FP8 weights need cuBLASLt's block-scaled FP8 GEMM: a Hopper GPU (compute capability "
         "9.x) and cuBLASLt >= 12.9; {}: {}",
         dev_name_, cuda::Fp8Gemm::unsupported_reason());

  // Refuse a model whose weights cannot fit before allocating anything.
  size_t free_b = 0, total_b = 0;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double budget = opt.gpu_memory_utilization * double(total_b);
  const uint64_t wbytes = CudaWeights::bytes_needed(cfg_, fp8_weights);
  const uint64_t T = uint64_t(opt.max_num_tokens);
  const uint64_t qkv_dim = uint64_t(cfg_.q_size() + 2 * cfg_.kv_size());
  // FP8 products quantize their input rows: codes and a scale per 128 values of the widest.
  const int max_k = std::max({H, cfg_.q_size(), I});
  const uint64_t fp8_rows = uint64_t(std::max(opt.max_num_tokens, opt.max_graph_batch));
  const uint64_t act_bytes =
      2 * T * (2 * uint64_t(H) + qkv_dim + uint64_t(cfg_.q_size()) + 3 * uint64_t(I)) +
      uint64_t(kLogitChunk) * cfg_.vocab_size * 6 +
      (fp8_weights ? fp8_rows * uint64_t(max_k) * 2 + uint64_t(16) * max_k : 0);
  const double used_before = double(total_b - free_b);
  if (used_before + double(wbytes + act_bytes) > budget)
    fail(ErrorKind::kResource,
         "{} does not fit on {}: weights need {:.2f} GiB and activations for {} tokens {:.2f} "
         "GiB, but gpu_memory_utilization {:.2f} allows {:.2f} GiB of the {:.2f} GiB GPU "
         "({:.2f} GiB already in use)",
         model, dev_name_, gib(wbytes), T, gib(act_bytes), opt.gpu_memory_utilization,
         gib(uint64_t(budget)), gib(total_b), gib(uint64_t(used_before)));

  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  if (const char* e = std::getenv("TANDEM_ATTN_OVERLAP"); e && std::string_view(e) == "0")
    overlap_attention_ = false;
  w_ = is_synthetic(model) ? CudaWeights::synthetic(cfg_, opt.seed, fp8_weights)
                           : CudaWeights::from_checkpoint(model, cfg_, opt.progress, fp8_weights);
  rope_ = rope_table(cfg_);
  inv_freq_.alloc(rope_.inv_freq.size() * 4, "rope");
  TANDEM_CUDA_CHECK(cudaMemcpy(inv_freq_.as<float>(), rope_.inv_freq.data(),
                               rope_.inv_freq.size() * 4, cudaMemcpyHostToDevice));
  gemm_ = std::make_unique<cuda::Gemm>(opt.gemv_max_tokens);
  if (opt.skinny_min_bytes >= 0) gemm_->set_skinny_min_bytes(size_t(opt.skinny_min_bytes));
  // Each layer's norm weights go into the product after the norm (rmsnorm.cuh), which then
  // reads the residual rows as they are and scales its output rows (body()). FP8 weights
  // keep them apart (the checkpoint's codes stay as they are): their products normalise the
  // rows as they quantize them.
  if (w_.fp8) {
    fp8_ = std::make_unique<cuda::Fp8Gemm>(int(fp8_rows), max_k);
    if (opt.fp8_gemv_max_tokens >= 0) fp8_->set_gemv_max_tokens(opt.fp8_gemv_max_tokens);
  }
  for (CudaLayerWeights& L : w_.layers) {
    if (w_.fp8) break;
    cuda::fold_norm_weight(L.qkv, size_t(cfg_.q_size() + 2 * cfg_.kv_size()), H, L.in_norm,
                           stream_);
    cuda::fold_norm_weight(L.gate_up, size_t(2) * I, H, L.post_norm, stream_);
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));

  // The FP8 GEMM writes whole groups of 4 rows (Fp8Gemm::padded_rows): its outputs (x_, qkv_,
  // gu_) have room for 4 more.
  const uint64_t TP = T + 4;
  x_.alloc(TP * H * 2, "activations");
  h_.alloc(std::max<uint64_t>(T, 4) * H * 2, "activations");  // >= 2 fp32 rows (Gemm::RowNorm)
  qkv_.alloc(TP * qkv_dim * 2, "activations");
  attn_.alloc(T * cfg_.q_size() * 2, "activations");
  gu_.alloc(TP * 2 * I * 2, "activations");
  act_.alloc(T * I * 2, "activations");
  const size_t LC = kLogitChunk;
  lx_.alloc(LC * H * 2, "logits");
  lh_.alloc(LC * H * 2, "logits");
  lb_.alloc(LC * cfg_.vocab_size * 2, "logits");
  lf_.alloc(LC * cfg_.vocab_size * 4, "logits");
  size_t ws = 0;
  for (int s = 1; s <= std::max(opt.max_num_tokens, opt.max_graph_batch); ++s)
    ws = std::max(ws, cuda::decode_attention_workspace(
                          s, Hq, D, cuda::decode_attention_splits(s, Hkv, num_sms_)));
  attn_ws_.alloc(ws * 4, "attention workspace");
  TANDEM_CUDA_CHECK(cudaMemset(attn_ws_.as<void>(), 0, attn_ws_.size()));  // split counters

  // Metadata: tokens, positions, slots, context lengths, block tables, logit rows, tiles.
  const size_t maxT = size_t(opt.max_num_tokens);
  meta_cap_ = maxT * (4 + 4 + 8 + 4 + 4 + 4 * 4) + maxT * 64 + (1 << 16);
  meta_dev_.alloc(meta_cap_, "step metadata");
  TANDEM_CUDA_CHECK(cudaMallocHost(&meta_host_, meta_cap_));
  const size_t G = size_t(std::max(opt.max_graph_batch, 1));
  gmeta_cap_ = G * (4 + 4 + 8 + 4 + 4 * size_t(max_blocks_per_seq_)) + (1 << 12);
  gmeta_dev_.alloc(gmeta_cap_, "graph metadata");
  TANDEM_CUDA_CHECK(cudaMallocHost(&gmeta_host_, gmeta_cap_));
  greedy_dev_.alloc(std::max(maxT, G) * sizeof(int32_t), "greedy ids");

  // The KV cache gets what the budget leaves.
  kv_fp8_ = opt.kv_cache_dtype == KvCacheDtype::kFp8;
  const uint64_t elem_bytes = kv_fp8_ ? 1 : 2;
  const uint64_t slot_bytes =
      (uint64_t(cfg_.kv_size()) * elem_bytes + (kv_fp8_ ? uint64_t(Hkv) * 4 : 0)) * 2 *
      cfg_.num_hidden_layers;
  const uint64_t block_bytes = slot_bytes * opt.block_size;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double room = budget - double(total_b - free_b) - double(256ull << 20);  // headroom
  int64_t blocks =
      opt.num_blocks > 0 ? opt.num_blocks : int64_t(std::max(0.0, room) / double(block_bytes));
  if (blocks < max_blocks_per_seq_ || double(blocks) * double(block_bytes) > room + 1.0)
    fail(ErrorKind::kResource,
         "{} on {}: after {:.2f} GiB of weights and {:.2f} GiB of buffers, "
         "gpu_memory_utilization {:.2f} leaves {:.2f} GiB for the KV cache, which holds {} "
         "blocks of {} tokens ({:.1f} MiB each); one sequence of max_model_len {} needs {} "
         "blocks{}. Lower max_model_len or raise gpu_memory_utilization.",
         model, dev_name_, gib(w_.bytes), gib(uint64_t(double(total_b - free_b)) - w_.bytes),
         opt.gpu_memory_utilization, gib(uint64_t(std::max(0.0, room))),
         int64_t(std::max(0.0, room) / double(block_bytes)), opt.block_size,
         double(block_bytes) / (1 << 20), max_len_, max_blocks_per_seq_,
         opt.num_blocks > 0 ? fmt::format(" ({} blocks were asked for)", opt.num_blocks) : "");
  layer_elems_ = size_t(blocks) * opt.block_size * cfg_.kv_size();
  layer_vecs_ = size_t(blocks) * opt.block_size * Hkv;
  k_cache_.alloc(layer_elems_ * elem_bytes * cfg_.num_hidden_layers, "the K cache");
  v_cache_.alloc(layer_elems_ * elem_bytes * cfg_.num_hidden_layers, "the V cache");
  // Zero K/V once: a bug that reads an unwritten slot then shows as a wrong number, not NaN.
  TANDEM_CUDA_CHECK(cudaMemset(k_cache_.as<void>(), 0, k_cache_.size()));
  TANDEM_CUDA_CHECK(cudaMemset(v_cache_.as<void>(), 0, v_cache_.size()));
  if (kv_fp8_) {
    k_scale_.alloc(layer_vecs_ * 4 * cfg_.num_hidden_layers, "the K cache's scales");
    v_scale_.alloc(layer_vecs_ * 4 * cfg_.num_hidden_layers, "the V cache's scales");
    TANDEM_CUDA_CHECK(cudaMemset(k_scale_.as<void>(), 0, k_scale_.size()));
    TANDEM_CUDA_CHECK(cudaMemset(v_scale_.as<void>(), 0, v_scale_.size()));
  }
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());

  layout_.num_layers = cfg_.num_hidden_layers;
  layout_.num_kv_heads = Hkv;
  layout_.head_dim = D;
  layout_.block_size = opt.block_size;
  layout_.num_blocks = int(blocks);
  layout_.dtype = opt.kv_cache_dtype;
  spdlog::info(
      "cuda: {} on {}: {} weights {:.2f} GiB, {} KV cache {} blocks x {} tokens ({:.2f} GiB)",
      model, dev_name_, w_.fp8 ? "fp8" : "bf16", gib(w_.bytes), kv_cache_dtype_name(layout_.dtype),
      blocks, opt.block_size, gib(kv_bytes()));
}

CudaRunner::~CudaRunner() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (gemm_ && !gemm_->tune_log().empty()) {
    // What timing the library's candidates bought: per pass over every timed shape once.
    double first = 0, best = 0;
    for (const auto& r : gemm_->tune_log()) first += r.heuristic_ms, best += r.best_ms;
    spdlog::info(
        "cuda: {} GEMM plans; {} timed: library's first choice {:.2f} ms, fastest {:.2f} ms "
        "({:.1f}% less)",
        gemm_->num_plans(), gemm_->tune_log().size(), first, best,
        first > 0 ? 100.0 * (first - best) / first : 0.0);
  }
  if (eager_steps_ > 0)
    spdlog::info("cuda: {} eager steps: {:.0f} us to enqueue the body, {:.0f} us in all (mean)",
                 eager_steps_, eager_enqueue_us_ / double(eager_steps_),
                 eager_total_us_ / double(eager_steps_));
  if (gemm_ && gemm_->exact_fallbacks() > 0)
    spdlog::info("cuda: {} GEMM plans; {} products fell back to {} exact-shape algorithms",
                 gemm_->num_plans(), gemm_->exact_fallbacks(), gemm_->num_exact_algos());
  for (auto& [b, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  cudaFreeHost(meta_host_);
  cudaFreeHost(gmeta_host_);
  gemm_.reset();
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_) cudaStreamDestroy(side_);
  if (stream_) cudaStreamDestroy(stream_);
}

CudaRunnerStats CudaRunner::stats() const {
  CudaRunnerStats s;
  s.weight_bytes = w_.bytes;
  const uint64_t embed = uint64_t(cfg_.vocab_size) * cfg_.hidden_size * 2;
  s.step_weight_bytes = cfg_.tie_word_embeddings ? w_.bytes : w_.bytes - embed;
  s.kv_bytes = kv_bytes();
  s.num_sms = num_sms_;
  s.device_name = dev_name_;
  s.graphs_captured = graphs_captured_;
  s.fp8_weights = w_.fp8;
  return s;
}

void CudaRunner::validate(const ForwardBatch& b, size_t logits_size) const {
  const int T = b.num_tokens(), S = b.num_seqs();
  auto bad = [&](const std::string& what) {
    fail(ErrorKind::kInvalidArgument, "cuda forward: invalid batch: {}", what);
  };
  if (T == 0 || S == 0) bad("no tokens");
  if (b.positions.size() != size_t(T) || b.slot_mapping.size() != size_t(T))
    bad("positions/slot_mapping sizes differ from tokens");
  if (b.context_lens.size() != size_t(S)) bad("context_lens size != number of sequences");
  if (b.max_blocks <= 0 || b.block_tables.size() != size_t(S) * b.max_blocks)
    bad("block_tables size != sequences x max_blocks");
  if (b.query_start[0] != 0 || b.query_start[S] != T) bad("query_start must run from 0 to T");
  const int64_t slots = int64_t(layout_.num_blocks) * layout_.block_size;
  for (int t = 0; t < T; ++t) {
    if (b.tokens[t] < 0 || b.tokens[t] >= cfg_.vocab_size)
      bad(fmt::format("token {} at row {} outside the vocabulary", b.tokens[t], t));
    if (b.slot_mapping[t] < 0 || b.slot_mapping[t] >= slots)
      bad(fmt::format("slot {} at row {} outside the cache ({} slots)", b.slot_mapping[t], t,
                      slots));
  }
  for (int s = 0; s < S; ++s) {
    const int a = b.query_start[s], e = b.query_start[s + 1], ctx = b.context_lens[s];
    if (e <= a || e > T) bad(fmt::format("sequence {}: rows [{}, {}) empty or beyond T", s, a, e));
    if (ctx < e - a) bad(fmt::format("sequence {}: context {} < its {} new rows", s, ctx, e - a));
    if (ctx > max_len_ || ctx > int64_t(b.max_blocks) * layout_.block_size)
      bad(fmt::format("sequence {}: context {} beyond max_model_len {} or its block table", s, ctx,
                      max_len_));
    for (int t = a; t < e; ++t)
      if (b.positions[t] != ctx - (e - t))
        bad(
            fmt::format("sequence {}: row {} has position {}, expected {} (rows are the last "
                        "{} positions of a context of {})",
                        s, t, b.positions[t], ctx - (e - t), e - a, ctx));
    const int nb = (ctx + layout_.block_size - 1) / layout_.block_size;
    for (int i = 0; i < nb; ++i) {
      const BlockId id = b.block_tables[size_t(s) * b.max_blocks + i];
      if (id < 0 || id >= layout_.num_blocks)
        bad(fmt::format("sequence {}: block table entry {} = {} outside [0, {})", s, i, id,
                        layout_.num_blocks));
    }
    // Positions are now known to lie in [0, ctx) and their blocks to be valid.
    for (int t = a; t < e; ++t) {
      const int p = b.positions[t];
      const BlockId blk = b.block_tables[size_t(s) * b.max_blocks + p / layout_.block_size];
      if (b.slot_mapping[t] != int64_t(blk) * layout_.block_size + p % layout_.block_size)
        bad(fmt::format("row {}: slot {} is not position {}'s place in the block table", t,
                        b.slot_mapping[t], p));
    }
  }
  for (int r : b.logit_rows)
    if (r < 0 || r >= T) bad(fmt::format("logit row {} outside [0, {})", r, T));
  if (logits_size != b.logit_rows.size() * size_t(cfg_.vocab_size))
    bad(fmt::format("logits span holds {} floats, expected {} rows x {}", logits_size,
                    b.logit_rows.size(), cfg_.vocab_size));
}

// The residual stream x is updated in place by the o and down products (accumulate). With
// bf16 weights each layer's two norms have their weights folded into the qkv and gate/up
// weights (constructor), so the input norm is a row scale inside qk_norm_rope and the
// post-attention norm one inside the gate/up product (the skinny GEMM; other paths normalise
// into h_ first). FP8 products take the norms' weights and normalise as they quantize.
void CudaRunner::body(const Meta& m, int T, int S, int D, int splits, int num_tiles) {
  const int H = cfg_.hidden_size, I = cfg_.intermediate_size;
  const int Q = cfg_.q_size(), qkv_dim = Q + 2 * cfg_.kv_size();
  const float eps = float(cfg_.rms_norm_eps);
  bf16_t *x = x_.as<bf16_t>(), *qkv = qkv_.as<bf16_t>(), *attn = attn_.as<bf16_t>();
  bf16_t *gu = gu_.as<bf16_t>(), *act = act_.as<bf16_t>();
  const cuda::Gemm::RowNorm post_norm{eps, h_.as<bf16_t>()};
  cuda::gather_rows(m.tokens, w_.embed, x, T, H, stream_);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const CudaLayerWeights& L = w_.layers[size_t(l)];
    if (fp8_) {
      fp8_->linear(x, H, L.qkv8, qkv, qkv_dim, T, qkv_dim, H, stream_, false, L.in_norm, eps);
      attention(m, l, T, S, D, splits, num_tiles, {});
      fp8_->linear(attn, Q, L.o8, x, H, T, H, Q, stream_, /*accumulate=*/true);
      fp8_->linear_swiglu(x, L.gate_up8, act, gu, T, I, H, stream_, L.post_norm, eps);
      fp8_->linear(act, I, L.down8, x, H, T, H, I, stream_, /*accumulate=*/true);
      continue;
    }
    gemm_->linear(x, L.qkv, qkv, T, qkv_dim, H, stream_);
    attention(m, l, T, S, D, splits, num_tiles, cuda::RowNormInput{x, H, eps});
    gemm_->linear(attn, L.o, x, T, H, Q, stream_, 0, 0, /*accumulate=*/true);
    gemm_->linear_swiglu(x, L.gate_up, act, gu, T, I, H, stream_, &post_norm);
    gemm_->linear(act, L.down, x, T, H, I, stream_, 0, 0, /*accumulate=*/true);
  }
}

void CudaRunner::attention(const Meta& m, int l, int T, int S, int D, int splits, int num_tiles,
                           cuda::RowNormInput in) {
  const int HD = cfg_.head_dim, Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const int Q = cfg_.q_size(), qkv_dim = Q + 2 * cfg_.kv_size();
  const float eps = float(cfg_.rms_norm_eps), scale = 1.0f / std::sqrt(float(HD));
  bf16_t *qkv = qkv_.as<bf16_t>(), *attn = attn_.as<bf16_t>();
  const CudaLayerWeights& L = w_.layers[size_t(l)];
  const cuda::RopeArgs rope{inv_freq_.as<float>(), rope_.attention_factor};
  // This layer's cache (FP8: one byte an element, plus a scale per vector).
  const size_t el = kv_fp8_ ? 1 : 2;
  char* kc = k_cache_.as<char>() + size_t(l) * layer_elems_ * el;
  char* vc = v_cache_.as<char>() + size_t(l) * layer_elems_ * el;
  float* ks = kv_fp8_ ? k_scale_.as<float>() + size_t(l) * layer_vecs_ : nullptr;
  float* vs = kv_fp8_ ? v_scale_.as<float>() + size_t(l) * layer_vecs_ : nullptr;
  // The input norm's row scale (if any), q/k norm + RoPE, and the new K/V into the cache,
  // one pass.
  cuda::qk_norm_rope(qkv, m.pos, L.q_norm, L.k_norm, rope, T, Hq, Hkv, HD, eps, stream_,
                     cuda::KvDest{m.slots, kc, vc, ks, vs}, in);
  // A mixed step's two attentions write disjoint rows of attn: the prompt rows' few long
  // blocks run on side_ while the decode rows' kernel streams the cache on stream_.
  const bool overlap = overlap_attention_ && D > 0 && D < S;
  if (overlap) {
    TANDEM_CUDA_CHECK(cudaEventRecord(fork_, stream_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  }
  if (D < S)
    cuda::prefill_attention(qkv, qkv_dim, m.pos, m.tiles, num_tiles,
                            {kc, vc, m.bt + size_t(D) * m.mb, m.mb, m.ctx + D, layout_.block_size,
                             ks, vs, int64_t(layout_.num_blocks) * layout_.block_size},
                            attn, Q, Hq, Hkv, HD, scale, overlap ? side_ : stream_);
  if (D > 0)
    cuda::decode_attention(qkv, qkv_dim, {kc, vc, m.bt, m.mb, m.ctx, layout_.block_size, ks, vs},
                           attn, Q, D, Hq, Hkv, HD, scale, splits, attn_ws_.as<float>(), stream_);
  if (overlap) {
    TANDEM_CUDA_CHECK(cudaEventRecord(join_, side_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_, 0));
  }
}

// lm_head over the first `rows` rows of lh_ (already normalised) into lf_ (fp32).
void CudaRunner::final_logits(int rows) {
  gemm_->linear(lh_.as<bf16_t>(), w_.lm_head, lb_.as<bf16_t>(), rows, cfg_.vocab_size,
                cfg_.hidden_size, stream_);
  cuda::bf16_to_f32(lb_.as<bf16_t>(), lf_.as<float>(), size_t(rows) * cfg_.vocab_size, stream_);
}

void CudaRunner::copy_logits(std::span<float> out, size_t rows) {
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data(), lf_.as<float>(),
                                    rows * cfg_.vocab_size * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream_));
}

void CudaRunner::greedy_rows(int first, int rows) {
  apply_masks(lf_.as<float>(), first, rows);
  if (sample_dev_) {
    cuda::sample_rows(lf_.as<float>(), rows, cfg_.vocab_size, sample_dev_ + first, penalty_dev_,
                      greedy_dev_.as<int32_t>() + first, stream_);
    return;
  }
  cuda::argmax_rows(lf_.as<float>(), rows, cfg_.vocab_size, greedy_dev_.as<int32_t>() + first,
                    stream_);
}

void CudaRunner::run_piece(const ForwardBatch& b, std::span<float> logits) {
  const int T = b.num_tokens(), S = b.num_seqs();
  if (T == S && run_graph(b, logits)) return;  // one row per sequence: a decode step
  const auto t_start = std::chrono::steady_clock::now();

  // Leading one-row sequences (the scheduler puts decodes first) take the decode kernel, so
  // a step mixing decodes with a prefill chunk reads each KV head once per decode.
  int D = 0;
  while (D < S && b.query_start[D + 1] - b.query_start[D] == 1) ++D;
  std::vector<int32_t> tiles;
  if (D < S) tiles = cuda::make_prefill_tiles(b.query_start.data() + D, b.positions.data(), S - D);
  const size_t need = size_t(T) * 16 +
                      (S + b.block_tables.size() + b.logit_rows.size() + tiles.size()) * 4 + 8 * 16;
  if (need > meta_cap_) {  // long block tables: grow (the previous step has finished)
    meta_cap_ = need * 2;
    meta_dev_.alloc(meta_cap_, "step metadata");
    cudaFreeHost(meta_host_);
    meta_host_ = nullptr;
    TANDEM_CUDA_CHECK(cudaMallocHost(&meta_host_, meta_cap_));
  }
  Packer pk(meta_host_, meta_dev_.as<char>(), meta_cap_);
  Meta m;
  m.tokens = pk.put(b.tokens.data(), T);
  m.pos = pk.put(b.positions.data(), T);
  m.slots = pk.put(b.slot_mapping.data(), T);
  m.ctx = pk.put(b.context_lens.data(), S);
  m.bt = pk.put(b.block_tables.data(), b.block_tables.size());
  m.mb = b.max_blocks;
  m.lrows = pk.put(b.logit_rows.data(), b.logit_rows.size());
  m.tiles = pk.put(tiles.data(), tiles.size());
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(meta_dev_.as<char>(), meta_host_, pk.used(),
                                    cudaMemcpyHostToDevice, stream_));
  const int splits = D ? cuda::decode_attention_splits(D, cfg_.num_key_value_heads, num_sms_) : 0;
  body(m, T, S, D, splits, int(tiles.size() / 4));
  const auto t_enqueued = std::chrono::steady_clock::now();

  const int H = cfg_.hidden_size;
  const size_t R = b.logit_rows.size();
  for (size_t r0 = 0; r0 < R; r0 += kLogitChunk) {
    const int n = int(std::min<size_t>(kLogitChunk, R - r0));
    cuda::gather_rows(m.lrows + r0, x_.as<bf16_t>(), lx_.as<bf16_t>(), n, H, stream_);
    cuda::rmsnorm(lx_.as<bf16_t>(), w_.final_norm, lh_.as<bf16_t>(), n, H, float(cfg_.rms_norm_eps),
                  stream_);
    final_logits(n);
    if (!greedy_.empty()) greedy_rows(int(r0), n);
    if (!logits.empty()) copy_logits(logits.subspan(r0 * cfg_.vocab_size), size_t(n));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // lf_ is reused by the next chunk
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto t_end = std::chrono::steady_clock::now();
  ++eager_steps_;
  eager_enqueue_us_ += std::chrono::duration<double, std::micro>(t_enqueued - t_start).count();
  eager_total_us_ += std::chrono::duration<double, std::micro>(t_end - t_start).count();
}

// Pure decode steps of up to max_graph_batch sequences whose logits are wanted in row order:
// pad to the bucket size (padding rows: slot -1, context 0) and replay the bucket's graph.
bool CudaRunner::run_graph(const ForwardBatch& b, std::span<float> logits) {
  const int S = b.num_seqs();
  if (!opt_.cuda_graphs || S > opt_.max_graph_batch || b.max_blocks > max_blocks_per_seq_ ||
      b.logit_rows.size() != size_t(S))
    return false;
  for (int i = 0; i < S; ++i)
    if (b.logit_rows[i] != i) return false;
  int B = 1;
  while (B < S) B *= 2;
  B = std::min(B, opt_.max_graph_batch);

  const int mbps = max_blocks_per_seq_;
  std::vector<int32_t> tokens(B, 0), pos(B, 0), ctx(B, 0), bt(size_t(B) * mbps, -1);
  std::vector<int64_t> slots(B, -1);
  for (int s = 0; s < S; ++s) {
    tokens[s] = b.tokens[s];
    pos[s] = b.positions[s];
    slots[s] = b.slot_mapping[s];
    ctx[s] = b.context_lens[s];
    std::copy_n(b.block_tables.begin() + size_t(s) * b.max_blocks, b.max_blocks,
                bt.begin() + size_t(s) * mbps);
  }
  Packer pk(gmeta_host_, gmeta_dev_.as<char>(), gmeta_cap_);
  Meta m;
  const size_t G = size_t(opt_.max_graph_batch);
  m.tokens = pk.put(tokens.data(), B, G);
  m.pos = pk.put(pos.data(), B, G);
  m.slots = pk.put(slots.data(), B, G);
  m.ctx = pk.put(ctx.data(), B, G);
  m.bt = pk.put(bt.data(), bt.size(), G * mbps);
  m.mb = mbps;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(gmeta_dev_.as<char>(), gmeta_host_, pk.used(),
                                    cudaMemcpyHostToDevice, stream_));
  const int splits = cuda::decode_attention_splits(B, cfg_.num_key_value_heads, num_sms_);
  auto step = [&] {
    body(m, B, B, B, splits, 0);
    cuda::rmsnorm(x_.as<bf16_t>(), w_.final_norm, lh_.as<bf16_t>(), B, cfg_.hidden_size,
                  float(cfg_.rms_norm_eps), stream_);
    final_logits(B);
  };
  Graph& g = graphs_[B];
  if (!g.warmed) {
    // First use: run eagerly (this step's result), which also plans every GEMM shape.
    step();
    g.warmed = true;
  } else {
    if (!g.exec) {
      cudaGraph_t graph = nullptr;
      TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        step();
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      TANDEM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      TANDEM_CUDA_CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
      cudaGraphDestroy(graph);
      ++graphs_captured_;
    }
    TANDEM_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
  }
  if (!greedy_.empty()) greedy_rows(0, S);
  if (!logits.empty()) copy_logits(logits, size_t(S));
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return true;
}

void CudaRunner::forward(const ForwardBatch& b, std::span<float> logits) {
  // An empty span with logit rows asked for: compute but keep the logits on the GPU (used
  // by the benchmark to time the model alone).
  const bool keep_on_gpu = logits.empty() && !b.logit_rows.empty();
  validate(b, keep_on_gpu ? b.logit_rows.size() * size_t(cfg_.vocab_size) : logits.size());
  const int T = b.num_tokens(), M = opt_.max_num_tokens;
  if (T <= M) return run_piece(b, logits);

  // Larger than the activation buffers: run row ranges [k M, (k+1) M) in order. A sequence
  // cut in two sees its earlier rows through the cache, written by the earlier piece.
  const int S = b.num_seqs(), V = cfg_.vocab_size;
  for (int ra = 0; ra < T; ra += M) {
    const int rb = std::min(T, ra + M);
    ForwardBatch p;
    p.max_blocks = b.max_blocks;
    p.query_start.push_back(0);
    for (int s = 0; s < S; ++s) {
      const int a = std::max(ra, b.query_start[s]), e = std::min(rb, b.query_start[s + 1]);
      if (a >= e) continue;
      for (int t = a; t < e; ++t) {
        p.tokens.push_back(b.tokens[t]);
        p.positions.push_back(b.positions[t]);
        p.slot_mapping.push_back(b.slot_mapping[t]);
      }
      p.query_start.push_back(int(p.tokens.size()));
      p.context_lens.push_back(b.positions[e - 1] + 1);
      p.block_tables.insert(p.block_tables.end(), b.block_tables.begin() + size_t(s) * b.max_blocks,
                            b.block_tables.begin() + size_t(s + 1) * b.max_blocks);
    }
    std::vector<size_t> outs;  // which output rows this piece produces
    for (size_t j = 0; j < b.logit_rows.size(); ++j)
      if (b.logit_rows[j] >= ra && b.logit_rows[j] < rb) {
        outs.push_back(j);
        p.logit_rows.push_back(b.logit_rows[j] - ra);
      }
    std::vector<float> part(keep_on_gpu ? 0 : outs.size() * size_t(V));
    run_piece(p, part);
    if (!keep_on_gpu)
      for (size_t i = 0; i < outs.size(); ++i)
        std::copy_n(part.begin() + i * V, V, logits.begin() + outs[i] * V);
  }
}

// Greedy steps: the same forward, with the argmax taken on the GPU so only one id per row
// comes back. A step larger than the activation buffers (rare: huge prefill chunks) takes
// the logits path and scans on the host.
void CudaRunner::forward_greedy(const ForwardBatch& b, std::span<TokenId> tokens) {
  const size_t R = b.logit_rows.size(), V = size_t(cfg_.vocab_size);
  if (tokens.size() != R)
    fail(ErrorKind::kInvalidArgument, "forward_greedy: {} token slots for {} logit rows",
         tokens.size(), R);
  if (b.num_tokens() > opt_.max_num_tokens) {
    std::vector<float> l(R * V);
    forward(b, l);
    const uint32_t* m = masks_ ? masks_->wait() : nullptr;
    for (size_t r = 0; r < R; ++r) {
      const int32_t j = m ? masks_->mask_of_row[r] : -1;
      if (j >= 0)  // the first largest among the allowed tokens
        for (size_t t = 0; t < V; ++t)
          if (!((m[size_t(j) * size_t(masks_->words) + t / 32] >> (t % 32)) & 1u))
            l[r * V + t] = -INFINITY;
      tokens[r] = TokenId(std::max_element(l.begin() + r * V, l.begin() + (r + 1) * V) -
                          (l.begin() + r * V));
    }
    return;
  }
  validate(b, R * V);
  greedy_ = tokens;
  try {
    run_piece(b, {});
  } catch (...) {
    greedy_ = {};
    throw;
  }
  greedy_ = {};
  TANDEM_CUDA_CHECK(cudaMemcpy(tokens.data(), greedy_dev_.as<int32_t>(), R * sizeof(int32_t),
                               cudaMemcpyDeviceToHost));
}

// Sampled steps: the engine's parameters per row, with each row's penalty window reduced to
// distinct tokens (and their output counts) on the host in one pass, then the same forward as
// forward_greedy with the sampler in place of the argmax.
}  // namespace detail

using detail::CudaRunner;

std::unique_ptr<Runner> make_cuda_runner(const std::string& model, const CudaRunnerOptions& opt) {
  return std::make_unique<CudaRunner>(model, opt);
}

CudaRunnerStats cuda_runner_stats(const Runner& r) {
  auto* c = dynamic_cast<const CudaRunner*>(&r);
  if (!c) fail(ErrorKind::kInvalidArgument, "cuda_runner_stats: not a CUDA runner");
  return c->stats();
}

const CudaWeights& cuda_runner_weights(const Runner& r) {
  auto* c = dynamic_cast<const CudaRunner*>(&r);
  if (!c) fail(ErrorKind::kInvalidArgument, "cuda_runner_weights: not a CUDA runner");
  return c->weights();
}

void set_cuda_gemv_max_tokens(Runner& r, int t) {
  auto* c = dynamic_cast<CudaRunner*>(&r);
  if (!c) fail(ErrorKind::kInvalidArgument, "set_cuda_gemv_max_tokens: not a CUDA runner");
  c->gemm().set_gemv_max_tokens(t);
}

}  // namespace tandem::model

#else  // no CUDA in this build

namespace tandem::model {
std::unique_ptr<Runner> make_cuda_runner(const std::string& model, const CudaRunnerOptions&) {
  fail(ErrorKind::kUnsupported, "cannot run {} on CUDA: this tandem was built without CUDA", model);
}
CudaRunnerStats cuda_runner_stats(const Runner&) {
  fail(ErrorKind::kUnsupported, "this tandem was built without CUDA");
}
void set_cuda_gemv_max_tokens(Runner&, int) {
  fail(ErrorKind::kUnsupported, "this tandem was built without CUDA");
}
const CudaWeights& cuda_runner_weights(const Runner&) {
  fail(ErrorKind::kUnsupported, "this tandem was built without CUDA");
}
}  // namespace tandem::model

#endif
