// flash_bench --mla: MLA's absorbed decode (DeepSeek-V2/V3) through
// flash::attention_forward: one query token per sequence, head_dim 576,
// head_dim_v 512, V being the first 512 columns of K's rows (v == k), one
// K/V head, bf16, a paged cache of 64-key pages handed out in a fixed
// random order (as the decode rows' paged caches), seqused_k = keys (the
// ragged rows' lengths below), softmax_scale 1/sqrt(192), splits and
// workspace of flash's choice.
//
//   Rows "mla/bf16/B<batch>/K<keys>/H<heads>/paged64": batch x keys x heads
//   64 x 8192 x 128 (the shape), 64 x 8192 x 16, 32 x 4096 x 128
//   and 1 x 32768 x 128; and ".../ragged": decode batches of unequal
//   lengths, 64 and 128 sequences at 128 heads whose lengths are 16384
//   (i + 1) / batch for i < batch, shuffled (a fixed order): 256 to 16384
//   keys, 8320 on average at 64 (the 64 x 8192 row's work, unevenly
//   spread), the same spread over two waves of CTAs at 128. GB/s and
//   FLOPs count the keys each sequence has.
//   Timed as the prefill rows are (bench_prefill): counters median_ms,
//   TFLOP/s (2 x heads x (576 + 512) per key and sequence) and
//   frac_ceiling; the label is the kernel configuration.
//
// print_mla_summary prints the table "## mla decode", with the GB/s of the
// cache read (batch x keys x 1152 bytes) and its fraction of the read
// ceiling measured in the same run beside the TFLOP/s.
#pragma once

#include <cstdio>

#include "bench_env.h"

namespace flash_bench {

void register_mla_benchmarks(BenchEnv* env);
void print_mla_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
