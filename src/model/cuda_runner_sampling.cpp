// Tokens picked on the GPU for sampled steps: per-row parameters and penalty windows go to
// the device, the forward pass runs, and the sampler (backend/cuda/sample.cu) leaves one id a
// row for the host.
#include "model/cuda_runner.h"

#ifdef TANDEM_HAVE_CUDA
#include "backend/cuda/check.cuh"
#include "backend/cuda/token_mask.cuh"
#include "model/cuda_runner_impl.h"

namespace tandem::model::detail {

void CudaRunner::upload_sampling(std::span<const RowSampling> rows,
                                 std::span<const TokenId> penalty_tokens) {
  const int V = cfg_.vocab_size;
  sample_host_.resize(rows.size());
  penalty_host_.clear();
  if (stamp_of_.size() != size_t(V)) stamp_of_.assign(size_t(V), 0), slot_of_.assign(size_t(V), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowSampling& q = rows[r];
    if (!(q.temperature >= 0.0f) || !(q.top_p > 0.0f && q.top_p <= 1.0f) || q.top_k < 0 ||
        !(q.min_p >= 0.0f && q.min_p <= 1.0f) || !(q.repetition_penalty > 0.0f) ||
        !(q.uniform >= 0.0 && q.uniform < 1.0))
      fail(ErrorKind::kInvalidArgument, "forward_sample: row {} has invalid parameters", r);
    if (q.penalty_count < 0 || q.penalty_offset < 0 || q.penalty_output < 0 ||
        q.penalty_output > q.penalty_count ||
        size_t(q.penalty_offset) + size_t(q.penalty_count) > penalty_tokens.size())
      fail(ErrorKind::kInvalidArgument, "forward_sample: row {} has a bad penalty window", r);
    cuda::SampleRow& d = sample_host_[r];
    static_cast<SamplingKnobs&>(d) = q;
    d.uniform = q.uniform;
    d.penalty_offset = int32_t(penalty_host_.size());
    // Distinct tokens in first-seen order, O(window): slot_of_[t] is t's entry when
    // stamp_of_[t] says it was set for this row.
    ++stamp_;
    const int out_from = q.penalty_count - q.penalty_output;
    for (int i = 0; i < q.penalty_count; ++i) {
      const TokenId t = penalty_tokens[size_t(q.penalty_offset + i)];
      if (t < 0 || t >= V)
        fail(ErrorKind::kInvalidArgument, "forward_sample: penalty token {} outside [0, {})", t, V);
      if (stamp_of_[size_t(t)] != stamp_) {
        stamp_of_[size_t(t)] = stamp_;
        slot_of_[size_t(t)] = int32_t(penalty_host_.size());
        penalty_host_.push_back({t, 0});
      }
      if (i >= out_from) penalty_host_[size_t(slot_of_[size_t(t)])].output_count++;
    }
    d.penalty_count = int32_t(penalty_host_.size()) - d.penalty_offset;
  }
  const size_t pb = rows.size() * sizeof(cuda::SampleRow);
  const size_t eb = penalty_host_.size() * sizeof(cuda::PenaltyEntry);
  if (sample_params_.size() < pb) sample_params_.alloc(std::max<size_t>(pb, 256 * 64), "sampling");
  if (sample_penalties_.size() < eb) sample_penalties_.alloc(eb * 2, "sampling penalties");
  // Pageable sources: the copies are done when the calls return, ahead of the forward.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(sample_params_.as<void>(), sample_host_.data(), pb,
                                    cudaMemcpyHostToDevice, stream_));
  if (eb)
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(sample_penalties_.as<void>(), penalty_host_.data(), eb,
                                      cudaMemcpyHostToDevice, stream_));
}

void CudaRunner::apply_masks(float* logits, int first, int rows) {
  if (!masks_) return;
  const std::vector<int32_t>& of_row = masks_->mask_of_row;
  const size_t head = (of_row.size() * sizeof(int32_t) + 255) / 256 * 256;
  if (!masks_on_device_) {
    const uint32_t* m = masks_->wait();
    int32_t count = 0;
    for (int32_t j : of_row) count = std::max(count, j + 1);
    const size_t body = size_t(count) * size_t(masks_->words) * sizeof(uint32_t);
    if (masks_dev_.size() < head + body) masks_dev_.alloc((head + body) * 2, "token masks");
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(masks_dev_.as<char>(), of_row.data(),
                                      of_row.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                      stream_));
    if (body)
      TANDEM_CUDA_CHECK(
          cudaMemcpyAsync(masks_dev_.as<char>() + head, m, body, cudaMemcpyHostToDevice, stream_));
    masks_on_device_ = true;
  }
  cuda::apply_token_masks(logits, rows, cfg_.vocab_size,
                          reinterpret_cast<const uint32_t*>(masks_dev_.as<char>() + head),
                          masks_->words, masks_dev_.as<int32_t>() + first, stream_);
}

void CudaRunner::forward_sample(const ForwardBatch& b, std::span<const RowSampling> rows,
                                std::span<const TokenId> penalty_tokens,
                                std::span<TokenId> tokens) {
  const size_t R = b.logit_rows.size(), V = size_t(cfg_.vocab_size);
  if (tokens.size() != R || rows.size() != R)
    fail(ErrorKind::kInvalidArgument,
         "forward_sample: {} token slots and {} row settings for {} logit rows", tokens.size(),
         rows.size(), R);
  upload_sampling(rows, penalty_tokens);
  auto done = [&] {
    sample_dev_ = nullptr;
    penalty_dev_ = nullptr;
    greedy_ = {};
  };
  try {
    if (b.num_tokens() > opt_.max_num_tokens) {
      // Larger than the activation buffers (rare): logits through the host, then the same
      // sampler over them, kLogitChunk rows at a time through lf_.
      std::vector<float> l(R * V);
      forward(b, l);
      for (size_t r0 = 0; r0 < R; r0 += kLogitChunk) {
        const int n = int(std::min<size_t>(kLogitChunk, R - r0));
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lf_.as<float>(), l.data() + r0 * V, n * V * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
        apply_masks(lf_.as<float>(), int(r0), n);
        cuda::sample_rows(lf_.as<float>(), n, int(V), sample_params_.as<cuda::SampleRow>() + r0,
                          sample_penalties_.as<cuda::PenaltyEntry>(),
                          greedy_dev_.as<int32_t>() + r0, stream_);
        TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
      }
    } else {
      validate(b, R * V);
      sample_dev_ = sample_params_.as<cuda::SampleRow>();
      penalty_dev_ = sample_penalties_.as<cuda::PenaltyEntry>();
      greedy_ = tokens;
      run_piece(b, {});
    }
  } catch (...) {
    done();
    throw;
  }
  done();
  TANDEM_CUDA_CHECK(cudaMemcpy(tokens.data(), greedy_dev_.as<int32_t>(), R * sizeof(int32_t),
                               cudaMemcpyDeviceToHost));
}

}  // namespace tandem::model::detail

#endif
