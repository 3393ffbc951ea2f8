// What the merge and context-parallel tests share: the first compiled head
// dim of a wish list, a device-to-host copy after the stream, and one
// attention call over all the keys (FullCall) that partial calls merged
// together must reproduce.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "device_tensor.h"
#include "feature_case.h"
#include "gpu_case.h"

namespace flash::test {

inline int64_t first_compiled(std::initializer_list<int64_t> wanted) {
  for (int64_t hd : wanted) {
    if (head_dim_compiled(hd)) return hd;
  }
  for (int64_t hd : {32, 64, 96, 128, 192, 256}) {
    if (head_dim_compiled(hd)) return hd;
  }
  return 0;
}

// Waits for the stream, then copies `count` elements from the device.
template <typename T>
::testing::AssertionResult download(std::vector<T>* host, const void* src, size_t count, cudaStream_t s) {
  host->resize(count);
  if (cudaStreamSynchronize(s) != cudaSuccess ||
      cudaMemcpy(host->data(), src, count * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return ::testing::AssertionFailure() << "download failed";
  }
  return ::testing::AssertionSuccess();
}

// Q, K and V of one call filled with uniform values, and that call (LSE on)
// run over all the keys: the reference the merges of partial calls match.
struct FullCall {
  AttentionParams params;
  DeviceBuffer q, k, v, o, lse;
  size_t q_count = 0, kv_count = 0, lse_count = 0;

  ::testing::AssertionResult run(const AttentionParams& shape, uint64_t seed, cudaStream_t stream) {
    params = shape;
    params.set_contiguous_bnhd();
    q_count = static_cast<size_t>(params.batch * params.seqlen_q * params.heads_q * params.head_dim);
    kv_count = static_cast<size_t>(params.batch * params.seqlen_k * params.heads_kv * params.head_dim);
    lse_count = static_cast<size_t>(params.batch * params.heads_q * params.seqlen_q);
    if (q.allocate(q_count * 2) != cudaSuccess || k.allocate(kv_count * 2) != cudaSuccess ||
        v.allocate(kv_count * 2) != cudaSuccess || o.allocate(q_count * 2) != cudaSuccess ||
        lse.allocate(lse_count * 4) != cudaSuccess ||
        ref::fill_uniform(q.ptr, params.dtype, q_count, seed, 1.f, stream) != cudaSuccess ||
        ref::fill_uniform(k.ptr, params.dtype, kv_count, seed + 1, 1.f, stream) != cudaSuccess ||
        ref::fill_uniform(v.ptr, params.dtype, kv_count, seed + 2, 1.f, stream) != cudaSuccess) {
      return ::testing::AssertionFailure() << "allocation or fill failed";
    }
    params.q = q.ptr;
    params.k = k.ptr;
    params.v = v.ptr;
    params.o = o.ptr;
    params.lse = static_cast<float*>(lse.ptr);
    const Status st = attention_forward(params, stream);
    if (!st.ok()) return ::testing::AssertionFailure() << st.message;
    return ::testing::AssertionSuccess();
  }

  // How far `got` (O as raw elements) is from this call's O.
  struct Distance {
    double rel_l2 = 0.0, max_abs = 0.0, max_ref = 0.0;  // max |got - ref|, max |ref|
  };
  ::testing::AssertionResult distance(const void* got, Distance* d, cudaStream_t stream) const {
    std::vector<uint16_t> ref_o, got_o;
    if (!download(&ref_o, o.ptr, q_count, stream) || !download(&got_o, got, q_count, stream)) {
      return ::testing::AssertionFailure() << "download failed";
    }
    double err2 = 0.0, ref2 = 0.0;
    *d = Distance{};
    for (size_t i = 0; i < q_count; ++i) {
      const double r = ref::to_float(ref_o[i], params.dtype), g = ref::to_float(got_o[i], params.dtype);
      err2 += (g - r) * (g - r);
      ref2 += r * r;
      d->max_abs = std::fmax(d->max_abs, std::fabs(g - r));
      d->max_ref = std::fmax(d->max_ref, std::fabs(r));
    }
    d->rel_l2 = std::sqrt(err2 / ref2);
    return ::testing::AssertionSuccess();
  }
};

}  // namespace flash::test
