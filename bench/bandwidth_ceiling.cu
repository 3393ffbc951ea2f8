#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "bandwidth_ceiling.h"

namespace flash_bench {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

// Reads `count` uint4 from `src` in a grid-stride loop, kUnroll loads per
// thread per step, and XORs every word read into one value per warp, which
// lane 0 folds into *sink with an atomic: each load feeds the result.
__global__ void __launch_bounds__(kThreads)
    read_kernel(const uint4* __restrict__ src, size_t count, unsigned int* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned int acc = 0;
  for (; i + (kUnroll - 1) * stride < count; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicXor(sink, acc);
}

// The source buffer, the sink, and the grid: as many blocks as fit on the
// device at once, so every SM streams for the whole launch.
class ReadStream {
 public:
  std::string setup(BenchEnv& env) {
    std::string err = src_.allocate(kBandwidthBytes, "cudaMalloc(bandwidth source, 4 GiB)");
    if (err.empty()) err = sink_.allocate(sizeof(unsigned int), "cudaMalloc(bandwidth sink)");
    // Defined contents (the kernel's result is never checked, only kept).
    if (err.empty()) {
      err = cuda_error("cudaMemsetAsync(bandwidth source)",
                       cudaMemsetAsync(src_.get(), 0x5a, kBandwidthBytes, env.stream));
    }
    if (err.empty()) {
      err = cuda_error("cudaMemsetAsync(bandwidth sink)",
                       cudaMemsetAsync(sink_.get(), 0, sizeof(unsigned int), env.stream));
    }
    int sms = 0;
    int blocks_per_sm = 0;
    if (err.empty()) {
      err = cuda_error("cudaDeviceGetAttribute(MultiProcessorCount)",
                       cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, env.device));
    }
    if (err.empty()) {
      err = cuda_error("cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                       cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_kernel, kThreads, 0));
    }
    blocks_ = sms * (blocks_per_sm > 0 ? blocks_per_sm : 1);
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(bandwidth setup)", cudaStreamSynchronize(env.stream));
    return err;
  }

  std::string launch(BenchEnv& env) const {
    read_kernel<<<blocks_, kThreads, 0, env.stream>>>(static_cast<const uint4*>(src_.get()),
                                                      kBandwidthBytes / sizeof(uint4),
                                                      static_cast<unsigned int*>(sink_.get()));
    return cuda_error("read_kernel launch", cudaGetLastError());
  }

 private:
  DeviceBuffer src_, sink_;
  int blocks_ = 0;
};

double gbps(double ms) {
  return ms > 0.0 ? static_cast<double>(kBandwidthBytes) / (ms * 1e-3) / 1e9 : 0.0;
}

}  // namespace

std::string launch_read_flush(const void* buf, size_t bytes, unsigned int* sink, cudaStream_t stream) {
  static int blocks = 0;
  if (blocks == 0) {
    int device = 0, sms = 0, per_sm = 0;
    std::string err = cuda_error("cudaGetDevice", cudaGetDevice(&device));
    if (err.empty())
      err = cuda_error("cudaDeviceGetAttribute", cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (err.empty())
      err = cuda_error("cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                       cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, kThreads, 0));
    if (!err.empty()) return err;
    blocks = sms * (per_sm > 0 ? per_sm : 1);
  }
  read_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(buf), bytes / sizeof(uint4), sink);
  return cuda_error("read flush launch", cudaGetLastError());
}

std::string measure_bandwidth_ceiling(BenchEnv& env, double* gbps_out) {
  *gbps_out = 0.0;
  ReadStream stream;
  std::string err = stream.setup(env);
  if (!err.empty()) return err;
  auto launch = [&] { return stream.launch(env); };
  // Warm up as the rows do: at least gemm_warmup launches and warmup_ms.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; err.empty(); ++i) {
    if (i >= env.options.gemm_warmup) {
      err = cuda_error("cudaStreamSynchronize(bandwidth warm-up)", cudaStreamSynchronize(env.stream));
      const double elapsed_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!err.empty() || elapsed_ms >= env.options.warmup_ms) break;
    }
    err = launch();
  }
  std::vector<double> ms;
  for (int i = 0; i < env.options.gemm_iters && err.empty(); ++i) {
    double elapsed = 0.0;
    err = env.timer.time(env.flusher, env.stream, launch, &elapsed);
    ms.push_back(elapsed);
  }
  if (err.empty()) *gbps_out = gbps(median(ms));
  return err;
}

void bench_bandwidth(benchmark::State& state, BenchEnv* env) {
  ReadStream stream;
  const std::string err = stream.setup(*env);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  std::vector<double> ms;
  if (!run_timed_loop(
          state, *env, env->options.gemm_warmup, [&] { return stream.launch(*env); }, &ms))
    return;
  const double median_ms = median(ms);
  const double rate = gbps(median_ms);
  state.counters["median_ms"] = benchmark::Counter(median_ms);
  state.counters["GB/s"] = benchmark::Counter(rate);
  state.counters["frac_bandwidth"] = benchmark::Counter(env->bandwidth_gbps > 0.0 ? rate / env->bandwidth_gbps : 0.0);
}

}  // namespace flash_bench
