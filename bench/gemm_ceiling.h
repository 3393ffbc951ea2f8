// The measured ceiling every attention figure is compared with: a cuBLAS
// bf16 GEMM, 8192 x 8192 x 8192, bf16 in and out, float32 accumulation,
// timed like the attention rows (L2 flushed, CUDA events, median).
#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "bench_env.h"

namespace flash_bench {

// Times env->options.gemm_iters GEMMs after gemm_warmup and returns their
// median as TFLOP/s in *tflops (2 * 8192^3 FLOPs per GEMM). "" on success.
std::string measure_gemm_ceiling(BenchEnv& env, double* tflops);

// The rows "gemm_bf16_8192" (the same GEMM timed again inside the
// benchmark) and "gemm_fp16_8192" (the same shape in fp16, for the fp16
// rows), reporting median_ms, TFLOP/s and frac_ceiling (against main's
// bf16 figure).
void bench_gemm(benchmark::State& state, BenchEnv* env, flash::DType dtype);

}  // namespace flash_bench
