// app: the smallest program that links flash::flash from outside the flash
// tree (examples/consumer finds an installed flash with find_package,
// examples/subproject builds it with add_subdirectory). Plain C++, no nvcc.
//
// It runs one GQA attention call on bf16 tensors whose V rows are all the
// same vector v: whatever the softmax weights, each output row must then be
// v again, which checks that the kernel ran without a host reference.
//
// Exit codes: 0 success, 1 an error or a wrong result, 77 no CUDA device.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "flash/flash.hpp"

namespace {

// bf16 is the upper half of a float32 (round to nearest even).
uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float from_bf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

bool cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(err));
  return false;
}

}  // namespace

int main() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }

  // Head dim 64: the one head dim every build of the examples compiles.
  const int batch = 2, seqlen = 257, heads_q = 8, heads_kv = 2, head_dim = 64;
  const size_t q_elems = size_t{1} * batch * seqlen * heads_q * head_dim;
  const size_t kv_elems = size_t{1} * batch * seqlen * heads_kv * head_dim;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<uint16_t> h_q(q_elems), h_k(kv_elems), h_v(kv_elems), h_o(q_elems);
  for (uint16_t& x : h_q) x = to_bf16(uniform(rng));
  for (uint16_t& x : h_k) x = to_bf16(uniform(rng));
  // v[d] = d / 64 - 0.5, exact in bf16, the same for every key row and head.
  for (size_t n = 0; n < kv_elems; ++n) h_v[n] = to_bf16(static_cast<float>(n % head_dim) / 64.f - 0.5f);

  void *d_q = nullptr, *d_k = nullptr, *d_v = nullptr, *d_o = nullptr;
  cudaStream_t stream = nullptr;
  bool ok = cuda_ok(cudaMalloc(&d_q, q_elems * 2), "cudaMalloc(Q)") &&
            cuda_ok(cudaMalloc(&d_k, kv_elems * 2), "cudaMalloc(K)") &&
            cuda_ok(cudaMalloc(&d_v, kv_elems * 2), "cudaMalloc(V)") &&
            cuda_ok(cudaMalloc(&d_o, q_elems * 2), "cudaMalloc(O)") &&
            cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            cuda_ok(cudaMemcpyAsync(d_q, h_q.data(), q_elems * 2, cudaMemcpyHostToDevice, stream), "copy Q") &&
            cuda_ok(cudaMemcpyAsync(d_k, h_k.data(), kv_elems * 2, cudaMemcpyHostToDevice, stream), "copy K") &&
            cuda_ok(cudaMemcpyAsync(d_v, h_v.data(), kv_elems * 2, cudaMemcpyHostToDevice, stream), "copy V");
  if (ok) {
    flash::AttentionParams p;
    p.q = d_q, p.k = d_k, p.v = d_v, p.o = d_o;
    p.dtype = flash::DType::kBFloat16;
    p.batch = batch, p.seqlen_q = seqlen, p.seqlen_k = seqlen;
    p.heads_q = heads_q, p.heads_kv = heads_kv, p.head_dim = head_dim;
    p.causal = true;
    p.set_contiguous_bnhd();
    const flash::Status s = flash::attention_forward(p, stream);
    if (!s.ok()) {
      std::fprintf(stderr, "flash::attention_forward: %s\n", s.message);
      ok = false;
    }
  }
  ok = ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") &&
       cuda_ok(cudaMemcpy(h_o.data(), d_o, q_elems * 2, cudaMemcpyDeviceToHost), "copy O");

  int exit_code = 1;
  if (ok) {
    float max_err = 0.f;
    for (size_t n = 0; n < q_elems; ++n) {
      const float expect = static_cast<float>(n % head_dim) / 64.f - 0.5f;
      max_err = std::fmax(max_err, std::fabs(from_bf16(h_o[n]) - expect));
    }
    const float tolerance = 1e-2f;  // P is rounded to bf16 before P V, so the weights sum to 1 within ~2^-8
    std::printf("flash %s: every output row equals the shared V row within %.2e -> %s\n", flash::version(), max_err,
                max_err <= tolerance ? "OK" : "FAILED");
    exit_code = max_err <= tolerance ? 0 : 1;
  }
  cudaFree(d_q);
  cudaFree(d_k);
  cudaFree(d_v);
  cudaFree(d_o);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return exit_code;
}
