// mla_bench: an MLA decode kernel on MLA's decode shape, launched directly
// (sm90: kernels/sm90/mla_kernel.cuh through sm90::run_mla; splitd: the
// split-D kernel of kernels/decode/mla_kernel.cuh, sm_80 and newer), beside the read and GEMM ceilings measured in the
// same process. One query token per sequence, 128 query heads sharing one
// K/V head, Q K^T over 576 columns, V the first 512 columns of the K rows,
// bf16, a paged cache of 64-key pages in a random order; timed as
// flash_bench's rows are (L2 flushed before each launch, CUDA events,
// median after at least warmup_ms of warm-up).
//
//   mla_bench [batch=64] [keys=8192] [heads=128] [splits=1] [kernel=sm90|splitd]
//
// (kernel defaults to sm90 where the library has sm_90a, else splitd.)
//
// Prints one line: µs, GB/s of K read and its fraction of the read ceiling,
// TFLOP/s (2 * heads * (576 + 512) per key and sequence) and its fraction
// of the GEMM ceiling.
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bandwidth_ceiling.h"
#include "bench_env.h"
#include "decode/mla_kernel.cuh"
#if FLASH_BENCH_HAS_SM90
#include "sm90/api.h"
#endif
#include "device_tensor.h"
#include "gemm_ceiling.h"

namespace {

using Traits = flash::decode::MlaTraits<576, 512, __nv_bfloat16>;
constexpr int kPageSize = 64;

int arg(int argc, char** argv, int i, int fallback) {
  return argc > i ? std::atoi(argv[i]) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flash_bench;
  const int batch = arg(argc, argv, 1, 64), keys = arg(argc, argv, 2, 8192), heads = arg(argc, argv, 3, 128),
            splits = arg(argc, argv, 4, 1);
  const std::string kernel = argc > 5 ? argv[5] : (FLASH_BENCH_HAS_SM90 ? "sm90" : "splitd");
  if (batch < 1 || keys < 1 || heads < 1 || splits < 1 || keys % kPageSize != 0 ||
      (kernel != "splitd" && (kernel != "sm90" || !FLASH_BENCH_HAS_SM90))) {
    std::fprintf(stderr,
                 "usage: mla_bench [batch] [keys, a multiple of %d] [heads] [splits] [kernel: splitd%s]\n",
                 kPageSize, FLASH_BENCH_HAS_SM90 ? " or sm90" : "");
    return 2;
  }
  BenchEnv env;
  std::string err = env.init();
  double read_gbps = 0.0, gemm_tflops = 0.0;
  if (err.empty()) err = measure_bandwidth_ceiling(env, &read_gbps);
  if (err.empty()) err = measure_gemm_ceiling(env, &gemm_tflops);

  const int pages_per_seq = keys / kPageSize;
  const int num_pages = batch * pages_per_seq;
  const size_t q_elems = static_cast<size_t>(batch) * heads * 576;
  const size_t k_elems = static_cast<size_t>(num_pages) * kPageSize * 576;
  const size_t rows = static_cast<size_t>(batch) * heads;
  DeviceBuffer q, k, o, lse, used, table, o_part, lse_part;
  if (err.empty()) err = q.allocate(q_elems * 2, "cudaMalloc(Q)");
  if (err.empty()) err = k.allocate(k_elems * 2, "cudaMalloc(K)");
  if (err.empty()) err = o.allocate(rows * 512 * 2, "cudaMalloc(O)");
  if (err.empty()) err = lse.allocate(rows * 4, "cudaMalloc(LSE)");
  if (err.empty()) err = used.allocate(static_cast<size_t>(batch) * 4, "cudaMalloc(seqused_k)");
  if (err.empty()) err = table.allocate(static_cast<size_t>(num_pages) * 4, "cudaMalloc(block_table)");
  if (err.empty() && splits > 1) err = o_part.allocate(splits * rows * 576 * 4, "cudaMalloc(o_partial)");
  if (err.empty() && splits > 1) err = lse_part.allocate(splits * rows * 4, "cudaMalloc(lse_partial)");
  auto fill = [&](DeviceBuffer& b, size_t n, uint64_t seed) {
    return cuda_error("fill_uniform",
                      flash::ref::fill_uniform(b.get(), flash::DType::kBFloat16, n, seed, 1.f, env.stream));
  };
  if (err.empty()) err = fill(q, q_elems, 1);
  if (err.empty()) err = fill(k, k_elems, 2);
  std::vector<int> pages(static_cast<size_t>(num_pages)), lens(static_cast<size_t>(batch), keys);
  for (int i = 0; i < num_pages; ++i) pages[static_cast<size_t>(i)] = i;
  std::shuffle(pages.begin(), pages.end(), std::mt19937(27));
  if (err.empty()) {
    err = cuda_error("upload", cudaMemcpy(table.get(), pages.data(), pages.size() * 4, cudaMemcpyHostToDevice));
  }
  if (err.empty()) {
    err = cuda_error("upload", cudaMemcpy(used.get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  }
  if (!err.empty()) {
    std::fprintf(stderr, "mla_bench: %s\n", err.c_str());
    return 1;
  }

  flash::detail::FwdParams f{};
  f.q = q.get();
  f.k = k.get();
  f.v = k.get();
  f.o = o.get();
  f.lse = static_cast<float*>(lse.get());
  f.q_head_stride = 576;
  f.q_seq_stride = static_cast<int64_t>(heads) * 576;
  f.q_batch_stride = f.q_seq_stride;
  f.k_head_stride = f.v_head_stride = 576;
  f.k_seq_stride = f.v_seq_stride = 576;
  f.k_batch_stride = f.v_batch_stride = static_cast<int64_t>(kPageSize) * 576;
  f.o_head_stride = 512;
  f.o_seq_stride = f.o_batch_stride = static_cast<int64_t>(heads) * 512;
  f.batch = batch;
  f.seqlen_q = 1;
  f.seqlen_k = keys;
  f.heads_q = heads;
  f.heads_kv = 1;
  f.q_per_kv = heads;
  f.head_dim = 576;
  f.head_dim_v = 512;
  f.softmax_scale = 1.f / std::sqrt(576.f);
  f.softmax_scale_log2 = f.softmax_scale * 1.4426950408889634f;
  f.seqused_k = static_cast<const int*>(used.get());
  f.block_table = static_cast<const int*>(table.get());
  f.block_table_batch_stride = pages_per_seq;
  f.num_pages = num_pages;
  f.page_size = kPageSize;
  f.page_shift = 6;
  f.max_seqlen_k_alloc = keys;
  f.window_left = f.window_right = -1;
  f.alibi_scale = 1.f / f.softmax_scale;
  f.num_splits = splits;
  f.o_partial = static_cast<float*>(o_part.get());
  f.lse_partial = static_cast<float*>(lse_part.get());

  auto launch = [&]() {
#if FLASH_BENCH_HAS_SM90
    if (kernel == "sm90") return cuda_error("run_mla", flash::sm90::run_mla<flash::DType::kBFloat16>(f, env.stream));
#endif
    return cuda_error("run_mla", flash::decode::run_mla<Traits>(f, env.stream));
  };
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; err.empty(); ++i) {
    err = launch();
    if (i + 1 >= env.options.flash_warmup) {
      if (err.empty()) err = cuda_error("warm-up sync", cudaStreamSynchronize(env.stream));
      const double elapsed =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (elapsed >= env.options.warmup_ms) break;
    }
  }
  std::vector<double> ms;
  for (int i = 0; i < env.options.flash_iters && err.empty(); ++i) {
    double elapsed = 0.0;
    err = env.timer.time(env.flusher, env.stream, launch, &elapsed);
    ms.push_back(elapsed);
  }
  if (!err.empty()) {
    std::fprintf(stderr, "mla_bench: %s\n", err.c_str());
    return 1;
  }
  const double t = median(ms) * 1e-3;  // seconds
  const double bytes = static_cast<double>(batch) * keys * 576 * 2;
  const double flops = 2.0 * batch * heads * static_cast<double>(keys) * (576 + 512);
  const double gbps = bytes / t / 1e9, tflops = flops / t / 1e12;
  std::printf(
      "mla decode (%s), %s, batch %d x %d keys, %d query heads, 576/512, bf16, pages of %d, %d split(s): "
      "%.1f us, %.0f GB/s (%.3f of the read ceiling, %.0f GB/s), %.1f TFLOP/s (%.3f of the GEMM ceiling, "
      "%.1f)\n",
      kernel.c_str(), env.gpu_name.c_str(), batch, keys, heads, kPageSize, splits, t * 1e6, gbps, gbps / read_gbps, read_gbps, tflops,
      tflops / gemm_tflops, gemm_tflops);
  return 0;
}
