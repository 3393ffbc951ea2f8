// Whether compute-sanitizer's initcheck counts the Hopper kernel's TMA
// stores of O as writes. One causal bf16 call (2 x 1000 tokens, 8 heads of
// 128) into a fresh cudaMalloc'd O, which the host then copies back; run
// under `compute-sanitizer --tool initcheck` (host-API checks on, the
// default), a copy of bytes no tracked write reached is reported.
//
//   initcheck-o-stores sm90          dense: the Hopper kernel, O by TMA stores
//   initcheck-o-stores decode        dense: the decode kernel (Backend::kDecode,
//                                    no workspace, so unsplit), O by st.global
//   initcheck-o-stores sm80          dense: the sm80 kernel, O by st.global
//                                    (needs sm_80 code in the build)
//   initcheck-o-stores sm90-varlen   packed with cu_seqlens and totals: the
//                                    Hopper kernel's guarded 16-byte stores
//
// Every O element is checked finite on the host and the flash status
// printed; exit 0 when the call ran and O is finite. Built and run by
// initcheck-o-stores.sh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "flash/flash.hpp"

namespace {

bool cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(err));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool varlen = std::strcmp(mode, "sm90-varlen") == 0;
  flash::Backend backend;
  if (std::strcmp(mode, "sm90") == 0 || varlen) {
    backend = flash::Backend::kSm90;
  } else if (std::strcmp(mode, "sm80") == 0) {
    backend = flash::Backend::kSm80;
  } else if (std::strcmp(mode, "decode") == 0) {
    backend = flash::Backend::kDecode;
  } else {
    std::fprintf(stderr, "usage: %s sm90|decode|sm80|sm90-varlen\n", argv[0]);
    return 2;
  }
  const int batch = 2, seqlen = 1000, heads = 8, head_dim = 128;
  const size_t elems = static_cast<size_t>(batch) * seqlen * heads * head_dim;
  const size_t bytes = elems * sizeof(__nv_bfloat16);
  std::vector<__nv_bfloat16> h_in(elems), h_o(elems);
  uint32_t state = 2024;
  for (size_t n = 0; n < elems; ++n) {
    state = state * 1664525u + 1013904223u;
    h_in[n] = __float2bfloat16(static_cast<float>(state >> 8) / 16777216.f * 2.f - 1.f);
  }
  const int32_t h_cu[3] = {0, seqlen, 2 * seqlen};

  void *d_q = nullptr, *d_k = nullptr, *d_v = nullptr, *d_o = nullptr, *d_cu = nullptr;
  bool ok = cuda_ok(cudaMalloc(&d_q, bytes), "cudaMalloc(Q)") && cuda_ok(cudaMalloc(&d_k, bytes), "cudaMalloc(K)") &&
            cuda_ok(cudaMalloc(&d_v, bytes), "cudaMalloc(V)") && cuda_ok(cudaMalloc(&d_o, bytes), "cudaMalloc(O)") &&
            cuda_ok(cudaMalloc(&d_cu, sizeof(h_cu)), "cudaMalloc(cu_seqlens)") &&
            cuda_ok(cudaMemcpy(d_q, h_in.data(), bytes, cudaMemcpyHostToDevice), "copy Q") &&
            cuda_ok(cudaMemcpy(d_k, h_in.data(), bytes, cudaMemcpyHostToDevice), "copy K") &&
            cuda_ok(cudaMemcpy(d_v, h_in.data(), bytes, cudaMemcpyHostToDevice), "copy V") &&
            cuda_ok(cudaMemcpy(d_cu, h_cu, sizeof(h_cu), cudaMemcpyHostToDevice), "copy cu_seqlens");
  if (ok) {
    flash::AttentionParams p;
    p.q = d_q;
    p.k = d_k;
    p.v = d_v;
    p.o = d_o;
    p.dtype = flash::DType::kBFloat16;
    p.batch = batch;
    p.seqlen_q = seqlen;
    p.seqlen_k = seqlen;
    p.heads_q = heads;
    p.heads_kv = heads;
    p.head_dim = head_dim;
    p.causal = true;
    p.backend = backend;
    p.set_contiguous_bnhd();  // [B, N, H, D]; packed [B * N, H, D] has the same row strides
    if (varlen) {
      p.cu_seqlens_q = static_cast<const int32_t*>(d_cu);
      p.cu_seqlens_k = static_cast<const int32_t*>(d_cu);
      p.total_q = p.total_k = static_cast<int64_t>(batch) * seqlen;
    }
    flash::KernelChoice choice;
    const flash::Status query = flash::query_kernel_choice(p, &choice);
    const flash::Status status = query.ok() ? flash::attention_forward(p, nullptr) : query;
    std::printf("%s: %s (%s)\n", mode, status.ok() ? "ran" : status.message, query.ok() ? choice.name : "-");
    ok = status.ok() && cuda_ok(cudaDeviceSynchronize(), "the call") &&
         cuda_ok(cudaMemcpy(h_o.data(), d_o, bytes, cudaMemcpyDeviceToHost), "copy O");
  }
  size_t bad = 0;
  if (ok) {
    for (const __nv_bfloat16& x : h_o) bad += std::isfinite(__bfloat162float(x)) ? 0 : 1;
    std::printf("%s: %zu of %zu O elements not finite\n", mode, bad, elems);
  }
  cudaFree(d_q);
  cudaFree(d_k);
  cudaFree(d_v);
  cudaFree(d_o);
  cudaFree(d_cu);
  return ok && bad == 0 ? 0 : 1;
}
