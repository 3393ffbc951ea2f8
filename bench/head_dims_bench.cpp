#include "head_dims_bench.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flash/flash.hpp"
#include "options.h"
#include "row_setup.h"

namespace flash_bench {
namespace {

constexpr int64_t kSeqlen = 16384;
constexpr int64_t kHeads = 16;
// (head_dim, head_dim_v): V as wide as Q K^T (0), and DeepSeek-V2/V3's
// prefill shape (192, 128).
struct Dims {
  int64_t d, dv;
};
constexpr Dims kRows[] = {{64, 0},  {80, 0},  {96, 0},  {112, 0}, {128, 0},
                          {160, 0}, {192, 0}, {192, 128}, {224, 0}, {256, 0}};
// A row's key in the results: head_dim * 1000 + head_dim_v (0: the same).
int64_t row_key(const Dims& x) { return x.d * 1000 + x.dv; }
// The mask and length rows beside them, at head dims 96 and 128: causal at
// N 16384, and N 2048 (batch 8) causal and not. Their keys add kCausalKey
// and kShortKey to row_key.
constexpr int64_t kCausalKey = 1000000, kShortKey = 2000000;
constexpr int64_t kShortSeqlen = 2048;
constexpr int64_t kMaskRowDims[] = {96, 128};
// A key's parts: head_dim, head_dim_v's field (0: the same), causal, N 2048.
struct KeyParts {
  int64_t d, dv_field;
  bool causal, short_rows;
};
KeyParts parts(int64_t key) {
  const int64_t dims = key % kCausalKey;
  return {dims / 1000, dims % 1000, (key / kCausalKey) % 2 == 1, key / kShortKey != 0};
}

bool compiled(int64_t d) {
  const std::vector<int64_t> list = compiled_head_dims();
  return std::find(list.begin(), list.end(), d) != list.end();
}

// The compiled head dim whose kernel runs d: the smallest at least d (96 or
// a multiple of 64 on the sm90 kernel); 0 when none.
int64_t kernel_head_dim(int64_t d, bool sm90) {
  for (int64_t k : {32, 64, 96, 128, 192, 256}) {
    if (k >= d && compiled(k) && (!sm90 || k % 64 == 0 || k == 96)) return k;
  }
  return 0;
}

struct HeadDimRun {
  RowTensors t;
  DeviceBuffer workspace;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, int64_t key) {
    const KeyParts k = parts(key);
    const bool causal = k.causal;
    const int64_t d = k.d, dv = k.dv_field != 0 ? k.dv_field : d;
    const int64_t n = k.short_rows ? kShortSeqlen : kSeqlen, batch = kSeqlen / n;
    p.dtype = kRowDtype;
    p.batch = batch;
    p.seqlen_q = p.seqlen_k = n;
    p.heads_q = p.heads_kv = kHeads;
    p.head_dim = d;
    p.head_dim_v = k.dv_field;
    p.causal = causal;
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();
    // 2 * N^2 * heads * (head_dim + head_dim_v) a sequence: Q K^T and P V;
    // half that under a causal mask.
    flops = 2.0 * static_cast<double>(batch * kHeads * (d + dv)) * static_cast<double>(n) * static_cast<double>(n) *
            (causal ? 0.5 : 1.0);
    const size_t elems = static_cast<size_t>(batch * n * kHeads * d);
    const size_t v_elems = static_cast<size_t>(batch * n * kHeads * dv);
    const std::string err = t.allocate(env, &p, elems, elems, v_elems, v_elems);
    return err.empty() ? attach_workspace(&p, &workspace) : err;
  }
};

std::map<int64_t, PrefillFigures>& head_dim_results() {
  static std::map<int64_t, PrefillFigures> rows;
  return rows;
}
std::map<int64_t, PrefillFigures>& mask_row_results() {
  static std::map<int64_t, PrefillFigures> rows;
  return rows;
}

void bench_head_dim(benchmark::State& state, BenchEnv* env, int64_t key) {
  bench_prefill<HeadDimRun>(state, env, key, &head_dim_results());
}
void bench_mask_row(benchmark::State& state, BenchEnv* env, int64_t key) {
  bench_prefill<HeadDimRun>(state, env, key, &mask_row_results());
}

}  // namespace

void register_head_dim_benchmarks(BenchEnv* env) {
  for (const Dims& x : kRows) {
    if (kernel_head_dim(std::max(x.d, x.dv), false) == 0) continue;
    const std::string name = "head_dims/hd" + std::to_string(x.d) + (x.dv != 0 ? "v" + std::to_string(x.dv) : "");
    benchmark::RegisterBenchmark(name.c_str(), bench_head_dim, env, row_key(x))
        ->UseManualTime()
        ->Iterations(env->options.flash_iters)
        ->Unit(benchmark::kMillisecond);
  }
  for (int64_t d : kMaskRowDims) {
    if (!compiled(d)) continue;
    struct Variant {
      const char* suffix;
      int64_t key;
    };
    for (const Variant& v : {Variant{"/causal", kCausalKey}, Variant{"/2k", kShortKey},
                             Variant{"/2k/causal", kShortKey + kCausalKey}}) {
      const std::string name = "head_dims/hd" + std::to_string(d) + v.suffix;
      benchmark::RegisterBenchmark(name.c_str(), bench_mask_row, env, v.key + d * 1000)
          ->UseManualTime()
          ->Iterations(env->options.flash_iters)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void print_head_dim_summary(std::FILE* out, const BenchEnv& env) {
  (void)env;
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## head dims: each against head dim 128 and the compiled head dim that ran it\n\n");
  std::fprintf(out,
               "- bf16, batch 1, N %lld, not causal, heads %lld/%lld; TFLOP/s from 2 * heads * (head_dim + "
               "head_dim_v) * N^2 at the true head dims (192/128: head_dim 192, head_dim_v 128)\n\n",
               static_cast<long long>(kSeqlen), static_cast<long long>(kHeads), static_cast<long long>(kHeads));
  std::fprintf(out, "| head_dim | kernel | ms | TFLOP/s | / hd128 | ran as | / that head dim |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|\n");
  const auto& rows = head_dim_results();
  const auto base = rows.find(128 * 1000);
  for (const auto& [key, fig] : rows) {
    const int64_t d = key / 1000, dv = key % 1000;
    const bool sm90 = std::strncmp(fig.config.c_str(), "sm90", 4) == 0;
    const int64_t ran_as = kernel_head_dim(std::max(d, dv), sm90);
    const auto same = rows.find(ran_as * 1000);
    char vs128[16] = "-", vs_kernel[16] = "-";
    if (base != rows.end() && base->second.tflops > 0.0) {
      std::snprintf(vs128, sizeof(vs128), "%.2f", fig.tflops / base->second.tflops);
    }
    if (ran_as * 1000 != key && same != rows.end() && same->second.tflops > 0.0) {
      std::snprintf(vs_kernel, sizeof(vs_kernel), "%.2f", fig.tflops / same->second.tflops);
    }
    char label[24];
    std::snprintf(label, sizeof(label), dv != 0 ? "%lld/%lld" : "%lld", static_cast<long long>(d),
                  static_cast<long long>(dv));
    std::fprintf(out, "| %s | %s | %.4f | %.1f | %s | %lld | %s |\n", label, fig.config.c_str(), fig.median_ms,
                 fig.tflops, vs128, static_cast<long long>(ran_as), vs_kernel);
  }
  const auto& masked = mask_row_results();
  if (!masked.empty()) {
    std::fprintf(out,
                 "\n- the same at head dims 96 and 128, causal at N %lld, and at N %lld (batch %lld) causal and not; "
                 "causal FLOPs halved\n\n",
                 static_cast<long long>(kSeqlen), static_cast<long long>(kShortSeqlen),
                 static_cast<long long>(kSeqlen / kShortSeqlen));
    std::fprintf(out, "| head_dim | N | causal | kernel | ms | TFLOP/s | / hd128 |\n");
    std::fprintf(out, "|---|---|---|---|---|---|---|\n");
    for (const auto& [key, fig] : masked) {
      const KeyParts k = parts(key);
      const auto same128 = masked.find(key - k.d * 1000 + 128 * 1000);
      char vs128[16] = "-";
      if (same128 != masked.end() && same128->second.tflops > 0.0) {
        std::snprintf(vs128, sizeof(vs128), "%.2f", fig.tflops / same128->second.tflops);
      }
      std::fprintf(out, "| %lld | %lld | %s | %s | %.4f | %.1f | %s |\n", static_cast<long long>(k.d),
                   static_cast<long long>(k.short_rows ? kShortSeqlen : kSeqlen), k.causal ? "yes" : "no",
                   fig.config.c_str(), fig.median_ms, fig.tflops, vs128);
    }
  }
  std::fflush(out);
}

}  // namespace flash_bench
