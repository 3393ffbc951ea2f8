// A float64 attention on the GPU, for shapes too large for the CPU
// reference: the stress tests' yardstick (millions of keys, billions of
// elements).
//
// For each batch b in the chosen set and each kv head, the query rows of
// the kv head's group are gathered into float64, and the keys are walked in
// chunks: S = Q K^T and O_chunk = P V through cuBLAS DGEMM, the chunk's
// softmax and its merge into the running (max, sum, O) in float64. Rounding
// is float64 throughout, so against flash's float32 accumulation it is
// exact for the purpose (relative error ~1e-15).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "flash/flash.hpp"

namespace flash::ref {

// Computes O and the LSE of the dense call `p` (pointers and strides as in
// flash::attention_forward; fp16 or bf16; causal, windows and softcap
// honoured; no varlen, paging, sinks or ALiBi) for the batches listed in `batches`, or
// every batch when it is empty. `o` receives float64 [batch, seqlen_q,
// heads_q, head_dim_v (or head_dim)] and `lse` [batch, heads_q, seqlen_q], both on the
// host, sized for every batch; rows of batches not computed are NaN.
// Synchronous (it allocates and frees its own device scratch).
Status double_attention(const AttentionParams& p, const std::vector<int64_t>& batches, cublasHandle_t handle,
                        cudaStream_t stream, std::vector<double>* o, std::vector<double>* lse);

}  // namespace flash::ref
