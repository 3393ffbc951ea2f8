// basic_attention: the smallest complete use of flash::attention_forward.
//
// It allocates Q, K, V and O on the GPU in the [batch, seqlen, heads,
// head_dim] layout of inference engines, in bf16; fills Q, K, V with random
// values made on the host; runs causal attention on a stream; copies O back;
// prints a few values and a checksum; and checks a few rows against a plain
// float computation on the host.
//
// Build: part of the flash CMake project (target basic_attention, links only
// flash::flash). Run: ./basic_attention
// Exit codes: 0 success, 1 an error or a result out of tolerance,
// 77 no CUDA device (the conventional "skipped" code of test drivers).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <vector>

#include "flash/flash.hpp"

namespace {

// Prints the failing CUDA call and returns false.
bool cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(err));
  return false;
}

// O[b, i, h, :] for one query row, computed in float on the host with the
// same conventions as flash: scale 1/sqrt(D), causal mask aligned to the
// bottom-right corner (with seqlen_q == seqlen_k: key j visible iff j <= i).
std::vector<float> reference_row(const std::vector<__nv_bfloat16>& q, const std::vector<__nv_bfloat16>& k,
                                 const std::vector<__nv_bfloat16>& v, int seqlen, int heads, int head_dim, int b,
                                 int i, int h, bool causal) {
  auto at = [&](const std::vector<__nv_bfloat16>& t, int row) {
    // Offset of t[b, row, h, 0] in a dense [B, N, H, D] tensor.
    return &t[((static_cast<size_t>(b) * seqlen + row) * heads + h) * head_dim];
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int visible = causal ? i + 1 : seqlen;
  std::vector<float> scores(visible);
  float max_score = -INFINITY;
  for (int j = 0; j < visible; ++j) {
    float dot = 0.f;
    for (int d = 0; d < head_dim; ++d) dot += __bfloat162float(at(q, i)[d]) * __bfloat162float(at(k, j)[d]);
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.f;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  std::vector<float> out(head_dim, 0.f);
  for (int j = 0; j < visible; ++j) {
    for (int d = 0; d < head_dim; ++d) out[d] += scores[j] / sum * __bfloat162float(at(v, j)[d]);
  }
  return out;
}

}  // namespace

int main() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }

  // A small causal self-attention: 2 sequences of 1000 tokens (not a
  // multiple of the kernel's tiles: any length works), 8 heads of 128.
  const int batch = 2, seqlen = 1000, heads = 8, head_dim = 128;
  const bool causal = true;
  const size_t elems = static_cast<size_t>(batch) * seqlen * heads * head_dim;
  const size_t bytes = elems * sizeof(__nv_bfloat16);

  // Host inputs: uniform in [-1, 1), rounded to bf16.
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<__nv_bfloat16> h_q(elems), h_k(elems), h_v(elems), h_o(elems);
  for (size_t n = 0; n < elems; ++n) {
    h_q[n] = __float2bfloat16(uniform(rng));
    h_k[n] = __float2bfloat16(uniform(rng));
    h_v[n] = __float2bfloat16(uniform(rng));
  }

  // Device tensors. cudaMalloc returns 256-byte-aligned memory; flash needs
  // 16-byte alignment and strides that are multiples of 8 elements.
  void *d_q = nullptr, *d_k = nullptr, *d_v = nullptr, *d_o = nullptr;
  cudaStream_t stream = nullptr;
  bool ok = cuda_ok(cudaMalloc(&d_q, bytes), "cudaMalloc(Q)") && cuda_ok(cudaMalloc(&d_k, bytes), "cudaMalloc(K)") &&
            cuda_ok(cudaMalloc(&d_v, bytes), "cudaMalloc(V)") && cuda_ok(cudaMalloc(&d_o, bytes), "cudaMalloc(O)") &&
            cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            cuda_ok(cudaMemcpyAsync(d_q, h_q.data(), bytes, cudaMemcpyHostToDevice, stream), "copy Q") &&
            cuda_ok(cudaMemcpyAsync(d_k, h_k.data(), bytes, cudaMemcpyHostToDevice, stream), "copy K") &&
            cuda_ok(cudaMemcpyAsync(d_v, h_v.data(), bytes, cudaMemcpyHostToDevice, stream), "copy V");

  if (ok) {
    // Describe the call. set_contiguous_bnhd() fills every stride from the
    // sizes for densely packed [B, N, H, D] tensors; softmax_scale left at 0
    // means 1/sqrt(head_dim).
    flash::AttentionParams params;
    params.q = d_q;
    params.k = d_k;
    params.v = d_v;
    params.o = d_o;
    params.dtype = flash::DType::kBFloat16;
    params.batch = batch;
    params.seqlen_q = seqlen;
    params.seqlen_k = seqlen;
    params.heads_q = heads;
    params.heads_kv = heads;  // fewer K/V heads (GQA, MQA) also work: heads_q % heads_kv == 0
    params.head_dim = head_dim;
    params.causal = causal;
    params.set_contiguous_bnhd();

    // The call is asynchronous: it queues the kernel on `stream` and returns.
    // A bad argument is reported here, before anything is launched.
    const flash::Status status = flash::attention_forward(params, stream);
    if (!status.ok()) {
      std::fprintf(stderr, "flash::attention_forward failed: %s\n", status.message);
      ok = false;
    }
  }
  // Errors during the kernel's execution surface at the synchronisation.
  ok = ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") &&
       cuda_ok(cudaGetLastError(), "kernel") &&
       cuda_ok(cudaMemcpy(h_o.data(), d_o, bytes, cudaMemcpyDeviceToHost), "copy O");

  int exit_code = 1;
  if (ok) {
    double checksum = 0.0;
    for (const __nv_bfloat16& x : h_o) checksum += __bfloat162float(x);
    std::printf("flash %s: O[0, 0, 0, 0:4] = %.4f %.4f %.4f %.4f\n", flash::version(), __bfloat162float(h_o[0]),
                __bfloat162float(h_o[1]), __bfloat162float(h_o[2]), __bfloat162float(h_o[3]));
    std::printf("checksum (sum of all %zu outputs) = %.6f\n", elems, checksum);

    // Check a few (batch, row, head) triples, including the first row (which
    // sees one key) and the last, against the host reference.
    const int rows[][3] = {{0, 0, 0}, {0, 1, 3}, {0, 511, 7}, {1, 777, 2}, {1, seqlen - 1, heads - 1}};
    float max_err = 0.f;
    for (const auto& r : rows) {
      const std::vector<float> expect = reference_row(h_q, h_k, h_v, seqlen, heads, head_dim, r[0], r[1], r[2], causal);
      const size_t base = ((static_cast<size_t>(r[0]) * seqlen + r[1]) * heads + r[2]) * head_dim;
      for (int d = 0; d < head_dim; ++d) {
        max_err = std::max(max_err, std::fabs(__bfloat162float(h_o[base + d]) - expect[d]));
      }
    }
    // bf16 output keeps 8 significant bits: outputs of magnitude <= 1 round
    // by up to ~4e-3, and P is rounded to bf16 inside the kernel too.
    const float tolerance = 2e-2f;
    std::printf("max abs error over %zu checked rows: %.3e (tolerance %.0e) -> %s\n", std::size(rows), max_err,
                tolerance, max_err <= tolerance ? "OK" : "FAILED");
    exit_code = max_err <= tolerance ? 0 : 1;
  }

  cudaFree(d_q);
  cudaFree(d_k);
  cudaFree(d_v);
  cudaFree(d_o);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return exit_code;
}
