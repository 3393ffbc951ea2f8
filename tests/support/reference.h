// References that flash is checked and benchmarked against.
//
//   standard_attention: naive attention on the GPU through cuBLAS, the
//     "standard attention" of the benchmark: S = Q K^T in float32
//     (cublasGemmStridedBatchedEx), a mask + softmax kernel that writes P in
//     the input dtype and the LSE, then O = P V with float32 accumulation.
//   cpu_attention: float64 on the CPU, for small shapes.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flash/flash.hpp"

namespace flash::ref {

// Bytes of device scratch standard_attention() needs for `p`.
size_t standard_attention_workspace_bytes(const AttentionParams& p);

// Computes attention for `p` (same layout, strides, GQA, causal and scale
// conventions as flash::attention_forward). Writes p.o in p.dtype and, when
// non-null, p.lse. When o_f32 is non-null it also receives O in float32,
// densely packed [batch, seqlen_q, heads_q, head_dim] (no output rounding:
// this is what tests compare against). Asynchronous on `stream`; sets
// `handle`'s stream to `stream` and its pointer mode to host. Accepts what
// flash::validate() accepts (it returns validate's status otherwise),
// kInvalidArgument for a too-small workspace, kCudaError for CUDA or cuBLAS
// failures.
Status standard_attention(const AttentionParams& p, float* o_f32, void* workspace, size_t workspace_bytes,
                          cublasHandle_t handle, cudaStream_t stream);

// float64 reference on host copies of Q, K, V (elements in p.dtype, laid
// out with p's strides, pointers in `p` ignored). Returns O densely packed
// [batch, seqlen_q, heads_q, head_dim] and LSE [batch, heads_q, seqlen_q].
void cpu_attention(const AttentionParams& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                   std::vector<double>* o, std::vector<double>* lse);

}  // namespace flash::ref
