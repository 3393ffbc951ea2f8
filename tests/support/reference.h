// References that flash is checked and benchmarked against.
//
//   standard_attention: naive attention on the GPU through cuBLAS, the
//     "standard attention" of the benchmark: S = Q K^T in float32
//     (cublasGemmStridedBatchedEx), a mask + softmax kernel that writes P in
//     the input dtype and the LSE, then O = P V with float32 accumulation.
//   cpu_attention: float64 on the CPU, for small shapes.
//
// Both honour causal, window_left/window_right, softcap, sinks and ALiBi
// (see AttentionParams; standard_attention reads p.sinks and
// p.alibi_slopes on the device, cpu_attention takes host copies) and are dense-only: cu_seqlens_q/k, seqused_k and
// block_table must be null (varlen and paged calls are checked per sequence,
// see tests/feature_case.h). num_splits and the workspace are flash's
// business and are ignored.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flash/flash.hpp"

namespace flash::ref {

// The keys [first, last] (inclusive; none when first > last) that query row i
// of a dense sequence with seqlen_q rows and seqlen_k keys sees: bottom-right
// aligned, d = seqlen_k - seqlen_q, keys i + d - window_left .. i + d +
// window_right, -1 leaving a side unbounded; causal is window_right = 0.
struct KeyRange {
  int64_t first;
  int64_t last;
};
// Host and device (the float64 reference's kernels use it too).
#if defined(__CUDACC__)
#define FLASH_REF_HOST_DEVICE __host__ __device__
#else
#define FLASH_REF_HOST_DEVICE
#endif
FLASH_REF_HOST_DEVICE inline KeyRange visible_keys(int64_t i, int64_t seqlen_q, int64_t seqlen_k, bool causal, int64_t window_left,
                             int64_t window_right) {
  const int64_t diagonal = i + seqlen_k - seqlen_q;
  const int64_t right = causal ? 0 : window_right;
  KeyRange r{0, seqlen_k - 1};
  // Compared as differences so that a huge window cannot overflow.
  if (window_left >= 0 && window_left < diagonal - r.first) r.first = diagonal - window_left;
  if (right >= 0 && right < r.last - diagonal) r.last = diagonal + right;
  return r;
}

// Whether `p` sets a field the dense references do not model (varlen or paged).
inline bool uses_varlen_or_paging(const AttentionParams& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr ||
         p.block_table != nullptr;
}

// Width of V and O in `p`: head_dim_v, or head_dim when it is 0.
inline int64_t value_dim(const AttentionParams& p) { return p.head_dim_v != 0 ? p.head_dim_v : p.head_dim; }

// Bytes of device scratch standard_attention() needs for `p`.
size_t standard_attention_workspace_bytes(const AttentionParams& p);

// Computes attention for `p` (same layout, strides, GQA, causal and scale
// conventions as flash::attention_forward). Writes p.o in p.dtype and, when
// non-null, p.lse. When o_f32 is non-null it also receives O in float32,
// densely packed [batch, seqlen_q, heads_q, value_dim(p)] (no output rounding:
// this is what tests compare against). Asynchronous on `stream`; sets
// `handle`'s stream to `stream` and its pointer mode to host. Accepts what
// flash::validate() accepts (it returns validate's status otherwise) except
// varlen and paged calls (kInvalidArgument, see uses_varlen_or_paging),
// kInvalidArgument for a too-small workspace, kCudaError for CUDA or cuBLAS
// failures.
Status standard_attention(const AttentionParams& p, float* o_f32, void* workspace, size_t workspace_bytes,
                          cublasHandle_t handle, cudaStream_t stream);

// float64 reference on host copies of Q, K, V (elements in p.dtype, laid
// out with p's strides, pointers in `p` ignored; `sinks` and `alibi`:
// heads_q host floats each, or null for none). Returns O densely packed
// [batch, seqlen_q, heads_q, value_dim(p)] and LSE [batch, heads_q, seqlen_q].
// Returns kInvalidArgument (and leaves o and lse empty) for a varlen or paged
// call.
Status cpu_attention(const AttentionParams& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                     std::vector<double>* o, std::vector<double>* lse, const float* sinks = nullptr,
                     const float* alibi = nullptr);

}  // namespace flash::ref
