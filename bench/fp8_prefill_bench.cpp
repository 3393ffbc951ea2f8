#include "fp8_prefill_bench.h"

#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "device_tensor.h"
#include "flash/flash.hpp"
#include "options.h"
#include "row_setup.h"

namespace flash_bench {
namespace {

constexpr int64_t kSeqlen = 16384;
constexpr int64_t kHeadsTimesDim = 2048;
constexpr int kGemmSize = 8192;

using Fp8Key = std::tuple<int64_t, bool, bool>;  // head_dim, causal, fp8

bool compiled(int64_t d) {
  const std::vector<int64_t> list = compiled_head_dims();
  return std::find(list.begin(), list.end(), d) != list.end();
}

// `bytes` e4m3 codes drawn from the finite ones of magnitude at most 1
// (both signs, subnormals included), uploaded to *dst.
std::string fill_e4m3(DeviceBuffer* dst, size_t bytes, uint32_t seed, const char* what) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    const float x = flash::ref::e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isfinite(x) && std::fabs(x) <= 1.f) codes.push_back(static_cast<uint8_t>(c));
  }
  std::vector<uint8_t> host(bytes);
  std::mt19937 rng(seed);
  for (auto& b : host) b = codes[rng() % codes.size()];
  std::string err = dst->allocate(bytes, what);
  if (err.empty()) err = cuda_error(what, cudaMemcpy(dst->get(), host.data(), bytes, cudaMemcpyHostToDevice));
  return err;
}

struct Fp8Run {
  DeviceBuffer q, k, v, o, workspace;
  RowTensors bf16;
  flash::AttentionParams p;
  double flops = 0.0;

  std::string setup(BenchEnv& env, const Fp8Key& key) {
    const auto [d, causal, fp8] = key;
    const int64_t heads = kHeadsTimesDim / d;
    p.dtype = flash::DType::kBFloat16;
    p.batch = 1;
    p.seqlen_q = p.seqlen_k = kSeqlen;
    p.heads_q = p.heads_kv = heads;
    p.head_dim = d;
    p.causal = causal;
    p.backend = env.options.backend;
    p.set_contiguous_bnhd();
    flops = attention_flops(1, heads, d, kSeqlen, kSeqlen, causal);
    const size_t elems = static_cast<size_t>(kSeqlen * heads * d);
    std::string err;
    if (fp8) {
      p.q_dtype = p.kv_dtype = flash::KvDType::kFloat8E4M3;
      err = fill_e4m3(&q, elems, 11, "Q");
      if (err.empty()) err = fill_e4m3(&k, elems, 12, "K");
      if (err.empty()) err = fill_e4m3(&v, elems, 13, "V");
      if (err.empty()) err = o.allocate(elems * 2, "cudaMalloc(O)");
      p.q = q.get();
      p.k = k.get();
      p.v = v.get();
      p.o = o.get();
    } else {
      err = bf16.allocate(env, &p, elems, elems);
    }
    return err.empty() ? attach_workspace(&p, &workspace) : err;
  }
};

std::map<Fp8Key, PrefillFigures>& fp8_results() {
  static std::map<Fp8Key, PrefillFigures> rows;
  return rows;
}

void bench_fp8_prefill(benchmark::State& state, BenchEnv* env, Fp8Key key) {
  bench_prefill<Fp8Run>(state, env, key, &fp8_results());
}

// C = A^T B (cuBLAS column-major "TN", the layout fp8 GEMMs take), e4m3 A
// and B, bf16 C, float32 accumulation, through cublasLt's best heuristic.
class Fp8Gemm {
 public:
  ~Fp8Gemm() {
    if (pref_ != nullptr) cublasLtMatmulPreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {a_layout_, b_layout_, c_layout_}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
    if (lt_ != nullptr) cublasLtDestroy(lt_);
  }

  std::string setup(BenchEnv& env) {
    const size_t elems = static_cast<size_t>(kGemmSize) * kGemmSize;
    std::string err = fill_e4m3(&a_, elems, 21, "GEMM A");
    if (err.empty()) err = fill_e4m3(&b_, elems, 22, "GEMM B");
    if (err.empty()) err = c_.allocate(elems * 2, "cudaMalloc(GEMM C)");
    if (err.empty()) err = ws_.allocate(kWorkspace, "cudaMalloc(cublasLt workspace)");
    if (!err.empty()) return err;
    auto lt = [](const char* what, cublasStatus_t s) {
      return s == CUBLAS_STATUS_SUCCESS ? std::string() : std::string(what) + ": cuBLAS status " + std::to_string(s);
    };
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    err = lt("cublasLtCreate", cublasLtCreate(&lt_));
    if (err.empty()) err = lt("cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (err.empty()) {
      err = lt("TRANSA", cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    }
    if (err.empty()) {
      err = lt("TRANSB", cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
    }
    if (err.empty()) err = lt("layout A", cublasLtMatrixLayoutCreate(&a_layout_, CUDA_R_8F_E4M3, kGemmSize, kGemmSize, kGemmSize));
    if (err.empty()) err = lt("layout B", cublasLtMatrixLayoutCreate(&b_layout_, CUDA_R_8F_E4M3, kGemmSize, kGemmSize, kGemmSize));
    if (err.empty()) err = lt("layout C", cublasLtMatrixLayoutCreate(&c_layout_, CUDA_R_16BF, kGemmSize, kGemmSize, kGemmSize));
    if (err.empty()) err = lt("preference", cublasLtMatmulPreferenceCreate(&pref_));
    size_t ws = kWorkspace;
    if (err.empty()) {
      err = lt("preference workspace", cublasLtMatmulPreferenceSetAttribute(
                                           pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    }
    int found = 0;
    if (err.empty()) {
      err = lt("cublasLtMatmulAlgoGetHeuristic",
               cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_layout_, b_layout_, c_layout_, c_layout_, pref_, 1,
                                              &heuristic_, &found));
    }
    if (err.empty() && found == 0) err = "cublasLt has no fp8 GEMM algorithm for 8192^3 TN";
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(fp8 GEMM setup)", cudaStreamSynchronize(env.stream));
    return err;
  }

  std::string launch(BenchEnv& env) const {
    const float alpha = 1.f, beta = 0.f;
    const cublasStatus_t s =
        cublasLtMatmul(lt_, desc_, &alpha, a_.get(), a_layout_, b_.get(), b_layout_, &beta, c_.get(), c_layout_,
                       c_.get(), c_layout_, &heuristic_.algo, ws_.get(), kWorkspace, env.stream);
    return s == CUBLAS_STATUS_SUCCESS ? std::string() : "cublasLtMatmul: cuBLAS status " + std::to_string(s);
  }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  DeviceBuffer a_, b_, c_, ws_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, c_layout_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_ = {};
};

double& fp8_gemm_tflops() {
  static double t = 0.0;
  return t;
}

void bench_fp8_gemm(benchmark::State& state, BenchEnv* env) {
  Fp8Gemm gemm;
  const std::string err = gemm.setup(*env);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  std::vector<double> ms;
  if (!run_timed_loop(state, *env, env->options.gemm_warmup, [&] { return gemm.launch(*env); }, &ms)) return;
  double t = 0.0;
  set_counters(state, *env, ms, 2.0 * kGemmSize * kGemmSize * static_cast<double>(kGemmSize), &t);
  std::lock_guard<std::mutex> lock(rows_mutex());
  fp8_gemm_tflops() = t;
}

}  // namespace

void register_fp8_prefill_benchmarks(BenchEnv* env) {
  benchmark::RegisterBenchmark("gemm_fp8_8192", bench_fp8_gemm, env)
      ->UseManualTime()
      ->Iterations(env->options.gemm_iters)
      ->Unit(benchmark::kMillisecond);
  for (int64_t d : {64, 128, 256}) {
    if (!compiled(d)) continue;
    for (bool causal : {false, true}) {
      for (bool fp8 : {true, false}) {
        const std::string name = "fp8_prefill/hd" + std::to_string(d) + (causal ? "/causal" : "/noncausal") +
                                 (fp8 ? "/fp8" : "/bf16");
        benchmark::RegisterBenchmark(name.c_str(), bench_fp8_prefill, env, Fp8Key{d, causal, fp8})
            ->UseManualTime()
            ->Iterations(env->options.flash_iters)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

void print_fp8_prefill_summary(std::FILE* out, const BenchEnv& env) {
  std::lock_guard<std::mutex> lock(rows_mutex());
  std::fprintf(out, "\n## FP8 prefill: e4m3 Q, K, V (bf16 O) beside bf16, and the fp8 GEMM ceiling\n\n");
  std::fprintf(out,
               "- batch 1, N %lld, heads * head_dim = %lld, heads_kv = heads; TFLOP/s from 4 * heads * head_dim * "
               "visible pairs; ceilings in this run: cuBLAS bf16 GEMM %.1f, cublasLt fp8 GEMM %.1f TFLOP/s\n\n",
               static_cast<long long>(kSeqlen), static_cast<long long>(kHeadsTimesDim), env.ceiling_tflops,
               fp8_gemm_tflops());
  std::fprintf(out, "| head_dim | causal | fp8 kernel | fp8 ms | fp8 TFLOP/s | / fp8 GEMM | bf16 TFLOP/s | fp8 / bf16 | "
                    "causal / non-causal (fp8) |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|\n");
  const auto& rows = fp8_results();
  for (int64_t d : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      const auto f = rows.find(Fp8Key{d, causal, true});
      if (f == rows.end()) continue;
      const auto b = rows.find(Fp8Key{d, causal, false});
      const auto nc = rows.find(Fp8Key{d, false, true});
      char vs_gemm[16] = "-", bf[16] = "-", vs_bf[16] = "-", vs_nc[16] = "-";
      if (fp8_gemm_tflops() > 0.0) std::snprintf(vs_gemm, sizeof(vs_gemm), "%.2f", f->second.tflops / fp8_gemm_tflops());
      if (b != rows.end() && b->second.tflops > 0.0) {
        std::snprintf(bf, sizeof(bf), "%.1f", b->second.tflops);
        std::snprintf(vs_bf, sizeof(vs_bf), "%.2f", f->second.tflops / b->second.tflops);
      }
      if (causal && nc != rows.end() && nc->second.tflops > 0.0) {
        std::snprintf(vs_nc, sizeof(vs_nc), "%.2f", f->second.tflops / nc->second.tflops);
      }
      std::fprintf(out, "| %lld | %s | %s | %.4f | %.1f | %s | %s | %s | %s |\n", static_cast<long long>(d),
                   causal ? "yes" : "no", f->second.config.c_str(), f->second.median_ms, f->second.tflops, vs_gemm, bf,
                   vs_bf, vs_nc);
    }
  }
  std::fflush(out);
}

}  // namespace flash_bench
