// The measured ceiling the decode rows are compared with: a kernel that
// streams 4 GiB of device memory with 16-byte loads and reduces what it read
// (so no load can be optimised away), timed like the attention rows (L2
// flushed, CUDA events, median). Decode with a long KV cache is a stream of
// K and V through the SMs, so its figure of merit is the fraction of this.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>

#include "bench_env.h"

namespace flash_bench {

constexpr size_t kBandwidthBytes = size_t{4} << 30;  // bytes read per launch

// Times env->options.gemm_iters launches after at least gemm_warmup
// launches and warmup_ms of them, and returns the median read rate in
// GB/s (1e9 bytes per second) in *gbps. "" on success.
std::string measure_bandwidth_ceiling(BenchEnv& env, double* gbps);

// The row "read_bandwidth_4GiB": the same kernel timed again inside the
// benchmark, reporting median_ms, GB/s and frac_bandwidth (against main's
// figure).
void bench_bandwidth(benchmark::State& state, BenchEnv* env);

}  // namespace flash_bench
