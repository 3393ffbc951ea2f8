// Host-side entry point of the append-and-rotate kernel (append.cu), which
// runs before the attention kernels of a call with new K/V rows: plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flash/flash.hpp"

namespace flash::append {

// One checked append call (src/append.cpp fills it after validate()).
// Strides in elements.
struct AppendArgs {
  // The cache, written: dense [batch, alloc, heads_kv, d] or paged pages,
  // of the call's dtype, or e4m3 bytes with fp8_cache: K = k_descale[h *
  // descale_head_stride] * K_fp8 (null: 1), so a new row x is stored as
  // e4m3(x / k_descale), rounded to nearest and saturated to +-448; V alike.
  void* k;
  void* v;
  bool fp8_cache;
  const float* k_descale;
  const float* v_descale;
  int64_t descale_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;  // batch stride: between pages when paged
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  const int32_t* block_table;  // null: dense
  int64_t block_table_batch_stride;
  int page_size;
  int alloc;                   // keys the cache holds per sequence (seqlen_k, or pages * page_size)
  const int32_t* seqused_k;    // lengths before the append
  int32_t* lengths;            // out: lengths after it, min(seqused_k + n, alloc)

  // The new rows: [batch, seqlen_new, heads_kv, d], or packed with cu_seqlens_new.
  const void* k_new;
  const void* v_new;
  int64_t k_new_batch_stride, k_new_seq_stride, k_new_head_stride;
  int64_t v_new_batch_stride, v_new_seq_stride, v_new_head_stride;
  const int32_t* cu_seqlens_new;
  int seqlen_new;

  // Q, rotated into q_out (densely packed [rows, heads_q, head_dim]) when
  // rotary_cos is set.
  const void* q;
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  const int32_t* cu_seqlens_q;
  int seqlen_q;
  void* q_out;

  const float* rotary_cos;  // [rotary_positions, rotary_dim / 2], or null
  const float* rotary_sin;
  int rotary_dim;
  int rotary_positions;
  bool rotary_interleaved;

  int batch, heads_q, heads_kv, head_dim, head_dim_v;
};

// Launches the kernel for `dtype`.
cudaError_t launch_append(const AppendArgs& args, DType dtype, cudaStream_t stream);

}  // namespace flash::append
