// What the inference-engine rows (inference_bench.cpp) and the serving rows
// (serving_bench.cpp) share: filling and uploading their tensors, the paged
// KV cache layout, the kernel label, and the timing of one prefill row.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_env.h"
#include "bench_util.h"
#include "device_tensor.h"
#include "flash/flash.hpp"

namespace flash_bench {

constexpr float kRowInputScale = 1.0f;  // inputs are uniform in [-1, 1)
constexpr flash::DType kRowDtype = flash::DType::kBFloat16;
constexpr int64_t kRowElemBytes = 2;
constexpr uint32_t kPageSeed = 0x9a6e;  // the page permutation's

// Google Benchmark runs rows one at a time on the main thread; this lock,
// around every results map of these rows, only keeps that from mattering.
inline std::mutex& rows_mutex() {
  static std::mutex mutex;
  return mutex;
}

inline std::string status_error(const char* what, const flash::Status& s) {
  if (s.ok()) return {};
  return std::string(what) + ": " + s.message;
}

// Allocates `elems` bf16 elements in *dst and fills them with uniform values
// drawn from `seed` on env's stream.
inline std::string alloc_filled(BenchEnv& env, DeviceBuffer* dst, size_t elems, uint64_t seed, const char* what) {
  std::string err = dst->allocate(elems * kRowElemBytes, what);
  if (err.empty()) {
    err = cuda_error(what, flash::ref::fill_uniform(dst->get(), kRowDtype, elems, seed, kRowInputScale, env.stream));
  }
  return err;
}

// K and V of `kv_elems` elements each, filled as alloc_filled does (seeds 2
// and 3). `fp8`: e4m3 bytes, the bytes of half as many random bf16 values.
// About 1 byte in 256 is then a NaN code: the decode kernel reads it as
// +-480, the Hopper kernel as NaN (its e4m3 rows' outputs are then NaN).
// The softmax's max ignores NaN scores, so the work done is the same; a
// fill of finite codes has not been timed against this one.
inline std::string alloc_kv_filled(BenchEnv& env, DeviceBuffer* k, DeviceBuffer* v, size_t kv_elems, bool fp8) {
  const size_t fill = fp8 ? kv_elems / 2 : kv_elems;
  std::string err = alloc_filled(env, k, fill, 2, "K");
  if (err.empty()) err = alloc_filled(env, v, fill, 3, "V");
  return err;
}

// Copies `host` into a new allocation *dst on env's stream. The caller keeps
// `host` alive until the stream is synchronised.
inline std::string upload(BenchEnv& env, const std::vector<int32_t>& host, DeviceBuffer* dst, const char* what) {
  const size_t bytes = host.size() * sizeof(int32_t);
  std::string err = dst->allocate(bytes, what);
  if (err.empty()) {
    err = cuda_error(what, cudaMemcpyAsync(dst->get(), host.data(), bytes, cudaMemcpyHostToDevice, env.stream));
  }
  return err;
}

// Q, K and V of bf16 elements filled from seeds 1, 2 and 3 and an O, in
// the buffers of one row; p's q, k, v and o set once the stream has
// finished filling them.
struct RowTensors {
  DeviceBuffer q, k, v, o;

  // V and O have K's and Q's sizes unless v_elems / o_elems say otherwise
  // (a V head dim of its own).
  std::string allocate(BenchEnv& env, flash::AttentionParams* p, size_t q_elems, size_t kv_elems, size_t v_elems = 0,
                       size_t o_elems = 0) {
    std::string err = alloc_filled(env, &q, q_elems, 1, "Q");
    if (err.empty()) err = alloc_filled(env, &k, kv_elems, 2, "K");
    if (err.empty()) err = alloc_filled(env, &v, v_elems != 0 ? v_elems : kv_elems, 3, "V");
    if (err.empty()) err = o.allocate((o_elems != 0 ? o_elems : q_elems) * kRowElemBytes, "cudaMalloc(O)");
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(setup)", cudaStreamSynchronize(env.stream));
    if (!err.empty()) return err;
    p->q = q.get();
    p->k = k.get();
    p->v = v.get();
    p->o = o.get();
    return {};
  }
};

// (query, key) pairs a causal call with a left window of w (-1: none) sees
// on a square n x n problem, exactly: row i sees min(i, w) + 1 keys.
inline double window_pairs(int64_t n, int64_t w) {
  const int64_t full = w < 0 ? n : std::min(n, w + 1);  // rows 0..w see i + 1 keys
  return 0.5 * static_cast<double>(full) * static_cast<double>(full + 1) +
         static_cast<double>(n - full) * static_cast<double>(w + 1);
}

// A workspace of attention_workspace_size() bytes for `p` in *workspace,
// set in p (none when flash would not split the call).
inline std::string attach_workspace(flash::AttentionParams* p, DeviceBuffer* workspace) {
  size_t bytes = 0;
  std::string err = status_error("flash::attention_workspace_size", flash::attention_workspace_size(*p, &bytes));
  if (err.empty() && bytes > 0) {
    err = workspace->allocate(bytes, "cudaMalloc(workspace)");  // cudaMalloc: 256-byte aligned
    p->workspace = workspace->get();
    p->workspace_bytes = bytes;
  }
  return err;
}

// The kernel configuration a call runs (query_kernel_choice), the rows' label.
inline std::string kernel_name(const flash::AttentionParams& p) {
  flash::KernelChoice choice;
  return flash::query_kernel_choice(p, &choice).ok() ? std::string(choice.name) : std::string("?");
}

// "dense" / "paged<page_size>".
inline std::string cache_name(int64_t page_size) {
  return page_size == 0 ? std::string("dense") : "paged" + std::to_string(page_size);
}

// 0 .. n-1 in a fixed random order: Fisher-Yates over mt19937, whose output
// the standard fixes (std::shuffle's algorithm it does not).
inline std::vector<int32_t> shuffled_pages(int64_t n, uint32_t seed) {
  std::vector<int32_t> pages(static_cast<size_t>(n));
  std::iota(pages.begin(), pages.end(), 0);
  std::mt19937 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint32_t>(i + 1));
    std::swap(pages[static_cast<size_t>(i)], pages[static_cast<size_t>(j)]);
  }
  return pages;
}

// Makes K and V of *p a paged cache of `keys` keys per sequence: one pool of
// p->num_pages = p->batch * n pages [page_size, heads_kv, head_dim], n =
// ceil(keys / page_size), handed out in a fixed random order, sequence b's
// i-th page being table[b * n + i]. Sets the paged fields and the
// strides between pages; p's batch, heads, head_dim and K/V sequence strides
// must already be set. Returns the block table (host), to upload and point
// p->block_table at.
inline std::vector<int32_t> make_paged_cache(flash::AttentionParams* p, int64_t keys, int64_t page_size) {
  const int64_t pages_per_seq = (keys + page_size - 1) / page_size;  // the last one partly filled
  p->page_size = page_size;
  p->max_pages_per_seq = pages_per_seq;
  p->block_table_batch_stride = pages_per_seq;
  p->num_pages = p->batch * pages_per_seq;
  p->k_batch_stride = page_size * p->k_seq_stride;  // between pages
  p->v_batch_stride = page_size * p->v_seq_stride;
  return shuffled_pages(p->num_pages, kPageSeed);
}

// What one prefill row measured.
struct PrefillFigures {
  double median_ms = 0.0;
  double tflops = 0.0;
  std::string config;
};

// One prefill row: Run (VarlenRun, WindowRun, ServingPrefillRun) sets up the
// call for `key` (its `p` and `flops`); the row times it like the sweep's
// rows and records the figures in `results`.
template <typename Run, typename Key>
void bench_prefill(benchmark::State& state, BenchEnv* env, const Key& key, std::map<Key, PrefillFigures>* results) {
  Run run;
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
  PrefillFigures f;
  f.median_ms = set_counters(state, *env, ms, run.flops, &f.tflops);
  f.config = kernel_name(run.p);
  state.SetLabel(f.config);
  std::lock_guard<std::mutex> lock(rows_mutex());
  (*results)[key] = f;
}

}  // namespace flash_bench
