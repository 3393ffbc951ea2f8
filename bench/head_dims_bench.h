// flash_bench --head_dim_rows: the head dims between the compiled ones
// against their neighbours. Rows "head_dims/hd<d>", bf16, batch 1, N 16384,
// not causal, 16 query and 16 K/V heads, for d in 64, 80, 96, 112, 128, 160,
// 192, 224, 256 (those that run in the build). FLOPs are counted at the
// true head dim (4 * heads * d * N^2). The summary gives each row's
// TFLOP/s beside head dim 128's and beside that of the compiled head dim
// whose kernel ran it (the next one: 96 or a multiple of 64 on the sm90 kernel).
// Beside them, at head dims 96 and 128: "/causal" (N 16384), "/2k" and
// "/2k/causal" (N 2048, batch 8), in a second table against head dim 128.
#pragma once

#include <cstdio>

#include "bench_env.h"

namespace flash_bench {

void register_head_dim_benchmarks(BenchEnv* env);
void print_head_dim_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
