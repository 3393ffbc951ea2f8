// What every benchmark row shares: the options, the device, one stream, one
// cuBLAS handle bound to it, the L2 flusher, the event timer and the GEMM
// ceiling. main() builds one BenchEnv and hands a pointer to every row.
#pragma once

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench_util.h"
#include "options.h"

namespace flash_bench {

struct BenchEnv {
  Options options;
  int device = 0;
  std::string gpu_name;
  std::string compute_capability;  // "major.minor" of the device, e.g. "9.0"
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  L2Flusher flusher;
  LaunchTimer timer;
  double ceiling_tflops = 0.0;  // cuBLAS bf16 GEMM 8192^3, measured by main() before any row
  double bandwidth_gbps = 0.0;  // 4 GiB device-memory read (bandwidth_ceiling.h); measured when decode rows run

  BenchEnv() = default;
  BenchEnv(const BenchEnv&) = delete;
  BenchEnv& operator=(const BenchEnv&) = delete;
  ~BenchEnv();

  // Picks the current device, creates the stream, handle, flush buffer and
  // events. "" on success.
  std::string init();
};

// The timing loop of one row: `warmup` untimed launches and a sync, then one
// L2-flushed, event-timed launch per benchmark iteration, reported through
// SetIterationTime and appended to *ms. On any error it calls
// SkipWithError with the message and returns false.
template <typename Launch>
bool run_timed_loop(benchmark::State& state, BenchEnv& env, int warmup, Launch&& launch, std::vector<double>* ms) {
  // At least `warmup` launches, and more until warmup_ms of wall time has
  // passed: after the gap between rows (allocation, fills) the GPU's clocks
  // need time to come back up, and a few launches were not enough (the same
  // kernel measured up to 15% apart in back-to-back rows; docs/perf/measurement.md).
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (i >= warmup) {
      const std::string sync_err =
          cuda_error("cudaStreamSynchronize(after warm-up)", cudaStreamSynchronize(env.stream));
      if (!sync_err.empty()) {
        state.SkipWithError(sync_err.c_str());
        return false;
      }
      const double elapsed_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (elapsed_ms >= env.options.warmup_ms) break;
    }
    const std::string err = launch();
    if (!err.empty()) {
      state.SkipWithError(("warm-up: " + err).c_str());
      return false;
    }
  }
  ms->clear();
  ms->reserve(static_cast<size_t>(state.max_iterations));
  for (auto _ : state) {
    double elapsed_ms = 0.0;
    const std::string err = env.timer.time(env.flusher, env.stream, launch, &elapsed_ms);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return false;
    }
    state.SetIterationTime(elapsed_ms * 1e-3);
    ms->push_back(elapsed_ms);
  }
  return !ms->empty();
}

// Sets the row's counters from its per-iteration times: median_ms, TFLOP/s
// (from the median) and frac_ceiling (over env.ceiling_tflops). Returns the
// median in milliseconds; *out_tflops receives the TFLOP/s.
double set_counters(benchmark::State& state, const BenchEnv& env, const std::vector<double>& ms, double flops,
                    double* out_tflops);

}  // namespace flash_bench
