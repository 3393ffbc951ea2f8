// The persistent sm90 kernel's static schedule: which tiles (query blocks of
// one batch and head) each CTA walks, and in what order.
#pragma once

#include "../common/mask.cuh"
#include "../common/seqlen.cuh"
#include "../params.h"
#include "unit_map.h"

namespace flash::sm90 {

// One tile of work: kBlockM query rows of one (batch, head).
struct Tile {
  int m_block, head, batch;
  int row_begin;   // first query row, within the sequence (negative in a masked call's block 0: first_row)
  int n_first;     // first K/V block any row of the tile sees
  int n_blocks;    // K/V blocks [n_first, n_first + n_blocks) hold every key a row sees (0: none)
  int unmasked_begin, unmasked_end;  // blocks every row sees in full: no per-element mask
  bool skip;       // varlen: the sequence has no row in this block; nothing to compute or write
  int len_q, len_k;  // this sequence's query rows and keys
  int q_start;       // varlen: the sequence's first row in packed Q/O (else 0)
  int q_row, q_batch;  // TMA coordinates of Q/O row row_begin: (row, batch)
  int k_row, k_batch;  // TMA coordinates of key 0: (row, batch)
  int64_t o_offset;    // element offset of the sequence's row 0 in O

  __device__ __forceinline__ bool needs_mask(int n_block) const {
    return block_needs_mask(n_block, unmasked_begin, unmasked_end);
  }
};

// Static persistent schedule. CTA c takes units c, c + gridDim.x, ...; a
// unit is one tile, or under a causal mask a pair of tiles of one (batch,
// head): query block M-1-j (long) then block j (short), whose K/V counts
// add up to about the same for every j; when M is odd, each head's middle
// block is a half-cost unit, and these come after every head's pairs, so a
// CTA's share is within one unit's cost of another's (unit_map.h). A
// head's pair units are consecutive, so the CTAs running at any moment
// share few K/V heads and mostly hit in L2.
//
// Split-KV (kSplit, p.num_splits = S > 1): unit u is split u % S of unit u / S
// above; a split covers the S-th part of its tile's visible K/V blocks
// (consecutive blocks, the last part shorter or empty), so the S parts of
// one tile run on neighbouring CTAs at once and read disjoint keys.
//
// Variable-length calls (cu_seqlens_q) with at most kSchedSeqs sequences
// walk a compact list instead: every CTA first ranks the sequences by the
// cost of one of their units (K/V blocks; a causal pair's two tiles), most
// expensive first, and numbers only the units that exist (within a
// sequence as UnitMap numbers a batch: every head's pairs, then the
// middle blocks). Dealt round-robin over a list of nearly non-increasing
// cost (a sequence's half-cost middles may precede the next one's pairs),
// no CTA ends up more than about one unit's cost ahead of another; the
// padded (batch, max_seqlen) numbering instead scatters units of very
// different costs over the CTAs (up to ~15% apart on 64 sequences of
// 100-8k tokens). Larger batches keep the padded numbering: their units
// are many and small, so they even out anyway.
//
// kMasked: a causal or sliding-window mask; else only the ragged tail.
// kLeft: the window has a left edge (see fwd_kernel). Masked calls pair tiles as causal ones do (under a sliding
// window the tiles' costs are about equal anyway).
// kFastDiv: the padded walk divides through FwdParams' FastDivmods (a
// multiply-high and a shift) instead of dividing; not in the KV-cache
// kernels, where it makes hd256's causal cache kernel spill (12 bytes,
// sm_90a).
template <bool kMasked, bool kLeft, int kBlockM, int kBlockN, int kSchedSeqs, int kNThreads, bool kSplit = false,
          bool kLongestFirst = false, bool kFastDiv = false>
struct TileScheduler;

// Which fwd_kernel instantiations compile the longest-first walk (kernel
// and launcher must agree, or their unit counts differ): the dense masked
// bf16/fp16 kernels of 192-row tiles without a left window edge (causal
// calls, and the ALiBi-only kernels, which every ALiBi call without a
// softcap or a left edge runs, causal or not), not the softcap, window,
// split, KV-cache or FP8 prefill ones.
template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kSplit, bool kCache>
inline constexpr bool kWalksLongestFirst =
    kMasked && !kLeft && !kSplit && !kCache && !Traits::kFp8In && Traits::kBlockM == 192;

// The scheduler of fwd_kernel<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache, ...>.
template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kSplit, bool kCache>
using KernelScheduler =
    TileScheduler<kMasked, kLeft, Traits::kBlockM, Traits::kBlockN, Traits::kSchedSeqs, Traits::kNThreads, kSplit,
                  kWalksLongestFirst<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache>, !kCache>;

template <bool kMasked, bool kLeft, int kBlockM, int kBlockN, int kSchedSeqs, int kNThreads, bool kSplit,
          bool kLongestFirst, bool kFastDiv>
struct TileScheduler {
  static_assert(kSchedSeqs >= 32 && kSchedSeqs <= kNThreads, "varlen schedule: one sequence per thread");
  int num_m_blocks;    // padded numbering: query blocks of the longest sequence
  // Compact list in shared memory: first_unit[r] = the first unit of rank r,
  // first_unit[batch] = the total; order[r] = the sequence of rank r. Whether
  // it is in use is read from the parameters, so it costs the consumers no
  // registers.
  int* first_unit;
  int* order;

  __device__ __forceinline__ TileScheduler(const detail::FwdParams& p, int* sched)
      : num_m_blocks((p.seqlen_q + kBlockM - 1) / kBlockM),
        first_unit(sched),
        order(sched + kSchedSeqs + 1) {}

  __device__ __forceinline__ static bool compact(const detail::FwdParams& p) {
    return p.cu_seqlens_q != nullptr && p.batch <= kSchedSeqs;
  }

  // kLongestFirst: causal calls on the padded numbering may run longest
  // first (UnitMap::section; the launcher sets FwdParams::sched_section).
  // Compiled only into the dense causal kernels of 192-row tiles: not under
  // a left window edge, where the tiles cost about the same, nor split, nor
  // into the KV-cache kernels.
  static_assert(!kLongestFirst || (kMasked && !kSplit), "longest first: causal, unsplit calls only");
  __device__ __forceinline__ static int section(const detail::FwdParams& p) {
    return kLongestFirst ? p.sched_section : 0;
  }
  // Longest first, the CTA's walk is looked up, not computed: build()
  // writes slot i's tile (unit blockIdx.x + i * gridDim.x) into the shared
  // memory of the compact list, (batch x head) << kSlotBlockBits | query
  // block, so that the consumers' loop carries none of the walk's
  // divisions. The launcher runs longest first only where the CTA's slots
  // fit kSlotCapacity and the fields their bits.
  static constexpr int kSlotCapacity = 2 * (kSchedSeqs + 1);
  static constexpr int kSlotBlockBits = 12;
  // The padded numbering's UnitMap.
  __device__ __forceinline__ UnitMap padded(const detail::FwdParams& p) const {
    return UnitMap{num_m_blocks, p.heads_q * p.batch, kMasked, section(p), static_cast<int>(gridDim.x)};
  }

  // Tile k of unit u on the padded numbering (UnitMap::locate).
  __device__ __forceinline__ int locate_padded(int u, int k, int* bh, int* m_block,
                                               const detail::FwdParams& p) const {
    if constexpr (kFastDiv) {
      return padded(p).locate(u, k, bh, m_block, p.sched_unit_div);
    } else {
      return padded(p).locate(u, k, bh, m_block);
    }
  }

  // Padded numbering: every unit of heads_x_batch heads of num_m_blocks blocks
  // (`section`: FwdParams::sched_section, as the call runs).
  __host__ __device__ static int units(int num_m_blocks, int heads_x_batch, int section = 0) {
    return UnitMap{num_m_blocks, heads_x_batch, kMasked, kLongestFirst ? section : 0}.num_units();
  }
  __device__ __forceinline__ int num_units(const detail::FwdParams& p) const {
    return (compact(p) ? first_unit[p.batch] : padded(p).num_units()) * splits(p);
  }
  // Split-KV kernels (kSplit) run calls with num_splits > 1 only; the others have no split code.
  __device__ __forceinline__ static int splits(const detail::FwdParams& p) { return kSplit ? p.num_splits : 1; }
  // Which key range of its tile unit u is (split-KV calls only).
  __device__ __forceinline__ static int split_of(int u, const detail::FwdParams& p) { return u % p.num_splits; }

  // Builds the compact list when the call qualifies. Every thread of the
  // CTA must call it; it ends with __syncthreads().
  __device__ __forceinline__ void build(const detail::FwdParams& p) const {
    if (section(p) > 0) {
      const UnitMap map = padded(p);
      const int units = map.num_units();
      for (int i = threadIdx.x; i < kSlotCapacity; i += kNThreads) {
        const int u = blockIdx.x + i * static_cast<int>(gridDim.x);
        if (u >= units) break;
        int bh, m_block;
        map.locate(u, 0, &bh, &m_block);
        first_unit[i] = bh << kSlotBlockBits | m_block;
      }
      __syncthreads();
      return;
    }
    if (!compact(p)) return;
    int* const cost_then_first = first_unit;  // costs first, then the prefix sums
    int* const rank_order = order;
    const int b = threadIdx.x;
    int cost = 0, my_units = 0;
    if (b < p.batch) {
      const SeqInfo seq(p, b);
      const int m_blocks = (seq.len_q + kBlockM - 1) / kBlockM;
      my_units = UnitMap{m_blocks, p.heads_q, kMasked}.num_units();
      if (m_blocks > 0) {
        const WindowMask<kMasked, kLeft> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
        int begin, end;
        const int last_begin = first_row(m_blocks - 1, seq.len_q);
        mask.template visible_blocks<kBlockN>(max(last_begin, 0), seq.len_q - 1, &begin, &end);
        cost = end - begin;
        if (kMasked && m_blocks > 1) {
          mask.template visible_blocks<kBlockN>(0, first_row(0, seq.len_q) + kBlockM - 1, &begin, &end);
          cost += end - begin;
        }
        cost += 1;  // the tile's own prologue and epilogue
      }
      cost_then_first[b] = cost;
    }
    __syncthreads();
    int rank = 0;
    if (b < p.batch) {
      for (int j = 0; j < p.batch; ++j) {
        const int c = cost_then_first[j];
        rank += (c > cost || (c == cost && j < b)) ? 1 : 0;
      }
    }
    __syncthreads();
    if (b < p.batch) {
      rank_order[rank] = b;
      cost_then_first[rank] = my_units;
    }
    __syncthreads();
    // Exclusive prefix sum of the unit counts, in rank order, by warp 0:
    // each lane sums a run of entries, a shuffle scan offsets the runs.
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      const int per_lane = (p.batch + 31) / 32;
      const int begin = min(lane * per_lane, p.batch);
      const int end = min(begin + per_lane, p.batch);
      int run = 0;
      for (int r = begin; r < end; ++r) run += cost_then_first[r];
      int inclusive = run;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int other = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += other;
      }
      int acc = inclusive - run;
      for (int r = begin; r < end; ++r) {
        const int u = cost_then_first[r];
        cost_then_first[r] = acc;
        acc += u;
      }
      if (lane == 31) cost_then_first[p.batch] = inclusive;
    }
    __syncthreads();
  }

  __device__ __forceinline__ int tiles_in_unit(int u, const detail::FwdParams& p) const {
    if constexpr (kMasked) {
      if (section(p) > 0) return 1;
      if constexpr (kSplit) u /= p.num_splits;
      if (compact(p)) {
        const int r = rank_of(u, p.batch);
        const SeqInfo seq(p, order[r]);
        const int m_blocks = (seq.len_q + kBlockM - 1) / kBlockM;
        int head, m_block;
        return UnitMap{m_blocks, p.heads_q, kMasked}.locate(u - first_unit[r], 0, &head, &m_block);
      }
      int bh, m_block;
      return locate_padded(u, 0, &bh, &m_block, p);
    } else {
      (void)u;
      (void)p;
      return 1;
    }
  }

  // Varlen and seqused_k calls: the sequence's lengths and offsets come
  // from the cu_seqlens / seqused_k arrays (SeqInfo), the mask is per sequence.
  // Callers whose scheduler cannot walk longest first (the KV-cache producers).
  __device__ __forceinline__ Tile tile(int u, int k, const detail::FwdParams& p) const {
    static_assert(!kLongestFirst, "a longest-first walk needs the tile's slot");
    return tile(u, k, p, 0);
  }
  // `slot`: u's place in this CTA's walk, (u - blockIdx.x) / gridDim.x
  // (read longest first only).
  __device__ __forceinline__ Tile tile(int u, int k, const detail::FwdParams& p, int slot) const {
    Tile t;
    int split = 0;
    if constexpr (kSplit) {
      split = split_of(u, p);
      u /= p.num_splits;
    }
    int rank = 0;
    if (compact(p)) {
      rank = rank_of(u, p.batch);
      t.batch = order[rank];
    } else {
      int bh;
      if (section(p) > 0) {
        const int entry = first_unit[slot];
        bh = entry >> kSlotBlockBits;
        t.m_block = entry & ((1 << kSlotBlockBits) - 1);
      } else {
        locate_padded(u, k, &bh, &t.m_block, p);
      }
      if constexpr (kFastDiv) {
        p.sched_heads_div.divmod(bh, &t.batch, &t.head);
      } else {
        t.head = bh % p.heads_q;
        t.batch = bh / p.heads_q;
      }
    }
    const SeqInfo seq(p, t.batch);
    if (compact(p)) {
      const int m_blocks = (seq.len_q + kBlockM - 1) / kBlockM;
      UnitMap{m_blocks, p.heads_q, kMasked}.locate(u - first_unit[rank], k, &t.head, &t.m_block);
    }
    t.row_begin = first_row(t.m_block, seq.len_q);
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
    // (A shifted block 0 still has real rows: the shift is below kBlockM.)
    t.skip = t.row_begin >= seq.len_q;
    if (t.skip) {
      t.n_first = t.n_blocks = t.unmasked_begin = t.unmasked_end = 0;
      return t;
    }
    // The blocks are those of the tile's real rows; its padding rows (before
    // row 0 or past len_q) are computed on whatever keys those blocks hold
    // and never stored.
    const int row_first = max(t.row_begin, 0);
    const int row_last = min(t.row_begin + kBlockM, seq.len_q) - 1;
    const WindowMask<kMasked, kLeft> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
    int end;
    mask.template visible_blocks<kBlockN>(row_first, row_last, &t.n_first, &end);
    t.n_blocks = end - t.n_first;
    mask.template unmasked_blocks<kBlockN>(row_first, row_last, &t.unmasked_begin, &t.unmasked_end);
    if constexpr (kSplit) {
      const int per = (t.n_blocks + p.num_splits - 1) / p.num_splits;
      const int begin = min(split * per, t.n_blocks);
      t.n_first += begin;
      t.n_blocks = min(per, t.n_blocks - begin);
    }
    return t;
  }

  // First query row of query block m_block of a sequence of len_q rows.
  // Unmasked: m_block * kBlockM, the ragged rows in the last block. Under a
  // causal or window mask the blocks are shifted up by the padding's whole
  // 64-row warpgroup slices, so those fall in block 0 at negative rows:
  // there a padding row costs the few keys of the top rows, not the whole
  // key range of the bottom ones (hd64's causal 192-row tiles at 4k keys
  // wasted 6% of the call on padding). Negative rows are outside Q and
  // O: a warpgroup whose 64 rows are all negative neither loads its Q rows
  // nor stores its O rows (a TMA store starting at a negative row faults),
  // and the guarded stores skip them.
  //
  // 192-row tiles always shift; 128-row tiles from 16 query blocks on,
  // below which the shift costs more than it saves
  // (docs/perf/sm90-schedule.md). Masks whose top rows are not the cheap
  // ones (a left edge only, a softcap without a mask) shift too, for nothing.
  static constexpr int kShiftMinBlocks = kBlockM > 128 ? 1 : 16;
  __host__ __device__ static int first_row(int m_block, int len_q) {
    const bool shift = kMasked && (len_q + kBlockM - 1) / kBlockM >= kShiftMinBlocks;
    const int padding = shift ? (kBlockM - len_q % kBlockM) % kBlockM / 64 * 64 : 0;
    return m_block * kBlockM - padding;
  }

  // Whether any tile after (u, k) in this CTA's walk has work. kCache: a
  // KV-cache call, whose seqused_k may leave a sequence without keys.
  template <bool kCache = false>
  __device__ __forceinline__ bool has_work_after(int u, int k, int num_units, const detail::FwdParams& p,
                                                 int slot) const {
    // Dense, and masked only with no more queries than keys: every row sees
    // a key (this tile's do, so seqlen_k > 0), so every tile has work and
    // only the walk's length matters (an unmasked unit is one tile). A left
    // edge changes nothing: row i's key i + d (d = seqlen_k - seqlen_q >= 0)
    // lies in [0, seqlen_k), and windows (left >= 0, right >= 0 or
    // unbounded) always contain it. (A split may be empty, so not with
    // splits.)
    if (!kSplit && !kCache && p.cu_seqlens_q == nullptr && p.cu_seqlens_k == nullptr &&
        (!kMasked || p.seqlen_k >= p.seqlen_q)) {
      return k + 1 < tiles_in_unit(u, p) || u + static_cast<int>(gridDim.x) < num_units;
    }
    for (int k2 = k + 1; k2 < tiles_in_unit(u, p); ++k2) {
      if (tile(u, k2, p, slot).n_blocks > 0) return true;
    }
    int slot2 = slot + 1;
    for (int u2 = u + gridDim.x; u2 < num_units; u2 += gridDim.x, ++slot2) {
      for (int k2 = 0; k2 < tiles_in_unit(u2, p); ++k2) {
        if (tile(u2, k2, p, slot2).n_blocks > 0) return true;
      }
    }
    return false;
  }

 private:
  // Compact list: the rank whose units include u (first_unit is non-decreasing).
  __device__ __forceinline__ int rank_of(int u, int num_seqs) const {
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_unit[mid] <= u) lo = mid; else hi = mid - 1;
    }
    return lo;
  }
};

}  // namespace flash::sm90
