// flash_bench: the seed's attention sweep, flash::attention_forward against
// standard (cuBLAS) attention, every figure also a fraction of a cuBLAS bf16
// GEMM measured in the same run.
//
//   Sweep: batch * seqlen = 16384 tokens, heads * head_dim = 2048,
//   seqlen in {512, ..., 16384}, head_dim in {64, 128, 256}, causal and not,
//   bf16 and fp16, layout [B, N, H, D], heads_kv = heads_q.
//
//   Rows: "gemm_bf16_8192" ("gemm_fp16_8192" too when fp16 is swept), then per shape "flash/<dtype>/hd<D>/<causal|
//   noncausal>/N<seqlen>" and "standard/...". Each row allocates its own
//   tensors, fills them with uniform random values, runs untimed warm-ups,
//   then a fixed number of timed launches (L2 flushed before each, CUDA
//   events around each; the Time column is the mean, the counters use the
//   median). Counters: median_ms, TFLOP/s, frac_ceiling.
//
//   FLOPs = 4 * batch * heads * head_dim * visible (query, key) pairs, with
//   causal square counted as N^2 / 2 (FlashAttention's convention): see
//   visible_pairs() in bench_util.h.
//
//   Inference-engine rows (inference_bench.h says exactly what they run):
//   --decode: split-KV decode against dense and paged KV caches, in GB/s of
//   K and V read and as a fraction of a 4 GiB read measured in the same run
//   (row "read_bandwidth_4GiB"); --varlen: a packed varlen prefill batch
//   against a dense batch of the same tokens, in TFLOP/s; --window: causal
//   sliding-window prefill on flash's pick and on the sm80 kernel.
//   --serving (serving_bench.h): chunked prefill on dense, seqused_k and
//   paged caches and decode on dense and paged ones, each beside the dense
//   call. --features (features_bench.h): each score/softmax feature (sinks, ALiBi)
//   against the same call without it. Any of them replaces the sweep; add
//   --sweep to run it too.
//
// Usage:
//   flash_bench                                   # the full sweep
//   flash_bench --dtypes=bf16 --head_dims=128 --seqlens=2048,16384 --no-standard
//   flash_bench --backend=sm80 --no-standard             # the sm80 kernel on a Hopper GPU
//   flash_bench --benchmark_filter='flash/bf16/hd128/.*' --benchmark_out=run.json --benchmark_out_format=json
//   flash_bench --decode --varlen --benchmark_out=decode.json --benchmark_out_format=json
//   flash_bench --decode --backend=sm80                  # the same decode calls on the sm80 kernel
//   flash_bench --serving --benchmark_out=serving.json --benchmark_out_format=json
// --help lists flash_bench's flags, then Google Benchmark's. With no CUDA
// device it prints "no CUDA device" and exits with 77 (the "skipped" code).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bandwidth_ceiling.h"
#include "bench_env.h"
#include "bench_util.h"
#include "device_tensor.h"
#include "flash/flash.hpp"
#include "features_bench.h"
#include "fp8_prefill_bench.h"
#include "head_dims_bench.h"
#include "mla_rows.h"
#include "gemm_ceiling.h"
#include "inference_bench.h"
#include "options.h"
#include "reference.h"
#include "results.h"
#include "serving_bench.h"
#include "sweep.h"

namespace flash_bench {
namespace {

constexpr float kInputScale = 1.0f;      // inputs are uniform in [-1, 1)
constexpr int kExitNoDevice = 77;

const char* impl_name(Impl impl) {
  return impl == Impl::kFlash ? "flash" : impl == Impl::kTuned ? "tuned" : "standard";
}

std::string row_name(Impl impl, const ShapeKey& key) {
  return std::string(impl_name(impl)) + "/" + dtype_name(key.dtype) + "/hd" + std::to_string(key.head_dim) + "/" +
         (key.causal ? "causal" : "noncausal") + "/N" + std::to_string(key.seqlen);
}

// One sweep shape's parameters (pointers left null), for the --backend and
// --softcap chosen.
flash::AttentionParams sweep_params(const ShapeKey& key, const flash_bench::Options& options) {
  flash::AttentionParams p = flash_bench::sweep_params(key.dtype, key.head_dim, key.causal, key.seqlen);
  // Standard attention ignores the backend (the flash rows run the one
  // chosen by --backend) and applies the softcap as flash does.
  p.backend = options.backend;
  p.softcap = options.softcap;
  return p;
}

// Q, K, V, O (and standard attention's scratch) of one row.
struct AttentionBuffers {
  DeviceBuffer q, k, v, o, lse, workspace;

  std::string setup(BenchEnv& env, flash::AttentionParams* p, Impl impl) {
    const size_t q_elems = static_cast<size_t>(p->batch * p->seqlen_q * p->heads_q * p->head_dim);
    const size_t kv_elems = static_cast<size_t>(p->batch * p->seqlen_k * p->heads_kv * p->head_dim);
    std::string err = q.allocate(q_elems * 2, "cudaMalloc(Q)");
    if (err.empty()) err = k.allocate(kv_elems * 2, "cudaMalloc(K)");
    if (err.empty()) err = v.allocate(kv_elems * 2, "cudaMalloc(V)");
    if (err.empty()) err = o.allocate(q_elems * 2, "cudaMalloc(O)");
    if (!err.empty()) return err;
    // Fixed seeds: the same data every run, different per tensor; uniform
    // values are never all zero.
    const struct {
      const char* what;
      void* ptr;
      size_t elems;
      uint64_t seed;
    } fills[] = {{"fill_uniform(Q)", q.get(), q_elems, 1}, {"fill_uniform(K)", k.get(), kv_elems, 2},
                 {"fill_uniform(V)", v.get(), kv_elems, 3}};
    for (const auto& f : fills) {
      if (err.empty()) {
        err = cuda_error(f.what, flash::ref::fill_uniform(f.ptr, p->dtype, f.elems, f.seed, kInputScale, env.stream));
      }
    }
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(fill)", cudaStreamSynchronize(env.stream));
    p->q = q.get();
    p->k = k.get();
    p->v = v.get();
    p->o = o.get();
    p->lse = nullptr;
    // --lse: flash rows write the log-sum-exp too ([batch, heads_q, seqlen_q] float32).
    if (err.empty() && impl != Impl::kStandard && env.options.lse) {
      err = lse.allocate(static_cast<size_t>(p->batch * p->heads_q * p->seqlen_q) * sizeof(float), "cudaMalloc(LSE)");
      p->lse = static_cast<float*>(lse.get());
    }
    // Sized once the tensors exist: the plan depends on the real strides.
    if (err.empty() && impl == Impl::kStandard) {
      err = workspace.allocate(flash::ref::standard_attention_workspace_bytes(*p),
                               "cudaMalloc(standard attention workspace)");
    }
    return err;
  }
};

std::string status_error(const char* what, const flash::Status& s) {
  if (s.ok()) return {};
  return std::string(what) + ": " + s.message;
}

void bench_attention(benchmark::State& state, BenchEnv* env, ShapeKey key, Impl impl) {
  flash::AttentionParams p = sweep_params(key, env->options);
  AttentionBuffers buffers;
  const std::string err = buffers.setup(*env, &p, impl);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }

  p.autotune = impl == Impl::kTuned;  // the first warm-up call tunes this shape class
  auto launch = [&]() -> std::string {
    if (impl != Impl::kStandard) {
      return status_error("flash::attention_forward", flash::attention_forward(p, env->stream));
    }
    return status_error("flash::ref::standard_attention",
                        flash::ref::standard_attention(p, /*o_f32=*/nullptr, buffers.workspace.get(),
                                                       buffers.workspace.bytes(), env->cublas, env->stream));
  };
  const int warmup = impl == Impl::kStandard ? env->options.standard_warmup : env->options.flash_warmup;
  std::vector<double> ms;
  if (!run_timed_loop(state, *env, warmup, launch, &ms)) return;

  const double flops = attention_flops(p.batch, p.heads_q, p.head_dim, p.seqlen_q, p.seqlen_k, p.causal);
  double rate = 0.0;
  const double median_ms = set_counters(state, *env, ms, flops, &rate);
  std::string config;
  flash::KernelChoice choice;
  if (impl != Impl::kStandard && flash::query_kernel_choice(p, &choice).ok()) config = choice.name;
  if (!config.empty()) state.SetLabel(config);
  record_attention(key, impl, median_ms, rate, config);
}

void register_benchmarks(BenchEnv* env) {
  const Options& o = env->options;
  benchmark::RegisterBenchmark("gemm_bf16_8192", bench_gemm, env, flash::DType::kBFloat16)
      ->UseManualTime()
      ->Iterations(o.gemm_iters)
      ->Unit(benchmark::kMillisecond);
  const bool sweeps_fp16 =
      o.run_sweep && std::find(o.dtypes.begin(), o.dtypes.end(), flash::DType::kFloat16) != o.dtypes.end();
  if (sweeps_fp16) {
    benchmark::RegisterBenchmark("gemm_fp16_8192", bench_gemm, env, flash::DType::kFloat16)
        ->UseManualTime()
        ->Iterations(o.gemm_iters)
        ->Unit(benchmark::kMillisecond);
  }
  // --decode's and --serving's decode rows, a shape both ask for once.
  std::vector<DecodeKey> decode_rows;
  if (o.decode) decode_rows = decode_keys(o);
  if (o.serving) {
    const std::vector<DecodeKey> serving_rows = serving_decode_keys(o);
    decode_rows.insert(decode_rows.end(), serving_rows.begin(), serving_rows.end());
  }
  if (o.fp8) {
    const std::vector<DecodeKey> fp8_rows = fp8_decode_keys(o);
    decode_rows.insert(decode_rows.end(), fp8_rows.begin(), fp8_rows.end());
  }
  if (!decode_rows.empty()) register_decode_benchmarks(env, decode_rows);
  if (o.serving) register_serving_prefill_benchmarks(env);
  if (o.varlen) register_varlen_benchmarks(env);
  if (o.window) register_window_benchmarks(env);
  if (o.features) register_feature_benchmarks(env);
  if (o.head_dim_rows) register_head_dim_benchmarks(env);
  if (o.fp8_prefill) register_fp8_prefill_benchmarks(env);
  if (o.mla) register_mla_benchmarks(env);
  if (!o.run_sweep) return;
  for (flash::DType dtype : o.dtypes) {
    for (int64_t head_dim : o.head_dims) {
      for (bool causal : {false, true}) {
        for (int64_t seqlen : o.seqlens) {
          const ShapeKey key{dtype, head_dim, causal, seqlen};
          for (Impl impl : {Impl::kFlash, Impl::kTuned, Impl::kStandard}) {
            if (impl == Impl::kStandard && !o.run_standard) continue;
            if (impl == Impl::kTuned && !o.autotune) continue;
            benchmark::RegisterBenchmark(row_name(impl, key).c_str(), bench_attention, env, key, impl)
                ->UseManualTime()
                ->Iterations(impl == Impl::kStandard ? o.standard_iters : o.flash_iters)
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
}

int run(int argc, char** argv) {
  BenchEnv env;
  bool help = false;
  const std::string opt_err = parse_options(&argc, argv, &env.options, &help);
  if (!opt_err.empty()) {
    std::fprintf(stderr, "flash_bench: %s\n\n%s", opt_err.c_str(), usage());
    return 2;
  }
  if (help) std::printf("%s\n", usage());
  register_benchmarks(&env);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  if (env.options.list_only) {
    benchmark::RunSpecifiedBenchmarks();
    return 0;
  }

  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    std::fprintf(stderr, "flash_bench: no CUDA device\n");
    return kExitNoDevice;
  }
  std::string err = env.init();
  if (err.empty()) err = measure_gemm_ceiling(env, &env.ceiling_tflops);
  const bool runs_decode = env.options.decode || env.options.serving || env.options.fp8 || env.options.mla;
  if (err.empty() && runs_decode) err = measure_bandwidth_ceiling(env, &env.bandwidth_gbps);
  if (!err.empty()) {
    std::fprintf(stderr, "flash_bench: setup failed: %s\n", err.c_str());
    return 1;
  }
  benchmark::AddCustomContext("gpu", env.gpu_name);
  benchmark::AddCustomContext("compute_capability", env.compute_capability);
  benchmark::AddCustomContext("flash_version", flash::version());
  benchmark::AddCustomContext("flash_backend", backend_name(env.options.backend));
  benchmark::AddCustomContext("flash_softcap", std::to_string(env.options.softcap));
  benchmark::AddCustomContext("l2_flush", env.options.l2_flush_read ? "read" : "write");
  benchmark::AddCustomContext("flash_lse", env.options.lse ? "true" : "false");
  benchmark::AddCustomContext("gemm_bf16_8192_tflops", std::to_string(env.ceiling_tflops));
  std::printf("GPU: %s; ceiling (cuBLAS bf16 GEMM 8192^3): %.1f TFLOP/s\n", env.gpu_name.c_str(),
              env.ceiling_tflops);
  if (runs_decode) {
    benchmark::AddCustomContext("read_bandwidth_gbps", std::to_string(env.bandwidth_gbps));
    std::printf("read ceiling (4 GiB, 16-byte loads): %.0f GB/s\n", env.bandwidth_gbps);
  }
  std::fflush(stdout);

  benchmark::RunSpecifiedBenchmarks();
  if (env.options.run_sweep) {
    print_summary(stdout, env.gpu_name, backend_name(env.options.backend), env.ceiling_tflops);
    if (env.options.softcap > 0.f) std::printf("- flash rows with logit softcap %g\n", env.options.softcap);
    if (env.options.lse) std::printf("- flash rows write the log-sum-exp\n");
  }
  if (env.options.decode) print_decode_summary(stdout, env);
  if (env.options.fp8) print_fp8_decode_summary(stdout, env);
  if (env.options.varlen) print_varlen_summary(stdout, env);
  if (env.options.window) print_window_summary(stdout, env);
  if (env.options.serving) print_serving_summary(stdout, env);
  if (env.options.features) print_feature_summary(stdout, env);
  if (env.options.head_dim_rows) print_head_dim_summary(stdout, env);
  if (env.options.fp8_prefill) print_fp8_prefill_summary(stdout, env);
  if (env.options.mla) print_mla_summary(stdout, env);
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace flash_bench

int main(int argc, char** argv) { return flash_bench::run(argc, argv); }
