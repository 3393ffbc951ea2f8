// flash_bench's inference-engine rows (--decode, --varlen, --window).
//
//   Decode (--decode): one new token per sequence against a KV cache, the
//   call an inference engine makes every step. bf16, heads_q 32, heads_kv 8,
//   head_dim 128 (--decode_head_dims), seqlen_q 1, batch in {1, 8, 32}, KV length L in {4096,
//   32768}, seqused_k = L for every sequence, num_splits 0 (auto) with a
//   workspace of attention_workspace_size() bytes. Three caches per shape:
//   dense [B, L, H, D], and paged with page_size 16 and 256 (pages of all
//   sequences in one pool, handed out in a fixed random permutation through
//   block_table). Rows "decode/bf16/hd128/q32kv8/B<b>/L<len>/<dense|paged16|
//   paged256>"; counters median_us, GB/s (K and V bytes, B*L*heads_kv*
//   head_dim*2 bytes each, over the median time) and frac_bandwidth (over
//   the read_bandwidth_4GiB ceiling measured by main()); the label is the
//   kernel configuration (query_kernel_choice).
//
//   Varlen prefill (--varlen): 64 sequences with lengths uniform in [100,
//   8192] (fixed seed), bf16, heads 16/16, head_dim 128, causal and not.
//   "varlen/.../packed" runs them as one call on packed Q/K/V with
//   cu_seqlens_q/k; "varlen/.../dense" runs a dense batch of 64 sequences
//   all at the mean length (the same number of tokens). FLOPs count only
//   real (query, key) pairs, exactly: n^2 per sequence non-causal,
//   n(n+1)/2 causal (bottom-right; not the sweep's n^2/2 convention), so
//   the two rows' TFLOP/s compare directly; counters median_ms, TFLOP/s,
//   frac_ceiling (over the GEMM ceiling).
//
//   Sliding window (--window): causal prefill with a left window (Mistral
//   style: row i sees keys i - W .. i), bf16, heads 32/8, head_dim 128,
//   batch 1, N = 16384, W in {1024, 4096}, on the run's --backend and on
//   Backend::kSm80 (what windows ran on before the Hopper kernel had them).
//   Rows "window/bf16/hd128/q32kv8/N16384/W<w>/<backend>"; FLOPs count the
//   visible pairs exactly (sum over rows of min(i, W) + 1).
//
// Every row times like the sweep's (warm-up, L2 flushed before each timed
// launch, CUDA events, median). Summaries are printed after the run.
#pragma once

#include <cstdio>

#include "bench_env.h"

namespace flash_bench {

// Registers the decode rows and, before them, the row "read_bandwidth_4GiB".
void register_decode_benchmarks(BenchEnv* env);

// Registers the varlen prefill rows.
void register_varlen_benchmarks(BenchEnv* env);

// Registers the sliding-window rows.
void register_window_benchmarks(BenchEnv* env);

// Markdown tables of the rows that ran ("" when none did).
void print_decode_summary(std::FILE* out, const BenchEnv& env);
void print_varlen_summary(std::FILE* out, const BenchEnv& env);
void print_window_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
