// Kernel-side arguments of one forward call, filled by src/ after every
// check has passed. Plain C++ (no CUDA types) so host code can build it.
#pragma once

#include <cstdint>

namespace flash::detail {

struct FwdParams {
  const void* q;  // Q base pointer, [batch, seqlen_q, heads_q, head_dim].
  const void* k;  // K base pointer, [batch, seqlen_k, heads_kv, head_dim].
  const void* v;  // V base pointer, [batch, seqlen_k, heads_kv, head_dim].
  void* o;        // O base pointer, [batch, seqlen_q, heads_q, head_dim].
  float* lse;     // Optional LSE, [batch, heads_q, seqlen_q] contiguous; may be null.

  int64_t q_batch_stride, q_seq_stride, q_head_stride;  // Strides of Q, in elements.
  int64_t k_batch_stride, k_seq_stride, k_head_stride;  // Strides of K, in elements.
  int64_t v_batch_stride, v_seq_stride, v_head_stride;  // Strides of V, in elements.
  int64_t o_batch_stride, o_seq_stride, o_head_stride;  // Strides of O, in elements.

  int batch;      // Number of sequences (gridDim.z).
  int seqlen_q;   // Query rows per sequence.
  int seqlen_k;   // Key rows per sequence.
  int heads_q;    // Query heads (gridDim.y).
  int heads_kv;   // Key/value heads.
  int q_per_kv;   // heads_q / heads_kv: query heads sharing one K/V head.
  int num_sms;    // Multiprocessors of the device: bounds a persistent grid.

  float softmax_scale;       // Scale applied to Q K^T (natural-log domain, for the LSE).
  float softmax_scale_log2;  // softmax_scale * log2(e): folds the scale into the exp2 FFMA.
};

}  // namespace flash::detail
