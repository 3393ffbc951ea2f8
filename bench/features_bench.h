// flash_bench --features: what the score and softmax features cost. Each
// shape runs plain, with sinks and with ALiBi, rows "features/<shape>/
// <plain|sinks|alibi>"; the summary gives the medians and each feature's
// time over the plain call's (1.03 is a 3% cost). ALiBi runs the kernels'
// score-modifier variant (the softcap's), so its kernel may differ. Shapes, bf16, from
// gpt-oss-120b's attention (heads 64/8, head_dim 64, sinks on every layer,
// half the layers with a 128-token window) and one head_dim 128 model:
//   prefill  batch 1, N 8192, causal, hd64 heads 64/8
//   window   the same with window_left 128
//   prefill  batch 1, N 8192, causal, hd128 heads 32/8
//   decode   batch 32, 8192 keys, one query, hd64 heads 64/8, a workspace
//            of attention_workspace_size() bytes (its 256 CTAs fill the
//            GPU, so flash runs it unsplit)
// Sinks are one float per query head, all 2.0; ALiBi slopes 2^(-8h/H).
// Then append and attend (AttentionParams::k_new): decode, heads 32/8,
// head_dim 128, dense cache with seqused_k, at batch 32 x 32k, 1 x 32k and
// 1 x 4k keys, "features/append/<shape>/<plain|append|append_rotary>": the
// plain call, and the same call writing its last key itself first, without
// rotary and with NeoX rotary over 128 columns; the summary gives the ratios.
#pragma once

#include <cstdio>

#include "bench_env.h"

namespace flash_bench {

void register_feature_benchmarks(BenchEnv* env);
void print_feature_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
