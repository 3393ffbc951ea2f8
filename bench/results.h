// Where the benchmark rows leave their figures for the summary table that
// main() prints after RunSpecifiedBenchmarks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "flash/flash.hpp"

namespace flash_bench {

// One attention shape of the sweep.
struct ShapeKey {
  flash::DType dtype;
  int64_t head_dim;
  bool causal;
  int64_t seqlen;

  bool operator<(const ShapeKey& o) const;
};

// kFlash: the heuristic's configuration; kTuned: the same call with
// autotuning on (--autotune); kStandard: the cuBLAS reference.
enum class Impl { kFlash, kStandard, kTuned };

// Records the median time and TFLOP/s of one row. A later record for the
// same (shape, impl), e.g. under --benchmark_repetitions, replaces it.
// `config` names the kernel configuration that ran (flash rows; "" otherwise).
void record_attention(const ShapeKey& key, Impl impl, double median_ms, double tflops,
                      const std::string& config = std::string());

// Prints, as markdown: the GPU, the date, the flash backend, the GEMM ceiling, then one line per
// recorded shape: dtype | head_dim | causal | N | flash TFLOP/s | frac of GEMM
// | standard TFLOP/s | speedup ("-" where a row did not run).
// When tuned rows ran, a second table follows: heuristic against autotuned,
// per shape, with both configurations and the gain.
void print_summary(std::FILE* out, const std::string& gpu_name, const char* backend, double ceiling_tflops);

}  // namespace flash_bench
