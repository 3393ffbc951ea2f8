// flash_bench --fp8_prefill: the FP8 prefill (Q, K and V in e4m3, O in
// bf16; AttentionParams::q_dtype) beside the same calls in bf16 and a
// cuBLAS fp8 GEMM ceiling, all in the same process. Rows
// "fp8_prefill/hd<d>/<causal|noncausal>/<fp8|bf16>": the seed sweep's shape
// at N 16384 (batch 1, heads * head_dim = 2048, heads_kv = heads), for head
// dims 64, 128, 256 (those compiled), with a workspace of
// attention_workspace_size() bytes; FLOPs as the sweep counts them
// (4 * heads * head_dim * visible pairs). Row "gemm_fp8_8192": cublasLt,
// e4m3 A and B (TN), bf16 D, float32 accumulation, 8192^3.
#pragma once

#include <cstdio>

#include "bench_env.h"

namespace flash_bench {

void register_fp8_prefill_benchmarks(BenchEnv* env);
void print_fp8_prefill_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
