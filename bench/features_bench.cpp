#include "features_bench.h"

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
#include "options.h"
#include "row_setup.h"

namespace flash_bench {
namespace {

constexpr int64_t kSeqlen = 8192;
constexpr float kSinkValue = 2.f;

struct Shape {
  const char* name;
  int64_t head_dim, heads_q, heads_kv;
  int64_t window_left;  // -1: none
  bool decode;          // batch 32, one query against kSeqlen keys
};
constexpr Shape kShapes[] = {
    {"prefill_hd64_h64kv8", 64, 64, 8, -1, false},
    {"window128_hd64_h64kv8", 64, 64, 8, 128, false},
    {"prefill_hd128_h32kv8", 128, 32, 8, -1, false},
    {"decode_B32_hd64_h64kv8", 64, 64, 8, -1, true},
};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);

struct FeatureKey {
  int shape;
  bool sinks;
  bool operator<(const FeatureKey& o) const {
    return std::make_tuple(shape, sinks) < std::make_tuple(o.shape, o.sinks);
  }
};

std::string row_name(const FeatureKey& key) {
  return std::string("features/") + kShapes[key.shape].name + "/" + (key.sinks ? "sinks" : "plain");
}

// Causal (query, key) pairs of a square n x n call with a left window w
// (-1: none): row i sees min(i, w) + 1 keys.
double causal_pairs(int64_t n, int64_t w) {
  const int64_t full = w < 0 ? n : std::min(n, w + 1);
  return 0.5 * static_cast<double>(full) * static_cast<double>(full + 1) +
         static_cast<double>(n - full) * static_cast<double>(w + 1);
}

struct FeatureRun {
  DeviceBuffer q, k, v, o, sinks, workspace;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const FeatureKey& key) {
    const Shape& s = kShapes[key.shape];
    p.dtype = kRowDtype;
    p.batch = s.decode ? 32 : 1;
    p.seqlen_q = s.decode ? 1 : kSeqlen;
    p.seqlen_k = kSeqlen;
    p.heads_q = s.heads_q;
    p.heads_kv = s.heads_kv;
    p.head_dim = s.head_dim;
    p.causal = !s.decode;
    p.window_left = s.window_left;
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();
    const double pairs = s.decode ? static_cast<double>(p.batch) * kSeqlen : causal_pairs(kSeqlen, s.window_left);
    flops = 4.0 * static_cast<double>(s.heads_q * s.head_dim) * pairs;
    const size_t q_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
    const size_t kv_elems = static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_filled(env, &k, kv_elems, 2, "K");
    if (err.empty()) err = alloc_filled(env, &v, kv_elems, 3, "V");
    if (err.empty()) err = o.allocate(q_elems * kRowElemBytes, "cudaMalloc(O)");
    if (err.empty() && key.sinks) {
      const std::vector<float> host(static_cast<size_t>(s.heads_q), kSinkValue);
      err = sinks.allocate(host.size() * sizeof(float), "cudaMalloc(sinks)");
      if (err.empty()) {
        err = cuda_error("cudaMemcpy(sinks)",
                         cudaMemcpy(sinks.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
      }
    }
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.o = o.get();
    p.sinks = key.sinks ? static_cast<const float*>(sinks.get()) : nullptr;
    size_t bytes = 0;
    err = status_error("flash::attention_workspace_size", flash::attention_workspace_size(p, &bytes));
    if (err.empty() && bytes > 0) {
      err = workspace.allocate(bytes, "cudaMalloc(workspace)");
      p.workspace = workspace.get();
      p.workspace_bytes = bytes;
    }
    return err;
  }
};

std::map<FeatureKey, PrefillFigures>& feature_results() {
  static std::map<FeatureKey, PrefillFigures> rows;
  return rows;
}

void bench_feature(benchmark::State& state, BenchEnv* env, FeatureKey key) {
  bench_prefill<FeatureRun>(state, env, key, &feature_results());
}

}  // namespace

void register_feature_benchmarks(BenchEnv* env) {
  // Plain and feature rows of a shape back to back, so that clock drift
  // between them stays small.
  for (int shape = 0; shape < kNumShapes; ++shape) {
    for (bool sinks : {false, true}) {
      const FeatureKey key{shape, sinks};
      benchmark::RegisterBenchmark(row_name(key).c_str(), bench_feature, env, key)
          ->UseManualTime()
          ->Iterations(env->options.flash_iters)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void print_feature_summary(std::FILE* out, const BenchEnv& env) {
  (void)env;
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## features: cost of attention sinks\n\n");
  std::fprintf(out,
               "- bf16, N %lld (decode: batch 32, one query); sinks all %.1f; cost = sinks ms / plain ms; TFLOP/s "
               "from 4 * heads_q * head_dim * visible pairs\n\n",
               static_cast<long long>(kSeqlen), static_cast<double>(kSinkValue));
  std::fprintf(out, "| shape | kernel | plain ms | sinks ms | plain TFLOP/s | cost |\n");
  std::fprintf(out, "|---|---|---|---|---|---|\n");
  for (int shape = 0; shape < kNumShapes; ++shape) {
    const auto plain = feature_results().find({shape, false});
    const auto sinks = feature_results().find({shape, true});
    if (plain == feature_results().end() || sinks == feature_results().end()) continue;
    std::fprintf(out, "| %s | %s | %.4f | %.4f | %.1f | %.3f |\n", kShapes[shape].name, plain->second.config.c_str(),
                 plain->second.median_ms, sinks->second.median_ms, plain->second.tflops,
                 plain->second.median_ms > 0.0 ? sinks->second.median_ms / plain->second.median_ms : 0.0);
  }
  std::fflush(out);
}

}  // namespace flash_bench
