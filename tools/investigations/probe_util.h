// What the investigation probes (tail_probe.cu, gap_probe.cu) share: the
// CUDA error check, Q/K/V/O buffers filled as the benchmark fills them, and
// the dense call on them. Not built by CMake, like the probes.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "device_tensor.h"
#include "flash/flash.hpp"

#define PROBE_CHECK(x)                                              \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

namespace probe {

// `elems` 16-bit elements each of Q, K, V and O; Q, K and V uniform in
// (-1, 1) from ref::fill_uniform (seeds 1, 2, 3), O unwritten.
struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
};

inline Buffers make_buffers(size_t elems, flash::DType dtype) {
  Buffers b;
  for (void** p : {&b.q, &b.k, &b.v, &b.o}) PROBE_CHECK(cudaMalloc(p, elems * 2));
  PROBE_CHECK(flash::ref::fill_uniform(b.q, dtype, elems, 1, 1.f, nullptr));
  PROBE_CHECK(flash::ref::fill_uniform(b.k, dtype, elems, 2, 1.f, nullptr));
  PROBE_CHECK(flash::ref::fill_uniform(b.v, dtype, elems, 3, 1.f, nullptr));
  return b;
}

// Self-attention on `b`, [batch, seqlen, heads, head_dim], contiguous.
inline flash::AttentionParams dense_params(const Buffers& b, flash::DType dtype, int batch, int seqlen, int heads,
                                           int head_dim, bool causal) {
  flash::AttentionParams p;
  p.q = b.q;
  p.k = b.k;
  p.v = b.v;
  p.o = b.o;
  p.dtype = dtype;
  p.batch = batch;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = p.heads_kv = heads;
  p.head_dim = head_dim;
  p.causal = causal;
  p.set_contiguous_bnhd();
  return p;
}

}  // namespace probe
