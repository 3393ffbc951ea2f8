// The persistent sm90 kernel's static schedule: which tiles (query blocks of
// one batch and head) each CTA walks, and in what order.
#pragma once

#include "../common/mask.cuh"
#include "../common/seqlen.cuh"
#include "../params.h"

namespace flash::sm90 {

// One tile of work: kBlockM query rows of one (batch, head).
struct Tile {
  int m_block, head, batch;
  int row_begin;   // first query row, within the sequence
  int n_blocks;    // K/V blocks any row of the tile sees (0: all rows see nothing)
  int n_unmasked;  // leading blocks every row sees in full
  bool skip;       // varlen: the sequence is shorter than row_begin; nothing to compute or write
  int len_q, len_k;  // this sequence's query rows and keys
  int q_start;       // varlen: the sequence's first row in packed Q/O (else 0)
  int q_row, q_batch;  // TMA coordinates of Q/O row row_begin: (row, batch)
  int k_row, k_batch;  // TMA coordinates of key 0: (row, batch)
  int64_t o_offset;    // element offset of the sequence's row 0 in O
};

// Static persistent schedule. CTA c takes units c, c + gridDim.x, ...; a
// unit is one tile, or under a causal mask a pair of tiles of one (batch,
// head): query block M-1-j (long) then block j (short), whose K/V counts
// add up to about the same for every j, so equal unit counts mean equal
// work. Units of one (batch, head) are consecutive, so the CTAs running at
// any moment share few K/V heads and mostly hit in L2.
template <bool kIsCausal>
struct TileScheduler {
  int num_m_blocks;
  int units_per_head;

  __device__ __forceinline__ explicit TileScheduler(int num_m_blocks_)
      : num_m_blocks(num_m_blocks_), units_per_head(kIsCausal ? (num_m_blocks_ + 1) / 2 : num_m_blocks_) {}

  __host__ __device__ static int units(int num_m_blocks, int heads_x_batch) {
    return (kIsCausal ? (num_m_blocks + 1) / 2 : num_m_blocks) * heads_x_batch;
  }
  __device__ __forceinline__ int tiles_in_unit(int u) const {
    if constexpr (kIsCausal) {
      const int j = u % units_per_head;
      return num_m_blocks - 1 - j != j ? 2 : 1;
    } else {
      return 1;
    }
  }
  // Varlen and seqused_k calls: the sequence's lengths and offsets come
  // from the cu_seqlens / seqused_k arrays (SeqInfo), the mask is per sequence.
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ Tile tile(int u, int k, const detail::FwdParams& p) const {
    Tile t;
    const int j = u % units_per_head;
    const int bh = u / units_per_head;
    t.m_block = kIsCausal ? (k == 0 ? num_m_blocks - 1 - j : j) : num_m_blocks - 1 - j;
    t.head = bh % p.heads_q;
    t.batch = bh / p.heads_q;
    t.row_begin = t.m_block * kBlockM;
    const SeqInfo seq(p, t.batch);
    t.len_q = seq.len_q;
    t.len_k = seq.len_k;
    t.q_start = seq.q_start;
    t.o_offset = seq.o_offset;
    const bool varlen_q = p.cu_seqlens_q != nullptr;
    const bool varlen_k = p.cu_seqlens_k != nullptr;
    t.q_row = varlen_q ? seq.q_start + t.row_begin : t.row_begin;
    t.q_batch = varlen_q ? 0 : t.batch;
    t.k_row = varlen_k ? seq.k_start : 0;
    t.k_batch = varlen_k ? 0 : t.batch;
    t.skip = t.row_begin >= seq.len_q;
    if (t.skip) {
      t.n_blocks = t.n_unmasked = 0;
      return t;
    }
    const int row_end = min(t.row_begin + kBlockM, seq.len_q);
    const CausalTailMask<kIsCausal> mask(seq.len_q, seq.len_k);
    t.n_blocks = mask.template num_visible_blocks<kBlockN>(t.row_begin, row_end);
    t.n_unmasked = min(t.n_blocks, mask.template num_unmasked_blocks<kBlockN>(t.row_begin, row_end));
    return t;
  }
};

}  // namespace flash::sm90
