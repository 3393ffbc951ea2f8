#include "gemm_ceiling.h"

#include <cstdint>
#include <vector>

#include "device_tensor.h"

namespace flash_bench {
namespace {

constexpr int kGemmSize = 8192;  // M = N = K
constexpr double kGemmFlops = 2.0 * kGemmSize * kGemmSize * static_cast<double>(kGemmSize);

// A, B and C of one GEMM. C = A^T B in cuBLAS's column-major terms ("TN",
// the layout cuBLAS benchmarks usually quote); every matrix is bf16, or
// fp16 for the comparison row.
class Gemm {
 public:
  explicit Gemm(flash::DType dtype = flash::DType::kBFloat16) : dtype_(dtype) {}

  std::string setup(BenchEnv& env) {
    const size_t elems = static_cast<size_t>(kGemmSize) * kGemmSize;
    const size_t bytes = elems * 2;
    std::string err = a_.allocate(bytes, "cudaMalloc(GEMM A)");
    if (err.empty()) err = b_.allocate(bytes, "cudaMalloc(GEMM B)");
    if (err.empty()) err = c_.allocate(bytes, "cudaMalloc(GEMM C)");
    // Random inputs: a GEMM on zeros draws less power and can clock higher.
    if (err.empty()) {
      err = cuda_error("fill_uniform(GEMM A)", flash::ref::fill_uniform(a_.get(), dtype_, elems,
                                                                       /*seed=*/0x6e11, 1.0f, env.stream));
    }
    if (err.empty()) {
      err = cuda_error("fill_uniform(GEMM B)", flash::ref::fill_uniform(b_.get(), dtype_, elems,
                                                                       /*seed=*/0x6e12, 1.0f, env.stream));
    }
    if (err.empty()) err = cuda_error("cudaStreamSynchronize(GEMM setup)", cudaStreamSynchronize(env.stream));
    return err;
  }

  std::string launch(BenchEnv& env) const {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const cudaDataType type = dtype_ == flash::DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
    return cublas_error("cublasGemmEx(8192^3)",
                        cublasGemmEx(env.cublas, CUBLAS_OP_T, CUBLAS_OP_N, kGemmSize, kGemmSize, kGemmSize, &alpha,
                                     a_.get(), type, kGemmSize, b_.get(), type, kGemmSize, &beta, c_.get(), type,
                                     kGemmSize, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  flash::DType dtype_;
  DeviceBuffer a_, b_, c_;
};

}  // namespace

std::string measure_gemm_ceiling(BenchEnv& env, double* tflops_out) {
  *tflops_out = 0.0;
  Gemm gemm;
  std::string err = gemm.setup(env);
  if (!err.empty()) return err;
  auto launch = [&] { return gemm.launch(env); };
  for (int i = 0; i < env.options.gemm_warmup && err.empty(); ++i) err = launch();
  if (err.empty()) err = cuda_error("cudaStreamSynchronize(GEMM warm-up)", cudaStreamSynchronize(env.stream));
  std::vector<double> ms;
  for (int i = 0; i < env.options.gemm_iters && err.empty(); ++i) {
    double elapsed = 0.0;
    err = env.timer.time(env.flusher, env.stream, launch, &elapsed);
    ms.push_back(elapsed);
  }
  if (err.empty()) *tflops_out = tflops(kGemmFlops, median(ms));
  return err;
}

void bench_gemm(benchmark::State& state, BenchEnv* env, flash::DType dtype) {
  Gemm gemm(dtype);
  const std::string err = gemm.setup(*env);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  std::vector<double> ms;
  if (!run_timed_loop(state, *env, env->options.gemm_warmup, [&] { return gemm.launch(*env); }, &ms)) return;
  set_counters(state, *env, ms, kGemmFlops, nullptr);
}

}  // namespace flash_bench
