// flash_bench --serving: the calls an inference engine's serving path makes,
// each beside the same call on a dense cache.
//
//   Chunked prefill: bf16, batch 4, heads_q 32, heads_kv 8, causal, 2048 new
//   queries (seqlen_q 2048, Q and O dense [B, 2048, Hq, D]) against 16384
//   cached keys, the 2048 new keys being the last of them: causal aligned
//   bottom-right, query row i sees keys 0 .. 14336 + i. Head dims
//   --serving_head_dims (default: those of 64, 128, 256 compiled in). Caches
//   per head dim:
//     dense    K, V [B, 16384, Hkv, D], seqlen_k 16384, no seqused_k;
//     seqused  K, V [B, 20480, Hkv, D] (room for 20480 keys), seqlen_k
//              20480, seqused_k = 16384 for every sequence;
//     paged<P> P in {1, 16, 64, 256}: one pool of B * 16384 / P pages
//              [P, Hkv, D] handed out in a fixed random permutation through
//              block_table (as the decode rows' paged caches), seqlen_k
//              16384, seqused_k 16384.
//   Rows "serving/prefill/bf16/hd<D>/q32kv8/B4/Q2048/K16384/<dense|seqused|
//   paged<P>>", on the run's --backend; counters median_ms, TFLOP/s,
//   frac_ceiling; the label is the kernel configuration. FLOPs = 4 * batch
//   * heads_q * head_dim * visible pairs, counted exactly (2048 * 14337 +
//   2047 * 2048 / 2 pairs per sequence and head), the same for every cache,
//   so the summary's "vs dense" (TFLOP/s over the dense row's at the same
//   head dim) is the dense row's time over this row's.
//
//   Decode: the --decode rows (inference_bench.h) at --serving_head_dims,
//   batch 1, 8, 32, L 4096 and 32768 (--decode_batches, --decode_seqlens),
//   on a dense cache and a paged one of
//   16-key pages; registered through register_decode_benchmarks, so a shape
//   --decode also asks for is one row. The summary puts the dense row's time
//   over the paged row's beside each paged row.
//
// Both time like every row (warm-up, L2 flushed before each timed launch,
// CUDA events, median). print_serving_summary prints the tables "## serving
// prefill" and "## serving decode".
#pragma once

#include <cstdio>
#include <vector>

#include "bench_env.h"
#include "inference_bench.h"
#include "options.h"

namespace flash_bench {

// The decode rows --serving asks for (to register with --decode's through
// register_decode_benchmarks).
std::vector<DecodeKey> serving_decode_keys(const Options& options);

// Registers the chunked prefill rows.
void register_serving_prefill_benchmarks(BenchEnv* env);

// Markdown tables "## serving prefill" and "## serving decode" of the rows
// that ran, ratios to the dense cache beside each row.
void print_serving_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
