// The streaming yardstick (stream_read_probe) against a host checksum, and what the
// boundaries between a decode layer's kernels cost a pure streaming reader.
#include <cstdio>

#include "backend/cuda/fill.cuh"
#include "backend/cuda/stream_read_probe.cuh"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

unsigned host_xor(const std::vector<uint32_t>& w, size_t first, size_t count) {
  unsigned x = 0;
  for (size_t i = first; i < first + count; ++i) x ^= w[i];
  return x;
}

constexpr ReadLaunch kLaunches[] = {ReadLaunch::kPlain, ReadLaunch::kPdl, ReadLaunch::kPdlEarly,
                                    ReadLaunch::kPlainHalf};

unsigned read_checksum(const void* p, size_t bytes, unsigned start, ReadLaunch how) {
  Dev<unsigned> out(std::vector<unsigned>{start});
  stream_read_probe(p, bytes, out.get(), nullptr, how);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned got = 0;
  TANDEM_CUDA_CHECK(cudaMemcpy(&got, out.get(), sizeof got, cudaMemcpyDeviceToHost));
  return got;
}

// Every word read exactly once: ranges of odd lengths at odd 16-byte offsets, from one word
// to past the unrolled loop's reach, in every launch form, folded into a non-zero start.
TEST(CudaKernels, StreamReadProbeMatchesHostChecksum) {
  Rng rng(test_seed() + 61);
  const size_t words = 4 * 1000003 + 64;  // 32-bit words
  std::vector<uint32_t> host(words);
  for (auto& w : host) w = uint32_t(rng.next());
  uint32_t* dev = nullptr;
  TANDEM_CUDA_CHECK(cudaMalloc(&dev, words * 4));
  TANDEM_CUDA_CHECK(cudaMemcpy(dev, host.data(), words * 4, cudaMemcpyHostToDevice));
  struct Case {
    size_t offset16, len16;  // in 16-byte words
  };
  for (Case c : {Case{0, 1}, Case{3, 33}, Case{1, 4099}, Case{5, 1000003}, Case{0, 262144}}) {
    for (ReadLaunch how : kLaunches) {
      const unsigned start = uint32_t(rng.next());
      const unsigned want = start ^ host_xor(host, 4 * c.offset16, 4 * c.len16);
      EXPECT_EQ(read_checksum(dev + 4 * c.offset16, 16 * c.len16, start, how), want)
          << "offset " << c.offset16 << " length " << c.len16 << " launch " << int(how);
    }
  }
  EXPECT_THROW(stream_read_probe(dev, 24, nullptr, nullptr), std::exception);
  cudaFree(dev);
}

// A decode step's bytes at Qwen3-14B's shapes, 64 sequences at context 528 (bf16 weights and
// cache): each layer's kernels read qkv, the q/k-norm rows, the cache, o, gate/up and down.
// Over 40 layers, captured in a CUDA graph as the decode step is, the same bytes are read as
// one streaming read a layer, as one read a kernel (in each launch form), with neighbouring
// kernels merged, and as 2, 6 and 12 equal reads. The differences are what kernel boundaries
// cost with nothing else in the kernels.
TEST(CudaKernels, KernelBoundaryTiming) {
  const size_t parts[] = {size_t(7168) * 5120 * 2,             // qkv
                          size_t(64) * 7168 * 2 * 2,           // q/k-norm + RoPE rows
                          size_t(64) * 528 * 8 * 128 * 2 * 2,  // decode attention: K and V
                          size_t(5120) * 5120 * 2,             // o
                          size_t(34816) * 5120 * 2,            // gate/up
                          size_t(5120) * 17408 * 2};           // down
  constexpr int kParts = 6, kLayers = 40;
  size_t layer = 0;
  for (size_t b : parts) layer += b;
  Dev<bf16_t> buf(layer / 2);
  fill_random(buf.get(), buf.size(), test_seed() + 62, 0.0f, 1.0f, nullptr);
  Dev<unsigned> out(std::vector<unsigned>{0});
  const auto* base = reinterpret_cast<const unsigned char*>(buf.get());
  cudaStream_t s;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The layer's kernels, as the byte counts of consecutive reads.
  auto grouped = [&](std::vector<int> counts) {  // counts of consecutive parts
    std::vector<size_t> sizes;
    int p = 0;
    for (int c : counts) {
      size_t bytes = 0;
      for (int i = 0; i < c; ++i) bytes += parts[p++];
      sizes.push_back(bytes);
    }
    EXPECT_EQ(p, kParts);
    return sizes;
  };
  auto equal = [&](int n) {  // n reads of (nearly) equal 16-byte multiples
    std::vector<size_t> sizes;
    for (int i = 0; i < n; ++i)
      sizes.push_back((layer / 16 * (i + 1) / n - layer / 16 * i / n) * 16);
    return sizes;
  };
  auto run = [&](const char* name, std::vector<size_t> sizes, ReadLaunch how, double one_read_us) {
    auto layer_reads = [&](cudaStream_t st) {
      size_t at = 0;
      for (size_t bytes : sizes) {
        stream_read_probe(base + at, bytes, out.get(), st, how);
        at += bytes;
      }
      EXPECT_EQ(at, layer);
    };
    // One layer reads every word once, whatever the grouping (XOR into a cleared word).
    TANDEM_CUDA_CHECK(cudaMemset(out.get(), 0, sizeof(unsigned)));
    layer_reads(s);
    unsigned sum = 0;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(&sum, out.get(), sizeof sum, cudaMemcpyDeviceToHost, s));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < kLayers; ++l) layer_reads(s);
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double us =
        time_us([&] { TANDEM_CUDA_CHECK(cudaGraphLaunch(exec, nullptr)); }, 5) / kLayers;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    const double mb = layer * 1e-6;
    static const char* const kHow[] = {"", ", PDL", ", PDL, early loads", ", 2 blocks an SM"};
    std::printf("[ perf ] boundary: %-34s %2zu kernels%-18s: %6.1f us a layer (%.2f TB/s)", name,
                sizes.size(), kHow[int(how)], us, mb / us);
    if (one_read_us > 0)
      std::printf(", +%.1f us a layer over one read (%.2f ms a step)", us - one_read_us,
                  (us - one_read_us) * kLayers * 1e-3);
    std::printf("\n");
    return std::make_pair(us, sum);
  };
  std::printf(
      "[ perf ] boundary: a decode layer's %.1f MB (64 sequences, context 528), 40 "
      "layers in a graph\n",
      layer * 1e-6);
  const auto [one, ref] = run("one read", equal(1), ReadLaunch::kPlain, 0);
  EXPECT_EQ(run("one read", equal(1), ReadLaunch::kPdl, one).second, ref);
  for (ReadLaunch how : kLaunches) {
    EXPECT_EQ(run("one read a kernel", grouped({1, 1, 1, 1, 1, 1}), how, one).second, ref);
    EXPECT_EQ(run("q/k-norm merged into attention", grouped({1, 2, 1, 1, 1}), how, one).second,
              ref);
    EXPECT_EQ(run("attention part, MLP part", grouped({4, 2}), how, one).second, ref);
  }
  EXPECT_EQ(run("one read", equal(1), ReadLaunch::kPlainHalf, one).second, ref);
  for (int n : {2, 6, 12})
    EXPECT_EQ(
        run(n == 2 ? "equal halves" : "equal parts", equal(n), ReadLaunch::kPlain, one).second,
        ref);
  EXPECT_NE(ref, 0u);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace tandem::cuda::test
