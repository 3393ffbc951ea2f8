#include "inference_bench.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bandwidth_ceiling.h"
#include "bench_util.h"
#include "flash/flash.hpp"
#include "options.h"
#include "row_setup.h"

namespace flash_bench {

bool DecodeKey::operator<(const DecodeKey& o) const {
  return std::make_tuple(head_dim, seqlen_k, batch, page_size, fp8) <
         std::make_tuple(o.head_dim, o.seqlen_k, o.batch, o.page_size, o.fp8);
}

namespace {

constexpr flash::DType kDtype = kRowDtype;
constexpr int64_t kElemBytes = kRowElemBytes;
constexpr int64_t kHeadDim = 128;

// The decode caches --decode runs per shape.
constexpr int64_t kDecodePageSizes[] = {0, 16, 256};  // 0: a dense cache

// Varlen prefill shapes.
constexpr int64_t kVarlenBatch = 64;
constexpr int64_t kVarlenMinLen = 100;
constexpr int64_t kVarlenMaxLen = 8192;
constexpr int64_t kVarlenHeads = 16;
constexpr uint32_t kVarlenSeed = 2026;

// Sliding-window prefill shapes.
constexpr int64_t kWindowSeqlen = 16384;
constexpr int64_t kWindowLefts[] = {1024, 4096};

// ---- Decode ----

std::string decode_row_name(const DecodeKey& key) {
  return std::string(key.fp8 ? "decode/bf16-e4m3kv/hd" : "decode/bf16/hd") + std::to_string(key.head_dim) + "/q" + std::to_string(kDecodeHeadsQ) + "kv" +
         std::to_string(kDecodeHeadsKv) + "/B" + std::to_string(key.batch) + "/L" + std::to_string(key.seqlen_k) + "/" +
         cache_name(key.page_size);
}

// K and V bytes a decode call must read once: B * L * heads_kv * head_dim
// elements of each (one byte each in e4m3).
double decode_kv_bytes(const DecodeKey& key) {
  return 2.0 * static_cast<double>(key.batch) * static_cast<double>(key.seqlen_k) * kDecodeHeadsKv * key.head_dim *
         (key.fp8 ? 1 : kElemBytes);
}

// The tensors and parameters of one decode row.
struct DecodeRun {
  DeviceBuffer q, k, v, o, seqused_k, block_table, workspace;
  flash::AttentionParams p;

  std::string setup(BenchEnv& env, const DecodeKey& key) {
    p.dtype = kDtype;
    p.batch = key.batch;
    p.seqlen_q = 1;
    p.seqlen_k = key.seqlen_k;
    p.heads_q = kDecodeHeadsQ;
    p.heads_kv = kDecodeHeadsKv;
    p.head_dim = key.head_dim;
    if (key.fp8) p.kv_dtype = flash::KvDType::kFloat8E4M3;  // no descales: 1
    p.set_contiguous_bnhd();  // Q, O [B, 1, Hq, D]; a dense cache [B, L, Hkv, D]
    p.backend = env.options.backend;
    p.num_splits = env.options.num_splits;  // 0, the default: flash splits the keys when the workspace allows it
    // A paged cache: one pool of B * ceil(L / page_size) pages in a random
    // order.
    std::vector<int32_t> table;
    if (key.page_size > 0) table = make_paged_cache(&p, key.seqlen_k, key.page_size);
    const std::vector<int32_t> used(static_cast<size_t>(key.batch), static_cast<int32_t>(key.seqlen_k));
    const size_t q_elems = static_cast<size_t>(p.batch * p.heads_q * p.head_dim);
    const int64_t kv_rows = key.page_size > 0 ? p.num_pages * key.page_size : key.batch * key.seqlen_k;
    const size_t kv_elems = static_cast<size_t>(kv_rows * p.heads_kv * p.head_dim);
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_kv_filled(env, &k, &v, kv_elems, key.fp8);
    if (err.empty()) err = o.allocate(q_elems * kElemBytes, "cudaMalloc(O)");
    if (err.empty()) err = upload(env, used, &seqused_k, "seqused_k");
    if (err.empty() && !table.empty()) err = upload(env, table, &block_table, "block_table");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.o = o.get();
    p.seqused_k = static_cast<const int32_t*>(seqused_k.get());
    p.block_table = table.empty() ? nullptr : static_cast<const int32_t*>(block_table.get());
    // The workspace, sized for this call (none: flash would not split it).
    return attach_workspace(&p, &workspace);
  }
};

// What one decode row measured.
struct DecodeFigures {
  double median_us = 0.0;
  double gbps = 0.0;
  size_t workspace_bytes = 0;
  std::string config;
};

std::map<DecodeKey, DecodeFigures>& decode_results() {
  static std::map<DecodeKey, DecodeFigures> rows;
  return rows;
}

void bench_decode(benchmark::State& state, BenchEnv* env, DecodeKey key) {
  DecodeRun run;
  const std::string err = run.setup(*env, key);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  auto launch = [&]() -> std::string {
    return status_error("flash::attention_forward", flash::attention_forward(run.p, env->stream));
  };
  std::vector<double> ms;
  if (!run_timed_loop(state, *env, env->options.flash_warmup, launch, &ms)) return;

  DecodeFigures f;
  const double median_ms = median(ms);
  f.median_us = median_ms * 1e3;
  f.gbps = median_ms > 0.0 ? decode_kv_bytes(key) / (median_ms * 1e-3) / 1e9 : 0.0;
  f.workspace_bytes = run.p.workspace_bytes;
  f.config = kernel_name(run.p);
  state.counters["median_us"] = benchmark::Counter(f.median_us);
  state.counters["GB/s"] = benchmark::Counter(f.gbps);
  state.counters["frac_bandwidth"] = benchmark::Counter(env->bandwidth_gbps > 0.0 ? f.gbps / env->bandwidth_gbps : 0.0);
  state.counters["workspace_bytes"] = benchmark::Counter(static_cast<double>(f.workspace_bytes));
  state.SetLabel(f.config);
  std::lock_guard<std::mutex> lock(rows_mutex());
  decode_results()[key] = f;
}

// ---- Varlen prefill ----

// The 64 sequence lengths, uniform in [kVarlenMinLen, kVarlenMaxLen], the
// same every run (mt19937's output is fixed by the standard; the modulo's
// bias is below 2e-6).
std::vector<int64_t> varlen_lengths() {
  std::mt19937 rng(kVarlenSeed);
  std::vector<int64_t> lengths(kVarlenBatch);
  for (int64_t& n : lengths) n = kVarlenMinLen + static_cast<int64_t>(rng() % (kVarlenMaxLen - kVarlenMinLen + 1));
  return lengths;
}

int64_t varlen_total(const std::vector<int64_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
}

// The dense comparison's length: the mean, rounded, so both calls hold
// (almost exactly) the same number of tokens.
int64_t varlen_mean(const std::vector<int64_t>& lengths) {
  return static_cast<int64_t>(std::llround(static_cast<double>(varlen_total(lengths)) / kVarlenBatch));
}

// Visible (query, key) pairs of one self-attention sequence of n tokens,
// exactly: n^2, or n(n+1)/2 under the (bottom-right = top-left here) causal mask.
double sequence_pairs(int64_t n, bool causal) {
  const double d = static_cast<double>(n);
  return causal ? d * (d + 1.0) / 2.0 : d * d;
}

struct VarlenKey {
  bool causal;
  bool packed;  // true: the varlen call; false: the dense batch at the mean length

  bool operator<(const VarlenKey& o) const {
    return std::make_tuple(causal, !packed) < std::make_tuple(o.causal, !o.packed);
  }
};

std::string varlen_row_name(const VarlenKey& key) {
  return "varlen/bf16/hd" + std::to_string(kHeadDim) + "/h" + std::to_string(kVarlenHeads) + "/" +
         (key.causal ? "causal" : "noncausal") + "/" + (key.packed ? "packed" : "dense");
}

struct VarlenRun {
  DeviceBuffer q, k, v, o, cu_seqlens;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const VarlenKey& key) {
    const std::vector<int64_t> lengths = varlen_lengths();
    std::vector<int32_t> cu(lengths.size() + 1, 0);
    for (size_t b = 0; b < lengths.size(); ++b) cu[b + 1] = cu[b] + static_cast<int32_t>(lengths[b]);
    const int64_t total = cu.back();
    const int64_t mean = varlen_mean(lengths);
    const int64_t max_len = *std::max_element(lengths.begin(), lengths.end());

    p.dtype = kDtype;
    p.batch = kVarlenBatch;
    p.heads_q = p.heads_kv = kVarlenHeads;
    p.head_dim = kHeadDim;
    p.causal = key.causal;
    p.backend = env.options.backend;
    double pairs = 0.0;
    int64_t tokens = 0;
    if (key.packed) {
      // Q, K, V, O packed [total, H, D]; seqlen_q/k is the longest sequence.
      p.seqlen_q = p.seqlen_k = max_len;
      tokens = total;
      for (int64_t n : lengths) pairs += sequence_pairs(n, key.causal);
    } else {
      p.seqlen_q = p.seqlen_k = mean;
      tokens = kVarlenBatch * mean;
      pairs = kVarlenBatch * sequence_pairs(mean, key.causal);
    }
    // Sequence and head strides of [tokens, H, D]; the batch stride is
    // ignored for the packed call.
    p.set_contiguous_bnhd();
    flops = 4.0 * kVarlenHeads * kHeadDim * pairs;

    const size_t elems = static_cast<size_t>(tokens * kVarlenHeads * kHeadDim);
    std::string err = alloc_filled(env, &q, elems, 1, "Q");
    if (err.empty()) err = alloc_filled(env, &k, elems, 2, "K");
    if (err.empty()) err = alloc_filled(env, &v, elems, 3, "V");
    if (err.empty()) err = o.allocate(elems * kElemBytes, "cudaMalloc(O)");
    if (err.empty() && key.packed) err = upload(env, cu, &cu_seqlens, "cu_seqlens");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.o = o.get();
    if (key.packed) {
      p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int32_t*>(cu_seqlens.get());
      // The packed tensors' rows (exact): with them the Hopper kernel can
      // take the varlen call (without them it runs the sm80 kernel).
      p.total_q = p.total_k = total;
    }
    return err;
  }
};

std::map<VarlenKey, PrefillFigures>& varlen_results() {
  static std::map<VarlenKey, PrefillFigures> rows;
  return rows;
}

void bench_varlen(benchmark::State& state, BenchEnv* env, VarlenKey key) {
  bench_prefill<VarlenRun>(state, env, key, &varlen_results());
}

struct WindowKey {
  int64_t window_left;
  flash::Backend backend;

  bool operator<(const WindowKey& o) const {
    return std::make_tuple(window_left, static_cast<int>(backend)) <
           std::make_tuple(o.window_left, static_cast<int>(o.backend));
  }
};

std::string window_row_name(const WindowKey& key) {
  return "window/bf16/hd" + std::to_string(kHeadDim) + "/q" + std::to_string(kDecodeHeadsQ) + "kv" +
         std::to_string(kDecodeHeadsKv) + "/N" + std::to_string(kWindowSeqlen) + "/W" +
         std::to_string(key.window_left) + "/" + backend_name(key.backend);
}

struct WindowRun {
  DeviceBuffer q, k, v, o;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const WindowKey& key) {
    p.dtype = kDtype;
    p.batch = 1;
    p.seqlen_q = p.seqlen_k = kWindowSeqlen;
    p.heads_q = kDecodeHeadsQ;
    p.heads_kv = kDecodeHeadsKv;
    p.head_dim = kHeadDim;
    p.causal = true;
    p.window_left = key.window_left;
    p.backend = key.backend;
    p.set_contiguous_bnhd();
    flops = 4.0 * static_cast<double>(kDecodeHeadsQ * kHeadDim) * window_pairs(kWindowSeqlen, key.window_left);
    const size_t q_elems = static_cast<size_t>(kWindowSeqlen * kDecodeHeadsQ * kHeadDim);
    const size_t kv_elems = static_cast<size_t>(kWindowSeqlen * kDecodeHeadsKv * kHeadDim);
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_filled(env, &k, kv_elems, 2, "K");
    if (err.empty()) err = alloc_filled(env, &v, kv_elems, 3, "V");
    if (err.empty()) err = o.allocate(q_elems * kElemBytes, "cudaMalloc(O)");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.o = o.get();
    return err;
  }
};

std::map<WindowKey, PrefillFigures>& window_results() {
  static std::map<WindowKey, PrefillFigures> rows;
  return rows;
}

void bench_window(benchmark::State& state, BenchEnv* env, WindowKey key) {
  bench_prefill<WindowRun>(state, env, key, &window_results());
}

}  // namespace

std::vector<DecodeKey> decode_keys(const Options& options) {
  std::vector<DecodeKey> keys;
  for (int64_t head_dim : options.decode_head_dims) {
    for (int64_t seqlen_k : options.decode_seqlens) {
      for (int64_t batch : options.decode_batches) {
        for (int64_t page_size : kDecodePageSizes) keys.push_back(DecodeKey{batch, seqlen_k, page_size, head_dim});
      }
    }
  }
  return keys;
}

void register_decode_benchmarks(BenchEnv* env, const std::vector<DecodeKey>& keys) {
  const Options& o = env->options;
  benchmark::RegisterBenchmark("read_bandwidth_4GiB", bench_bandwidth, env)
      ->UseManualTime()
      ->Iterations(o.gemm_iters)
      ->Unit(benchmark::kMillisecond);
  // A set: a shape both --decode and --serving ask for is one row.
  for (const DecodeKey& key : std::set<DecodeKey>(keys.begin(), keys.end())) {
    benchmark::RegisterBenchmark(decode_row_name(key).c_str(), bench_decode, env, key)
        ->UseManualTime()
        ->Iterations(o.flash_iters)
        ->Unit(benchmark::kMicrosecond);
  }
}

void register_varlen_benchmarks(BenchEnv* env) {
  for (bool causal : {false, true}) {
    for (bool packed : {true, false}) {
      const VarlenKey key{causal, packed};
      benchmark::RegisterBenchmark(varlen_row_name(key).c_str(), bench_varlen, env, key)
          ->UseManualTime()
          ->Iterations(env->options.flash_iters)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void register_window_benchmarks(BenchEnv* env) {
  std::vector<flash::Backend> backends = {env->options.backend};
  if (env->options.backend != flash::Backend::kSm80) backends.push_back(flash::Backend::kSm80);
  for (int64_t w : kWindowLefts) {
    for (flash::Backend backend : backends) {
      const WindowKey key{w, backend};
      benchmark::RegisterBenchmark(window_row_name(key).c_str(), bench_window, env, key)
          ->UseManualTime()
          ->Iterations(env->options.flash_iters)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

namespace {

// The decode tables' first line: the read ceiling measured in this run.
void print_read_ceiling(std::FILE* out, const BenchEnv& env) {
  std::fprintf(out, "- read ceiling: %.1f GiB streamed with 16-byte loads, median: %.0f GB/s; L2 flushed by %s\n",
               static_cast<double>(kBandwidthBytes) / (1 << 30), env.bandwidth_gbps,
               env.flusher.reads() ? "reading (--l2_flush=read)" : "writing (cudaMemsetAsync)");
}

}  // namespace

void print_decode_table(std::FILE* out, const BenchEnv& env, const char* title, const std::vector<DecodeKey>& keys,
                        bool paged_vs_dense) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## %s\n\n", title);
  print_read_ceiling(out, env);
  std::fprintf(out,
               "- bf16, heads_q %lld, heads_kv %lld, head_dim as listed, seqlen_q 1, seqused_k = L, num_splits %d%s "
               "with a workspace of attention_workspace_size() bytes, backend %s\n",
               static_cast<long long>(kDecodeHeadsQ), static_cast<long long>(kDecodeHeadsKv), env.options.num_splits,
               env.options.num_splits == 0 ? " (auto)" : "", backend_name(env.options.backend));
  std::fprintf(out, "- GB/s = K and V bytes (2 * B * L * heads_kv * head_dim * 2 B) / median time\n");
  if (paged_vs_dense) {
    std::fprintf(out, "- vs dense: the dense row's time / this row's (= this row's GB/s / the dense row's)\n");
  }
  std::fprintf(out, "\n");
  const std::map<DecodeKey, DecodeFigures>& results = decode_results();
  const std::set<DecodeKey> wanted(keys.begin(), keys.end());
  bool any = false;
  for (const DecodeKey& key : wanted) any = any || results.count(key) > 0;
  if (!any) {
    std::fprintf(out, "(no %s rows ran)\n", title);
    return;
  }
  std::fprintf(out, "| head_dim | L | batch | cache | kernel | workspace | us | GB/s | frac of read |%s\n",
               paged_vs_dense ? " vs dense |" : "");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|%s\n", paged_vs_dense ? "---|" : "");
  for (const DecodeKey& key : wanted) {
    const auto row = results.find(key);
    if (row == results.end()) continue;
    const DecodeFigures& f = row->second;
    char frac[32] = "-";
    if (env.bandwidth_gbps > 0.0) std::snprintf(frac, sizeof(frac), "%.3f", f.gbps / env.bandwidth_gbps);
    std::fprintf(out, "| %lld | %lld | %lld | %s | %s | %zu | %.1f | %.0f | %s |",
                 static_cast<long long>(key.head_dim), static_cast<long long>(key.seqlen_k),
                 static_cast<long long>(key.batch), cache_name(key.page_size).c_str(), f.config.c_str(),
                 f.workspace_bytes, f.median_us, f.gbps, frac);
    if (paged_vs_dense) {
      char ratio[32] = "-";
      const auto dense = results.find(DecodeKey{key.batch, key.seqlen_k, 0, key.head_dim});
      if (key.page_size > 0 && dense != results.end() && f.median_us > 0.0) {
        std::snprintf(ratio, sizeof(ratio), "%.2fx", dense->second.median_us / f.median_us);
      }
      std::fprintf(out, " %s |", ratio);
    }
    std::fprintf(out, "\n");
  }
  std::fflush(out);
}

void print_decode_summary(std::FILE* out, const BenchEnv& env) {
  print_decode_table(out, env, "decode", decode_keys(env.options), /*paged_vs_dense=*/false);
}

std::vector<DecodeKey> fp8_decode_keys(const Options& options) {
  std::vector<DecodeKey> keys;
  for (int64_t head_dim : options.decode_head_dims) {
    for (int64_t seqlen_k : options.decode_seqlens) {
      for (int64_t batch : options.decode_batches) {
        for (int64_t page_size : {0, 16}) {
          for (bool fp8 : {false, true}) keys.push_back(DecodeKey{batch, seqlen_k, page_size, head_dim, fp8});
        }
      }
    }
  }
  return keys;
}

void print_fp8_decode_summary(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## fp8 KV cache decode\n\n");
  print_read_ceiling(out, env);
  std::fprintf(out,
               "- Q and O bf16, K and V bf16 or e4m3 (kv_dtype, no descales), heads_q %lld, heads_kv %lld, seqlen_q "
               "1, seqused_k = L, num_splits %d%s with a workspace of attention_workspace_size() bytes, backend %s\n",
               static_cast<long long>(kDecodeHeadsQ), static_cast<long long>(kDecodeHeadsKv), env.options.num_splits,
               env.options.num_splits == 0 ? " (auto)" : "", backend_name(env.options.backend));
  std::fprintf(out,
               "- GB/s = K and V bytes (2 * B * L * heads_kv * head_dim * 2 or 1 B) / median time; vs bf16 = the "
               "bf16 row's time / this row's; vs dense = the dense e4m3 row's time / this row's\n\n");
  const std::map<DecodeKey, DecodeFigures>& results = decode_results();
  bool any = false;
  for (const DecodeKey& key : fp8_decode_keys(env.options)) any = any || results.count(key) > 0;
  if (!any) {
    std::fprintf(out, "(no fp8 decode rows ran)\n");
    return;
  }
  std::fprintf(out, "| head_dim | L | batch | cache | kv | kernel | us | GB/s | frac of read | vs bf16 | vs dense |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const DecodeKey& key : fp8_decode_keys(env.options)) {
    const auto row = results.find(key);
    if (row == results.end()) continue;
    const DecodeFigures& f = row->second;
    char frac[32] = "-", vs_bf16[32] = "-", vs_dense[32] = "-";
    if (env.bandwidth_gbps > 0.0) std::snprintf(frac, sizeof(frac), "%.3f", f.gbps / env.bandwidth_gbps);
    if (key.fp8) {
      const auto bf16 = results.find(DecodeKey{key.batch, key.seqlen_k, key.page_size, key.head_dim, false});
      if (bf16 != results.end() && f.median_us > 0.0) {
        std::snprintf(vs_bf16, sizeof(vs_bf16), "%.2fx", bf16->second.median_us / f.median_us);
      }
      const auto dense = results.find(DecodeKey{key.batch, key.seqlen_k, 0, key.head_dim, true});
      if (key.page_size > 0 && dense != results.end() && f.median_us > 0.0) {
        std::snprintf(vs_dense, sizeof(vs_dense), "%.2fx", dense->second.median_us / f.median_us);
      }
    }
    std::fprintf(out, "| %lld | %lld | %lld | %s | %s | %s | %.1f | %.0f | %s | %s | %s |\n",
                 static_cast<long long>(key.head_dim), static_cast<long long>(key.seqlen_k),
                 static_cast<long long>(key.batch), cache_name(key.page_size).c_str(), key.fp8 ? "e4m3" : "bf16",
                 f.config.c_str(), f.median_us, f.gbps, frac, vs_bf16, vs_dense);
  }
  std::fflush(out);
}

void print_varlen_summary(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  const std::vector<int64_t> lengths = varlen_lengths();
  const int64_t mean = varlen_mean(lengths);
  std::fprintf(out, "\n## varlen prefill\n\n");
  std::fprintf(out,
               "- %lld sequences, lengths uniform in [%lld, %lld] (seed %u): %lld tokens, longest %lld; dense: "
               "%lld x %lld = %lld tokens\n",
               static_cast<long long>(kVarlenBatch), static_cast<long long>(kVarlenMinLen),
               static_cast<long long>(kVarlenMaxLen), kVarlenSeed, static_cast<long long>(varlen_total(lengths)),
               static_cast<long long>(*std::max_element(lengths.begin(), lengths.end())),
               static_cast<long long>(kVarlenBatch), static_cast<long long>(mean),
               static_cast<long long>(kVarlenBatch * mean));
  std::fprintf(out,
               "- bf16, heads %lld, head_dim %lld, backend %s; the varlen call gives total_q = total_k = the "
               "token count; FLOPs = 4 * heads * head_dim * real pairs (n^2, causal n(n+1)/2 per sequence)\n\n",
               static_cast<long long>(kVarlenHeads), static_cast<long long>(kHeadDim),
               backend_name(env.options.backend));
  if (varlen_results().empty()) {
    std::fprintf(out, "(no varlen rows ran)\n");
    return;
  }
  std::fprintf(out, "| causal | varlen kernel | varlen TFLOP/s | dense kernel | dense TFLOP/s | varlen / dense |\n");
  std::fprintf(out, "|---|---|---|---|---|---|\n");
  for (bool causal : {false, true}) {
    const auto packed = varlen_results().find(VarlenKey{causal, true});
    const auto dense = varlen_results().find(VarlenKey{causal, false});
    const bool has_packed = packed != varlen_results().end();
    const bool has_dense = dense != varlen_results().end();
    if (!has_packed && !has_dense) continue;
    char packed_tflops[32] = "-";
    char dense_tflops[32] = "-";
    char ratio[32] = "-";
    if (has_packed) std::snprintf(packed_tflops, sizeof(packed_tflops), "%.1f", packed->second.tflops);
    if (has_dense) std::snprintf(dense_tflops, sizeof(dense_tflops), "%.1f", dense->second.tflops);
    if (has_packed && has_dense && dense->second.tflops > 0.0) {
      std::snprintf(ratio, sizeof(ratio), "%.3f", packed->second.tflops / dense->second.tflops);
    }
    std::fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", causal ? "yes" : "no",
                 has_packed ? packed->second.config.c_str() : "-", packed_tflops,
                 has_dense ? dense->second.config.c_str() : "-", dense_tflops, ratio);
  }
  std::fflush(out);
}

void print_window_summary(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## sliding window\n\n");
  std::fprintf(out,
               "- causal prefill with a left window W (row i sees keys i - W .. i), bf16, batch 1, N %lld, heads "
               "%lld/%lld, head_dim %lld; FLOPs = 4 * heads_q * head_dim * visible pairs (exact)\n\n",
               static_cast<long long>(kWindowSeqlen), static_cast<long long>(kDecodeHeadsQ),
               static_cast<long long>(kDecodeHeadsKv), static_cast<long long>(kHeadDim));
  if (window_results().empty()) {
    std::fprintf(out, "(no window rows ran)\n");
    return;
  }
  std::fprintf(out, "| W | backend | kernel | ms | TFLOP/s | frac of GEMM |\n");
  std::fprintf(out, "|---|---|---|---|---|---|\n");
  for (const auto& [key, f] : window_results()) {
    char frac[32] = "-";
    if (env.ceiling_tflops > 0.0) std::snprintf(frac, sizeof(frac), "%.3f", f.tflops / env.ceiling_tflops);
    std::fprintf(out, "| %lld | %s | %s | %.3f | %.1f | %s |\n", static_cast<long long>(key.window_left),
                 backend_name(key.backend), f.config.c_str(), f.median_ms, f.tflops, frac);
  }
  std::fflush(out);
}

}  // namespace flash_bench
