// flash_bench --mla (mla_rows.h).
#include "mla_rows.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "row_setup.h"

namespace flash_bench {
namespace {

constexpr int64_t kMlaHeadDim = 576;
constexpr int64_t kMlaHeadDimV = 512;
constexpr int64_t kMlaPageSize = 64;

struct MlaKey {
  int64_t batch;
  int64_t keys;
  int64_t heads;
  bool ragged = false;  // lengths keys * (j + 1) / batch, j < batch, shuffled (mla_lengths)

  bool operator<(const MlaKey& o) const {
    return std::make_tuple(batch, keys, heads, ragged) < std::make_tuple(o.batch, o.keys, o.heads, o.ragged);
  }
};

const std::vector<MlaKey>& mla_keys() {
  static const std::vector<MlaKey> keys = {{64, 8192, 128},        {64, 8192, 16},          {32, 4096, 128},
                                           {1, 32768, 128},        {64, 16384, 128, true},  {128, 16384, 128, true}};
  return keys;
}

std::string mla_row_name(const MlaKey& key) {
  return "mla/bf16/B" + std::to_string(key.batch) + "/K" + std::to_string(key.keys) + "/H" +
         std::to_string(key.heads) + "/paged" + std::to_string(kMlaPageSize) + (key.ragged ? "/ragged" : "");
}

// Keys of each sequence (seqused_k). Ragged: keys * (i + 1) / batch for
// i = 0 .. batch - 1, in a fixed shuffled order (Fisher-Yates on a 64-bit
// LCG, so every toolchain deals the same batch).
std::vector<int32_t> mla_lengths(const MlaKey& key) {
  std::vector<int32_t> lengths(static_cast<size_t>(key.batch), static_cast<int32_t>(key.keys));
  if (key.ragged) {
    for (int64_t i = 0; i < key.batch; ++i) lengths[i] = static_cast<int32_t>(key.keys * (i + 1) / key.batch);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int64_t i = key.batch - 1; i > 0; --i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(lengths[i], lengths[(state >> 33) % static_cast<uint64_t>(i + 1)]);
    }
  }
  return lengths;
}

double mla_total_keys(const MlaKey& key) {
  double total = 0.0;
  for (int32_t len : mla_lengths(key)) total += len;
  return total;
}

double mla_bytes(const MlaKey& key) { return mla_total_keys(key) * kMlaHeadDim * kRowElemBytes; }

double mla_flops(const MlaKey& key) {
  return 2.0 * static_cast<double>(key.heads) * mla_total_keys(key) * (kMlaHeadDim + kMlaHeadDimV);
}

std::map<MlaKey, PrefillFigures>& mla_results() {
  static std::map<MlaKey, PrefillFigures> results;
  return results;
}

struct MlaRun {
  DeviceBuffer q, kv, o, seqused, table, workspace;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const MlaKey& key) {
    flops = mla_flops(key);
    p.dtype = kRowDtype;
    p.batch = key.batch;
    p.seqlen_q = 1;
    p.seqlen_k = key.keys;
    p.heads_q = key.heads;
    p.heads_kv = 1;
    p.head_dim = kMlaHeadDim;
    p.head_dim_v = kMlaHeadDimV;
    p.softmax_scale = 1.f / std::sqrt(192.f);
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();  // V gets K's strides at MLA's shape
    const std::vector<int32_t> pages = make_paged_cache(&p, key.keys, kMlaPageSize);
    const std::vector<int32_t> lengths = mla_lengths(key);
    const size_t q_elems = static_cast<size_t>(key.batch * key.heads * kMlaHeadDim);
    const size_t kv_elems = static_cast<size_t>(p.num_pages * kMlaPageSize * kMlaHeadDim);
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_filled(env, &kv, kv_elems, 2, "K");
    if (err.empty()) err = o.allocate(static_cast<size_t>(key.batch * key.heads * kMlaHeadDimV) * kRowElemBytes,
                                      "cudaMalloc(O)");
    if (err.empty()) err = upload(env, pages, &table, "block_table");
    if (err.empty()) err = upload(env, lengths, &seqused, "seqused_k");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p.q = q.get();
    p.k = kv.get();
    p.v = kv.get();
    p.o = o.get();
    p.block_table = static_cast<const int32_t*>(table.get());
    p.seqused_k = static_cast<const int32_t*>(seqused.get());
    return attach_workspace(&p, &workspace);
  }
};

void bench_mla(benchmark::State& state, BenchEnv* env, MlaKey key) {
  bench_prefill<MlaRun>(state, env, key, &mla_results());
}

}  // namespace

void register_mla_benchmarks(BenchEnv* env) {
  for (const MlaKey& key : mla_keys()) {
    benchmark::RegisterBenchmark(mla_row_name(key).c_str(), bench_mla, env, key)
        ->UseManualTime()
        ->Iterations(env->options.flash_iters)
        ->Unit(benchmark::kMillisecond);
  }
}

void print_mla_summary(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## mla decode\n\n");
  std::fprintf(out, "| batch | keys | heads | kernel | us | GB/s | frac of read | TFLOP/s | frac of GEMM |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|\n");
  for (const MlaKey& key : mla_keys()) {
    const auto it = mla_results().find(key);
    if (it == mla_results().end()) continue;
    const PrefillFigures& f = it->second;
    const double gbps = f.median_ms > 0.0 ? mla_bytes(key) / (f.median_ms * 1e-3) / 1e9 : 0.0;
    std::fprintf(out, "| %lld | %s%lld | %lld | %s | %.1f | %.0f | %.3f | %.1f | %.3f |\n",
                 static_cast<long long>(key.batch), key.ragged ? "ragged to " : "", static_cast<long long>(key.keys),
                 static_cast<long long>(key.heads), f.config.c_str(), f.median_ms * 1e3, gbps,
                 env.bandwidth_gbps > 0.0 ? gbps / env.bandwidth_gbps : 0.0, f.tflops,
                 env.ceiling_tflops > 0.0 ? f.tflops / env.ceiling_tflops : 0.0);
  }
  std::fprintf(out, "- read ceiling %.0f GB/s, GEMM ceiling %.1f TFLOP/s (same run)\n", env.bandwidth_gbps,
               env.ceiling_tflops);
}

}  // namespace flash_bench
