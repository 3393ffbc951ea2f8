#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "bandwidth_ceiling.h"

namespace flash_bench {
namespace {

// The source buffer and the sink; launch_device_read (l2_flush.cu) streams it.
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
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(bandwidth setup)", cudaStreamSynchronize(env.stream));
    return err;
  }

  std::string launch(BenchEnv& env) const {
    return launch_device_read(src_.get(), kBandwidthBytes, static_cast<unsigned int*>(sink_.get()), env.stream);
  }

 private:
  DeviceBuffer src_, sink_;
};

double gbps(double ms) {
  return ms > 0.0 ? static_cast<double>(kBandwidthBytes) / (ms * 1e-3) / 1e9 : 0.0;
}

}  // namespace

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
