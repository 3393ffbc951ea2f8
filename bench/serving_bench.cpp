#include "serving_bench.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "flash/flash.hpp"
#include "row_setup.h"

namespace flash_bench {
namespace {

// Chunked prefill shapes.
constexpr int64_t kServingBatch = 4;
constexpr int64_t kServingHeadsQ = 32;
constexpr int64_t kServingHeadsKv = 8;
constexpr int64_t kServingNewQueries = 2048;  // seqlen_q: the chunk of new tokens
constexpr int64_t kServingCachedKeys = 16384;  // keys per sequence, the chunk's own 2048 last
constexpr int64_t kServingCapacity = 20480;    // keys the seqused cache has room for
constexpr int64_t kServingPageSizes[] = {1, 16, 64, 256};
// The caches also run with K and V in e4m3 (kv_dtype): seqused and these pages.
constexpr int64_t kServingFp8PageSizes[] = {1, 16, 64};

// The decode caches --serving runs: dense and 16-key pages.
constexpr int64_t kServingDecodePageSizes[] = {0, 16};

enum class ServingCache { kDense, kSeqused, kPaged };

struct ServingPrefillKey {
  int64_t head_dim;
  ServingCache cache;
  int64_t page_size;  // kPaged only; 0 otherwise
  bool fp8 = false;   // K and V e4m3 (AttentionParams::kv_dtype), Q and O bf16

  bool operator<(const ServingPrefillKey& o) const {
    return std::make_tuple(head_dim, fp8, static_cast<int>(cache), page_size) <
           std::make_tuple(o.head_dim, o.fp8, static_cast<int>(o.cache), o.page_size);
  }
};

std::string serving_cache_name(const ServingPrefillKey& key) {
  const std::string suffix = key.fp8 ? " e4m3" : "";
  switch (key.cache) {
    case ServingCache::kDense: return "dense" + suffix;
    case ServingCache::kSeqused: return "seqused" + suffix;
    default: return cache_name(key.page_size) + suffix;
  }
}

std::string serving_row_name(const ServingPrefillKey& key) {
  return std::string(key.fp8 ? "serving/prefill/bf16-e4m3kv/hd" : "serving/prefill/bf16/hd") +
         std::to_string(key.head_dim) + "/q" + std::to_string(kServingHeadsQ) + "kv" +
         std::to_string(kServingHeadsKv) + "/B" + std::to_string(kServingBatch) + "/Q" +
         std::to_string(kServingNewQueries) + "/K" + std::to_string(kServingCachedKeys) + "/" +
         serving_cache_name(key);
}

// Visible (query, key) pairs of one sequence and head: query row i sees
// keys 0 .. kServingCachedKeys - kServingNewQueries + i (bottom-right causal).
double serving_pairs() { return exact_causal_pairs(kServingNewQueries, kServingCachedKeys); }

double serving_flops(int64_t head_dim) {
  return 4.0 * static_cast<double>(kServingBatch * kServingHeadsQ * head_dim) * serving_pairs();
}

// The tensors and parameters of one chunked prefill row.
struct ServingPrefillRun {
  DeviceBuffer q, k, v, o, seqused_k, block_table;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const ServingPrefillKey& key) {
    p.dtype = kRowDtype;
    p.batch = kServingBatch;
    p.seqlen_q = kServingNewQueries;
    // The seqused cache is allocated for more keys than it holds; the
    // others hold exactly what they are allocated for.
    p.seqlen_k = key.cache == ServingCache::kSeqused ? kServingCapacity : kServingCachedKeys;
    p.heads_q = kServingHeadsQ;
    p.heads_kv = kServingHeadsKv;
    p.head_dim = key.head_dim;
    p.causal = true;
    if (key.fp8) p.kv_dtype = flash::KvDType::kFloat8E4M3;  // no descales: 1
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();  // Q, O [B, 2048, Hq, D]; a dense cache [B, seqlen_k, Hkv, D]
    std::vector<int32_t> table;
    if (key.cache == ServingCache::kPaged) table = make_paged_cache(&p, kServingCachedKeys, key.page_size);
    flops = serving_flops(key.head_dim);

    const std::vector<int32_t> used(static_cast<size_t>(kServingBatch), static_cast<int32_t>(kServingCachedKeys));
    const size_t q_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
    // Dense: B * seqlen_k rows; paged: num_pages * page_size = B * 16384 rows.
    const size_t kv_elems = static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_kv_filled(env, &k, &v, kv_elems, key.fp8);
    if (err.empty()) err = o.allocate(q_elems * kRowElemBytes, "cudaMalloc(O)");
    if (err.empty() && key.cache != ServingCache::kDense) err = upload(env, used, &seqused_k, "seqused_k");
    if (err.empty() && !table.empty()) err = upload(env, table, &block_table, "block_table");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.o = o.get();
    if (key.cache != ServingCache::kDense) p.seqused_k = static_cast<const int32_t*>(seqused_k.get());
    if (!table.empty()) p.block_table = static_cast<const int32_t*>(block_table.get());
    return err;
  }
};

std::map<ServingPrefillKey, PrefillFigures>& serving_prefill_results() {
  static std::map<ServingPrefillKey, PrefillFigures> rows;
  return rows;
}

void bench_serving_prefill(benchmark::State& state, BenchEnv* env, ServingPrefillKey key) {
  bench_prefill<ServingPrefillRun>(state, env, key, &serving_prefill_results());
}

// Every cache of one head dim, dense first, then the e4m3 caches: the order of the rows.
std::vector<ServingPrefillKey> serving_prefill_keys(int64_t head_dim) {
  std::vector<ServingPrefillKey> keys = {{head_dim, ServingCache::kDense, 0}, {head_dim, ServingCache::kSeqused, 0}};
  for (int64_t page_size : kServingPageSizes) keys.push_back({head_dim, ServingCache::kPaged, page_size});
  keys.push_back({head_dim, ServingCache::kSeqused, 0, true});
  for (int64_t page_size : kServingFp8PageSizes) keys.push_back({head_dim, ServingCache::kPaged, page_size, true});
  return keys;
}

void print_prefill_table(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## serving prefill\n\n");
  std::fprintf(out,
               "- chunked prefill: bf16, batch %lld, heads_q %lld, heads_kv %lld, causal, %lld new queries against "
               "%lld cached keys, the new keys the last %lld of them (bottom-right: query row i sees keys 0 .. "
               "%lld + i), backend %s\n",
               static_cast<long long>(kServingBatch), static_cast<long long>(kServingHeadsQ),
               static_cast<long long>(kServingHeadsKv), static_cast<long long>(kServingNewQueries),
               static_cast<long long>(kServingCachedKeys), static_cast<long long>(kServingNewQueries),
               static_cast<long long>(kServingCachedKeys - kServingNewQueries), backend_name(env.options.backend));
  std::fprintf(out,
               "- caches: dense [B, %lld, Hkv, D]; seqused: dense [B, %lld, Hkv, D], seqlen_k %lld, seqused_k %lld; "
               "paged<P>: one pool of B * %lld / P pages [P, Hkv, D] in a fixed random order through block_table, "
               "seqused_k %lld\n",
               static_cast<long long>(kServingCachedKeys), static_cast<long long>(kServingCapacity),
               static_cast<long long>(kServingCapacity), static_cast<long long>(kServingCachedKeys),
               static_cast<long long>(kServingCachedKeys), static_cast<long long>(kServingCachedKeys));
  std::fprintf(out,
               "- FLOPs = 4 * batch * heads_q * head_dim * visible pairs (exact: %.0f per sequence and head); "
               "vs dense = TFLOP/s / the dense row's at the same head dim (= the dense row's time / this row's); "
               "e4m3: K and V in e4m3 (kv_dtype), Q and O bf16, no descales; vs bf16 = TFLOP/s / the same "
               "cache's in bf16\n\n",
               serving_pairs());
  const std::map<ServingPrefillKey, PrefillFigures>& results = serving_prefill_results();
  if (results.empty()) {
    std::fprintf(out, "(no serving prefill rows ran)\n");
    return;
  }
  std::fprintf(out, "| head_dim | cache | kernel | ms | TFLOP/s | frac of GEMM | vs dense | vs bf16 |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, f] : results) {
    char frac[32] = "-";
    char ratio[32] = "-";
    char vs_bf16[32] = "-";
    if (env.ceiling_tflops > 0.0) std::snprintf(frac, sizeof(frac), "%.3f", f.tflops / env.ceiling_tflops);
    const auto dense = results.find(ServingPrefillKey{key.head_dim, ServingCache::kDense, 0});
    if ((key.cache != ServingCache::kDense || key.fp8) && dense != results.end() && dense->second.tflops > 0.0) {
      std::snprintf(ratio, sizeof(ratio), "%.2fx", f.tflops / dense->second.tflops);
    }
    const auto bf16 = results.find(ServingPrefillKey{key.head_dim, key.cache, key.page_size});
    if (key.fp8 && bf16 != results.end() && bf16->second.tflops > 0.0) {
      std::snprintf(vs_bf16, sizeof(vs_bf16), "%.2fx", f.tflops / bf16->second.tflops);
    }
    std::fprintf(out, "| %lld | %s | %s | %.3f | %.1f | %s | %s | %s |\n", static_cast<long long>(key.head_dim),
                 serving_cache_name(key).c_str(), f.config.c_str(), f.median_ms, f.tflops, frac, ratio, vs_bf16);
  }
  std::fflush(out);
}

}  // namespace

std::vector<DecodeKey> serving_decode_keys(const Options& options) {
  std::vector<DecodeKey> keys;
  for (int64_t head_dim : options.serving_head_dims) {
    for (int64_t seqlen_k : options.decode_seqlens) {
      for (int64_t batch : options.decode_batches) {
        for (int64_t page_size : kServingDecodePageSizes) keys.push_back(DecodeKey{batch, seqlen_k, page_size, head_dim});
      }
    }
  }
  return keys;
}

void register_serving_prefill_benchmarks(BenchEnv* env) {
  for (int64_t head_dim : env->options.serving_head_dims) {
    for (const ServingPrefillKey& key : serving_prefill_keys(head_dim)) {
      benchmark::RegisterBenchmark(serving_row_name(key).c_str(), bench_serving_prefill, env, key)
          ->UseManualTime()
          ->Iterations(env->options.flash_iters)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void print_serving_summary(std::FILE* out, const BenchEnv& env) {
  print_prefill_table(out, env);
  print_decode_table(out, env, "serving decode", serving_decode_keys(env.options), /*paged_vs_dense=*/true);
}

}  // namespace flash_bench
