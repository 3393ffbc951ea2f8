#include "bench_env.h"

#include <string>

namespace flash_bench {

BenchEnv::~BenchEnv() {
  if (cublas != nullptr) (void)cublasDestroy(cublas);
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
}

std::string BenchEnv::init() {
  std::string err = cuda_error("cudaGetDevice", cudaGetDevice(&device));
  cudaDeviceProp prop{};
  if (err.empty()) err = cuda_error("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, device));
  if (!err.empty()) return err;
  gpu_name = prop.name;
  compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  err = cuda_error("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (err.empty()) err = cublas_error("cublasCreate", cublasCreate(&cublas));
  if (err.empty()) err = cublas_error("cublasSetStream", cublasSetStream(cublas, stream));
  if (err.empty()) err = flusher.init(device);
  flusher.set_read(options.l2_flush_read);
  if (err.empty()) err = timer.init();
  return err;
}

double set_counters(benchmark::State& state, const BenchEnv& env, const std::vector<double>& ms, double flops,
                    double* out_tflops) {
  const double median_ms = median(ms);
  const double rate = tflops(flops, median_ms);
  state.counters["median_ms"] = benchmark::Counter(median_ms);
  state.counters["TFLOP/s"] = benchmark::Counter(rate);
  state.counters["frac_ceiling"] = benchmark::Counter(env.ceiling_tflops > 0.0 ? rate / env.ceiling_tflops : 0.0);
  if (out_tflops != nullptr) *out_tflops = rate;
  return median_ms;
}

}  // namespace flash_bench
