// Where sequence `b` of a call lives: its query and key counts and the
// element offsets of its row 0 in Q, O, K and V, for the dense, the
// variable-length (cu_seqlens) and the paged layouts. Shared by the sm80 and
// decode kernels; page_of_key by every kernel reading a block table.
#pragma once

#include <cstdint>

#include "../params.h"

namespace flash {

// The block-table entry holding key `key` of a paged cache: page_shift is
// log2(page_size) for a power of two (a shift), else -1 (a division).
__device__ __forceinline__ int page_of_key(int key, int page_size, int page_shift) {
  return page_shift >= 0 ? key >> page_shift : key / page_size;
}

// Sequence `b`'s query side alone: read from cu_seqlens_q, which no
// kernel of a call writes (the split-KV combine reads it before it waits
// for the decode kernel).
struct QueryRows {
  int len_q;         // query rows of this sequence (negative for bad cu_seqlens_q; SeqInfo clamps it)
  int q_start;       // first row in packed Q/O (varlen), else 0; indexes the varlen LSE
  int64_t q_offset;  // element offset of row 0 of Q
  int64_t o_offset;  // element offset of row 0 of O

  __device__ __forceinline__ QueryRows(const detail::FwdParams& p, int b) {
    if (p.cu_seqlens_q != nullptr) {
      q_start = p.cu_seqlens_q[b];
      len_q = p.cu_seqlens_q[b + 1] - q_start;
      q_offset = static_cast<int64_t>(q_start) * p.q_seq_stride;
      o_offset = static_cast<int64_t>(q_start) * p.o_seq_stride;
    } else {
      q_start = 0;
      len_q = p.seqlen_q;
      q_offset = static_cast<int64_t>(b) * p.q_batch_stride;
      o_offset = static_cast<int64_t>(b) * p.o_batch_stride;
    }
  }
};

struct SeqInfo : QueryRows {
  int len_k;         // keys of this sequence
  int k_start;       // first row in packed K/V (varlen), else 0
  int64_t k_offset;  // element offset of key 0 of K (0 when paged: pages are looked up per row)
  int64_t v_offset;  // element offset of key 0 of V (0 when paged)

  __device__ __forceinline__ SeqInfo(const detail::FwdParams& p, int b) : QueryRows(p, b) {
    if (p.cu_seqlens_k != nullptr) {
      k_start = p.cu_seqlens_k[b];
      len_k = p.cu_seqlens_k[b + 1] - k_start;
      k_offset = static_cast<int64_t>(k_start) * p.k_seq_stride;
      v_offset = static_cast<int64_t>(k_start) * p.v_seq_stride;
    } else {
      k_start = 0;
      len_k = p.max_seqlen_k_alloc;
      k_offset = p.block_table != nullptr ? 0 : static_cast<int64_t>(b) * p.k_batch_stride;
      v_offset = p.block_table != nullptr ? 0 : static_cast<int64_t>(b) * p.v_batch_stride;
    }
    if (p.seqused_k != nullptr) len_k = min(len_k, p.seqused_k[b]);
    len_q = max(len_q, 0);
    len_k = max(len_k, 0);
  }
};

}  // namespace flash
