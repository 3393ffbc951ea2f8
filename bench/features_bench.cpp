#include "features_bench.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cmath>
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

enum class Feature : int { kPlain, kSinks, kAlibi };
constexpr Feature kFeatures[] = {Feature::kPlain, Feature::kSinks, Feature::kAlibi};
const char* feature_name(Feature f) {
  return f == Feature::kPlain ? "plain" : f == Feature::kSinks ? "sinks" : "alibi";
}

struct FeatureKey {
  int shape;
  Feature feature;
  bool operator<(const FeatureKey& o) const {
    return std::make_tuple(shape, static_cast<int>(feature)) < std::make_tuple(o.shape, static_cast<int>(o.feature));
  }
};

std::string row_name(const FeatureKey& key) {
  return std::string("features/") + kShapes[key.shape].name + "/" + feature_name(key.feature);
}

struct FeatureRun {
  RowTensors t;
  DeviceBuffer per_head, workspace;
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
    const double pairs = s.decode ? static_cast<double>(p.batch) * kSeqlen : window_pairs(kSeqlen, s.window_left);
    flops = 4.0 * static_cast<double>(s.heads_q * s.head_dim) * pairs;
    const size_t q_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
    const size_t kv_elems = static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
    std::string err = t.allocate(env, &p, q_elems, kv_elems);
    if (err.empty() && key.feature != Feature::kPlain) {
      // Sinks all kSinkValue; ALiBi slopes 2^(-8 (h + 1) / heads_q).
      std::vector<float> host(static_cast<size_t>(s.heads_q), kSinkValue);
      if (key.feature == Feature::kAlibi) {
        for (size_t h = 0; h < host.size(); ++h) {
          host[h] = std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(s.heads_q));
        }
      }
      err = per_head.allocate(host.size() * sizeof(float), "cudaMalloc(sinks / slopes)");
      if (err.empty()) {
        err = cuda_error("cudaMemcpy(sinks / slopes)",
                         cudaMemcpy(per_head.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
      }
    }
    if (!err.empty()) return err;
    p.sinks = key.feature == Feature::kSinks ? static_cast<const float*>(per_head.get()) : nullptr;
    p.alibi_slopes = key.feature == Feature::kAlibi ? static_cast<const float*>(per_head.get()) : nullptr;
    return attach_workspace(&p, &workspace);
  }
};

std::map<FeatureKey, PrefillFigures>& feature_results() {
  static std::map<FeatureKey, PrefillFigures> rows;
  return rows;
}

void bench_feature(benchmark::State& state, BenchEnv* env, FeatureKey key) {
  bench_prefill<FeatureRun>(state, env, key, &feature_results());
}

// Append and attend: decode, heads 32/8, head_dim 128, bf16, on a dense
// cache with seqused_k; the plain call against the same call appending
// its one new row per sequence first, without rotary and with NeoX rotary
// over all 128 columns (the difference is the rotations' share).
struct AppendShape {
  const char* name;
  int64_t batch, keys;
};
constexpr AppendShape kAppendShapes[] = {{"decode_B32_hd128_32k", 32, 32768}, {"decode_B1_hd128_32k", 1, 32768},
                                         {"decode_B1_hd128_4k", 1, 4096}};
constexpr int kNumAppendShapes = sizeof(kAppendShapes) / sizeof(kAppendShapes[0]);

// key: shape * 3 + mode (0 plain, 1 append, 2 append with rotary).
constexpr int kAppendModes = 3;
constexpr const char* kAppendModeNames[kAppendModes] = {"plain", "append", "append_rotary"};
struct AppendRun {
  RowTensors t;
  DeviceBuffer new_k, new_v, used, cos_table, sin_table, workspace;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, int key) {
    const AppendShape& s = kAppendShapes[key / kAppendModes];
    const bool append = key % kAppendModes >= 1;
    const bool rotary = key % kAppendModes == 2;
    p.dtype = kRowDtype;
    p.batch = s.batch;
    p.seqlen_q = 1;
    p.seqlen_k = s.keys;
    p.heads_q = 32;
    p.heads_kv = 8;
    p.head_dim = 128;
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();
    flops = 4.0 * 32 * 128 * static_cast<double>(s.batch) * static_cast<double>(s.keys);
    const size_t q_elems = static_cast<size_t>(s.batch * 32 * 128);
    const size_t kv_elems = static_cast<size_t>(s.batch * s.keys * 8 * 128);
    std::string err = t.allocate(env, &p, q_elems, kv_elems);
    // The plain call sees all keys; the appending one writes the last.
    std::vector<int32_t> lengths(static_cast<size_t>(s.batch), static_cast<int32_t>(append ? s.keys - 1 : s.keys));
    if (err.empty()) err = upload(env, lengths, &used, "seqused_k");
    if (err.empty() && append) {
      const size_t new_elems = static_cast<size_t>(s.batch * 8 * 128);
      err = alloc_filled(env, &new_k, new_elems, 4, "k_new");
      if (err.empty()) err = alloc_filled(env, &new_v, new_elems, 5, "v_new");
    }
    if (err.empty() && rotary) {
      std::vector<float> c(static_cast<size_t>(s.keys * 64)), sn(c.size());
      for (int64_t pos = 0; pos < s.keys; ++pos) {
        for (int64_t j = 0; j < 64; ++j) {
          const double angle = static_cast<double>(pos) * std::pow(10000.0, -static_cast<double>(j) / 64.0);
          c[static_cast<size_t>(pos * 64 + j)] = static_cast<float>(std::cos(angle));
          sn[static_cast<size_t>(pos * 64 + j)] = static_cast<float>(std::sin(angle));
        }
      }
      if (err.empty()) err = cos_table.allocate(c.size() * sizeof(float), "cudaMalloc(rotary_cos)");
      if (err.empty()) err = sin_table.allocate(sn.size() * sizeof(float), "cudaMalloc(rotary_sin)");
      if (err.empty()) {
        err = cuda_error("cudaMemcpy(rotary)", cudaMemcpy(cos_table.get(), c.data(), c.size() * sizeof(float),
                                                         cudaMemcpyHostToDevice));
      }
      if (err.empty()) {
        err = cuda_error("cudaMemcpy(rotary)", cudaMemcpy(sin_table.get(), sn.data(), sn.size() * sizeof(float),
                                                         cudaMemcpyHostToDevice));
      }
    }
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(append setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p.seqused_k = static_cast<const int32_t*>(used.get());
    if (append) {
      p.k_new = new_k.get();
      p.v_new = new_v.get();
      p.seqlen_new = 1;
      p.k_new_head_stride = p.v_new_head_stride = 128;
      p.k_new_seq_stride = p.v_new_seq_stride = p.k_new_batch_stride = p.v_new_batch_stride = 8 * 128;
    }
    if (rotary) {
      p.rotary_cos = static_cast<const float*>(cos_table.get());
      p.rotary_sin = static_cast<const float*>(sin_table.get());
      p.rotary_dim = 128;
      p.rotary_positions = s.keys;
    }
    return attach_workspace(&p, &workspace);
  }
};

std::map<int, PrefillFigures>& append_results() {
  static std::map<int, PrefillFigures> rows;
  return rows;
}

void bench_append(benchmark::State& state, BenchEnv* env, int key) {
  bench_prefill<AppendRun>(state, env, key, &append_results());
}

}  // namespace

void register_feature_benchmarks(BenchEnv* env) {
  for (int key = 0; key < kAppendModes * kNumAppendShapes; ++key) {
    const std::string name = std::string("features/append/") + kAppendShapes[key / kAppendModes].name + "/" +
                             kAppendModeNames[key % kAppendModes];
    benchmark::RegisterBenchmark(name.c_str(), bench_append, env, key)
        ->UseManualTime()
        ->Iterations(env->options.flash_iters)
        ->Unit(benchmark::kMillisecond);
  }
  // Plain and feature rows of a shape back to back, so that clock drift
  // between them stays small.
  for (int shape = 0; shape < kNumShapes; ++shape) {
    for (Feature feature : kFeatures) {
      const FeatureKey key{shape, feature};
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
  std::fprintf(out, "\n## features: cost of attention sinks and ALiBi\n\n");
  std::fprintf(out,
               "- bf16, N %lld (decode: batch 32, one query); sinks all %.1f; ALiBi slopes 2^(-8h/H); cost = the "
               "feature's ms / plain ms; TFLOP/s from 4 * heads_q * head_dim * visible pairs\n\n",
               static_cast<long long>(kSeqlen), static_cast<double>(kSinkValue));
  std::fprintf(out,
               "| shape | kernel | plain ms | plain TFLOP/s | sinks ms | cost | ALiBi kernel | ALiBi ms | cost |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|\n");
  for (int shape = 0; shape < kNumShapes; ++shape) {
    const auto plain = feature_results().find({shape, Feature::kPlain});
    const auto sinks = feature_results().find({shape, Feature::kSinks});
    const auto alibi = feature_results().find({shape, Feature::kAlibi});
    if (plain == feature_results().end() || sinks == feature_results().end() || alibi == feature_results().end()) {
      continue;
    }
    const double base = plain->second.median_ms;
    std::fprintf(out, "| %s | %s | %.4f | %.1f | %.4f | %.3f | %s | %.4f | %.3f |\n", kShapes[shape].name,
                 plain->second.config.c_str(), base, plain->second.tflops, sinks->second.median_ms,
                 base > 0.0 ? sinks->second.median_ms / base : 0.0, alibi->second.config.c_str(),
                 alibi->second.median_ms, base > 0.0 ? alibi->second.median_ms / base : 0.0);
  }
  std::fprintf(out, "\n## append and attend: decode with one new K/V row per sequence\n\n");
  std::fprintf(out,
               "- bf16, heads 32/8, head_dim 128, dense cache with seqused_k; plain: the keys already there; "
               "append: the last key written by the call first, without rotary and with NeoX rotary over 128 "
               "columns; cost = its us / plain us\n\n");
  std::fprintf(out, "| shape | kernel | plain us | append us | cost | append+rotary us | cost |\n"
                    "|---|---|---|---|---|---|---|\n");
  for (int shape = 0; shape < kNumAppendShapes; ++shape) {
    const auto plain = append_results().find(kAppendModes * shape);
    const auto app = append_results().find(kAppendModes * shape + 1);
    const auto rot = append_results().find(kAppendModes * shape + 2);
    if (plain == append_results().end() || app == append_results().end() || rot == append_results().end()) continue;
    const double base = plain->second.median_ms;
    const auto cost = [&](double ms) { return base > 0.0 ? ms / base : 0.0; };
    std::fprintf(out, "| %s | %s | %.1f | %.1f | %.3f | %.1f | %.3f |\n", kAppendShapes[shape].name,
                 plain->second.config.c_str(), 1e3 * base, 1e3 * app->second.median_ms, cost(app->second.median_ms),
                 1e3 * rot->second.median_ms, cost(rot->second.median_ms));
  }
  std::fflush(out);
}

}  // namespace flash_bench
