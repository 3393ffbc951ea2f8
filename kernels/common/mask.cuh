// Mask policy: which keys a query row sees, and which K/V blocks of a query
// block need the per-element mask at all.
//
// Causal is aligned to the bottom-right corner: row i sees key j iff
// j <= i + seqlen_k - seqlen_q. Every row also stops at seqlen_k (the ragged
// tail of the last K/V block is masked to -inf, never treated as a zero score).
#pragma once

namespace flash {

template <bool kIsCausal>
struct CausalTailMask {
  int seqlen_k;
  int diag_offset;  // seqlen_k - seqlen_q

  __device__ __forceinline__ CausalTailMask(int seqlen_q, int seqlen_k_)
      : seqlen_k(seqlen_k_), diag_offset(seqlen_k_ - seqlen_q) {}

  // One past the last key row `row` sees (may be <= 0: the row sees nothing).
  __device__ __forceinline__ int col_limit(int row) const {
    if constexpr (kIsCausal) {
      return min(seqlen_k, row + diag_offset + 1);
    } else {
      return seqlen_k;
    }
  }

  // Number of K/V blocks any row in [row_begin, row_end) sees: blocks at or
  // past this index are wholly hidden and never loaded.
  template <int kBlockN>
  __device__ __forceinline__ int num_visible_blocks(int row_begin, int row_end) const {
    (void)row_begin;
    const int limit = col_limit(row_end - 1);
    return limit <= 0 ? 0 : (limit + kBlockN - 1) / kBlockN;
  }

  // Number of leading K/V blocks every row in [row_begin, row_end) sees in
  // full: these run with no mask at all.
  template <int kBlockN>
  __device__ __forceinline__ int num_unmasked_blocks(int row_begin, int row_end) const {
    (void)row_end;
    const int limit = col_limit(row_begin);
    return limit <= 0 ? 0 : limit / kBlockN;
  }
};

}  // namespace flash
