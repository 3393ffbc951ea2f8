// flash_bench's inference-engine rows (--decode, --varlen, --window), and
// the decode rows that --serving shares with --decode (serving_bench.h).
//
//   Decode (--decode): one new token per sequence against a KV cache, the
//   call an inference engine makes every step. bf16, heads_q 32, heads_kv 8,
//   head_dim 128 (--decode_head_dims), seqlen_q 1, batch in {1, 8, 32}
//   (--decode_batches), KV length L in {4096, 32768} (--decode_seqlens; a
//   paged cache's last page partly filled where L is not a multiple of its
//   size), seqused_k = L for every sequence, num_splits 0 (auto) with a
//   workspace of attention_workspace_size() bytes. Three caches per shape:
//   dense [B, L, H, D], and paged with page_size 16 and 256 (pages of all
//   sequences in one pool, handed out in a fixed random permutation through
//   block_table). Rows "decode/bf16/hd128/q32kv8/B<b>/L<len>/<dense|paged16|
//   paged256>"; counters median_us, GB/s (K and V bytes, B*L*heads_kv*
//   head_dim*2 bytes each, over the median time) and frac_bandwidth (over
//   the read_bandwidth_4GiB ceiling measured by main()); the label is the
//   kernel configuration (query_kernel_choice). --serving asks for decode
//   rows too (dense and paged16 at its head dims); a shape both ask for is
//   one row, and each summary prints its own rows.
//
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_env.h"
#include "options.h"

namespace flash_bench {

// The decode rows' shapes (bf16, seqlen_q 1).
constexpr int64_t kDecodeHeadsQ = 32;
constexpr int64_t kDecodeHeadsKv = 8;

// One decode row: `batch` sequences of `seqlen_k` keys each at `head_dim`,
// on a dense cache (page_size 0) or a paged one.
struct DecodeKey {
  int64_t batch;
  int64_t seqlen_k;
  int64_t page_size;  // 0: dense
  int64_t head_dim;
  bool fp8 = false;  // K and V e4m3 (AttentionParams::kv_dtype), Q and O bf16

  // head_dim, then L, then batch, then the cache (dense first), then bf16
  // before fp8: the order the rows run and the summaries print in.
  bool operator<(const DecodeKey& o) const;
};

// The decode rows --decode asks for: decode_head_dims x L x batch x {dense,
// paged16, paged256}.
std::vector<DecodeKey> decode_keys(const Options& options);

// Registers the row "read_bandwidth_4GiB", then one decode row per distinct
// key in `keys`, in DecodeKey order.
void register_decode_benchmarks(BenchEnv* env, const std::vector<DecodeKey>& keys);

// Prints "## <title>", the decode rows' conditions and the read ceiling,
// then a markdown table of those of `keys` that ran, in DecodeKey order:
// kernel, workspace, us, GB/s, fraction of the read ceiling and, when
// `paged_vs_dense`, beside each paged row the dense row's time over its own
// (its speed relative to the dense cache; equally, its GB/s over the
// dense row's).
void print_decode_table(std::FILE* out, const BenchEnv& env, const char* title, const std::vector<DecodeKey>& keys,
                        bool paged_vs_dense);

// Registers the varlen prefill rows.
void register_varlen_benchmarks(BenchEnv* env);

// Registers the sliding-window rows.
void register_window_benchmarks(BenchEnv* env);

// Markdown tables of the rows that ran ("" when none did). The decode table
// holds the rows of decode_keys(env.options) only.
void print_decode_summary(std::FILE* out, const BenchEnv& env);

// --fp8's rows: decode_head_dims x L x batch x {dense, paged16} x {bf16, e4m3 K/V}.
std::vector<DecodeKey> fp8_decode_keys(const Options& options);
// Their table: each e4m3 row beside the bf16 row of its shape.
void print_fp8_decode_summary(std::FILE* out, const BenchEnv& env);
void print_varlen_summary(std::FILE* out, const BenchEnv& env);
void print_window_summary(std::FILE* out, const BenchEnv& env);

}  // namespace flash_bench
