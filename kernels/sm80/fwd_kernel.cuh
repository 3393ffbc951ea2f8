// FlashAttention-2 forward for sm_80 and newer: mma.sync m16n8k16 fed by
// ldmatrix, K/V streamed through a kStages-deep cp.async ring.
//
// One CTA owns a block of kBlockM query rows of one (batch, head). Q_i is
// loaded once; K_j/V_j blocks are visited from the last visible block down
// to block 0, so the blocks that need the per-element mask (the ragged tail
// and, when causal, the diagonal) come first and the wholly visible ones
// then run with no mask. Blocks wholly hidden by the causal mask are never
// loaded. Each warp owns kWarpRows query rows: S = Q_i K_j^T stays in
// registers, goes through the online softmax, and is reused, rounded to the
// input type, as the A operand of O += P V_j.
#pragma once

#include <cstdint>

#include "../common/mask.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../common/softmax.cuh"
#include "../params.h"
#include "kernel_traits.cuh"

namespace flash::sm80 {

// Byte offset of 16-byte chunk `c` of row `row` in a swizzled tile of kRows
// rows (see FwdTraits::kSwizzleChunks).
template <typename Traits, int kRows>
__device__ __forceinline__ uint32_t chunk_offset(int row, int c) {
  constexpr int kS = Traits::kSwizzleChunks;
  const int swizzle = kS == 8 ? (row & 7) : ((row >> 1) & 3);
  return static_cast<uint32_t>(((c / kS) * kRows * kS + row * kS + ((c % kS) ^ swizzle)) * 16);
}

// Per-lane part of an ldmatrix address into a swizzled tile. An ldmatrix.x4
// reads four 8x8 matrices; lane l supplies the row address of matrix l/8.
// Every row a lane addresses is (its lane-dependent row) + a multiple of 8,
// so the swizzle term is fixed per lane, and the chunk a lane reads is an
// even compile-time chunk plus 0 or 1. The address then splits into
//   base (per lane) + compile-time offset + (compile-time chunk ^ x (per lane)) * 16,
// which keeps the many ldmatrix addresses of the unrolled loops from each
// taking a register.
template <typename Traits, int kRows>
struct LdsmAddress {
  static constexpr int kS = Traits::kSwizzleChunks;
  uint32_t base;  // smem address of this lane's row, swizzle block 0
  uint32_t x;     // (odd-chunk bit ^ row swizzle) * 16

  __device__ __forceinline__ LdsmAddress(uint32_t tile, int lane_row, int odd_chunk) {
    const int swizzle = kS == 8 ? (lane_row & 7) : ((lane_row >> 1) & 3);
    base = tile + static_cast<uint32_t>(lane_row * kS * 16);
    x = static_cast<uint32_t>((odd_chunk ^ swizzle) * 16);
  }

  // Address of (lane_row + row, chunk_even + odd_chunk); row a multiple of 8
  // and chunk_even even, both compile-time after unrolling.
  __device__ __forceinline__ uint32_t at(int row, int chunk_even) const {
    return base + static_cast<uint32_t>(((chunk_even / kS) * kRows * kS + row * kS) * 16) +
           ((static_cast<uint32_t>(chunk_even % kS) * 16) ^ x);
  }
};

// Issues the cp.async copies of a [kRows, kHeadDim] tile whose first row is
// at `gmem`; rows at or past `valid_rows` and 16-byte chunks at or past
// `valid_chunks` (head_dim * sizeof(Element) / 16; V: head_dim_v's) are
// zero-filled, not read.
template <typename Traits, int kRows>
__device__ __forceinline__ void load_tile(uint32_t smem, const typename Traits::Element* gmem, int64_t row_stride,
                                          int valid_rows, int valid_chunks, int tid) {
  constexpr int kCPR = Traits::kChunksPerRow;
  constexpr int kIters = kRows * kCPR / Traits::kNThreads;
  constexpr int kChunkElems = 16 / static_cast<int>(sizeof(typename Traits::Element));
  if constexpr (Traits::kNThreads % kCPR == 0 && (Traits::kNThreads / kCPR) % 8 == 0) {
    // Each thread keeps one chunk column and steps down kRowStep rows, a
    // multiple of 8, so its swizzle never changes: one running pointer and
    // compile-time smem offsets instead of a register per copy.
    constexpr int kRowStep = Traits::kNThreads / kCPR;
    const int row = tid / kCPR;
    const int c = tid % kCPR;
    const bool column = c < valid_chunks;
    const uint32_t dst = smem + chunk_offset<Traits, kRows>(row, c);
    const auto* src = gmem + row * row_stride + c * kChunkElems;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool valid = column && row + i * kRowStep < valid_rows;
      ptx::cp_async_16(dst + i * kRowStep * Traits::kSwizzleChunks * 16, valid ? src : gmem, valid);
      src += kRowStep * row_stride;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = tid + i * Traits::kNThreads;
      const int row = idx / kCPR;
      const int c = idx % kCPR;
      const bool valid = row < valid_rows && c < valid_chunks;
      const auto* src = valid ? gmem + row * row_stride + c * kChunkElems : gmem;
      ptx::cp_async_16(smem + chunk_offset<Traits, kRows>(row, c), src, valid);
    }
  }
}

// The K and V blocks of keys [first, first + kRows) of a paged cache, in two
// halves: fetch() reads the page number of each row this thread copies from
// the sequence's block-table row `table`, issue() starts the copies (like
// load_tile). Split so a kernel can fetch the page numbers a step ahead:
// a copy is asm volatile, so the compiler cannot hoist a later table read
// above it, and reading the table right before copying stalls on it.
template <typename Traits, int kRows>
struct PagedKV {
  static constexpr int kCPR = Traits::kChunksPerRow;
  static constexpr int kIters = kRows * kCPR / Traits::kNThreads;
  using Element = typename Traits::Element;
  static constexpr int kChunkElems = 16 / static_cast<int>(sizeof(Element));
  int page[kIters];

  // page_shift: log2(page_size) for a power of two, else -1 (then / and %,
  // a few dozen instructions each, per row; page_of_key, seqlen.cuh).
  __device__ __forceinline__ static int row_in_page(int key, int page_size, int page_shift) {
    return page_shift >= 0 ? key & (page_size - 1) : key % page_size;
  }

  __device__ __forceinline__ void fetch(const int* table, int page_size, int page_shift, int first, int valid_rows,
                                        int tid) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int row = (tid + i * Traits::kNThreads) / kCPR;
      page[i] = row < valid_rows ? __ldg(table + page_of_key(first + row, page_size, page_shift)) : 0;
    }
  }

  // `k_head` / `v_head` point at the head's element 0 of page 0.
  __device__ __forceinline__ void issue(uint32_t smem_k, uint32_t smem_v, const Element* k_head,
                                        const Element* v_head, int64_t k_page_stride, int64_t v_page_stride,
                                        int64_t k_row_stride, int64_t v_row_stride, int page_size,
                                        int page_shift, int first, int valid_rows, int k_chunks, int v_chunks,
                                        int tid) const {
    if constexpr (Traits::kNThreads % kCPR == 0 && (Traits::kNThreads / kCPR) % 4 == 0) {
      // As load_tile: one chunk column a thread, rows kRowStep apart. The
      // swizzle repeats every 8 rows, so with kRowStep a multiple of 8 every
      // row has the thread's first row's, and with 4 (mod 8) the odd rows
      // have the second row's: the smem offsets are one or two per-thread
      // bases plus compile-time constants, and the column rides in the base
      // pointers. Each row's offset passes an empty asm: computed freely,
      // the compiler holds a 64-bit address a copy across the key loop and
      // the 128-row kernels spill.
      constexpr int kRowStep = Traits::kNThreads / kCPR;
      const int row0 = tid / kCPR;
      const int c = tid % kCPR;
      const bool k_column = c < k_chunks;
      const bool v_column = c < v_chunks;
      const uint32_t even = chunk_offset<Traits, kRows>(row0, c);
      const uint32_t odd = kRowStep % 8 == 0 ? even : chunk_offset<Traits, kRows>(row0 + kRowStep, c);
      const Element* k_col = k_head + c * kChunkElems;
      const Element* v_col = v_head + c * kChunkElems;
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const uint32_t base = i % 2 == 0 ? even : odd;
        const uint32_t offset = (kRowStep % 8 == 0 ? i : i / 2 * 2) * kRowStep * Traits::kSwizzleChunks * 16;
        const bool row_valid = i * kRowStep < valid_rows - row0;
        const bool k_valid = row_valid && k_column;
        const bool v_valid = row_valid && v_column;
        const int in_page = row_in_page(first + row0 + i * kRowStep, page_size, page_shift);
        int64_t k_off = k_valid ? page[i] * k_page_stride + in_page * k_row_stride : 0;
        int64_t v_off = v_valid ? page[i] * v_page_stride + in_page * v_row_stride : 0;
        asm("" : "+l"(k_off), "+l"(v_off));
        ptx::cp_async_16(smem_k + base + offset, k_col + k_off, k_valid);
        ptx::cp_async_16(smem_v + base + offset, v_col + v_off, v_valid);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int idx = tid + i * Traits::kNThreads;
        const int row = idx / kCPR;
        const int c = idx % kCPR;
        const bool k_valid = row < valid_rows && c < k_chunks;
        const bool v_valid = row < valid_rows && c < v_chunks;
        const int in_page = row_in_page(first + row, page_size, page_shift);
        const Element* k_src =
            k_valid ? k_head + page[i] * k_page_stride + in_page * k_row_stride + c * kChunkElems : k_head;
        const Element* v_src =
            v_valid ? v_head + page[i] * v_page_stride + in_page * v_row_stride + c * kChunkElems : v_head;
        ptx::cp_async_16(smem_k + chunk_offset<Traits, kRows>(row, c), k_src, k_valid);
        ptx::cp_async_16(smem_v + chunk_offset<Traits, kRows>(row, c), v_src, v_valid);
      }
    }
  }
};

// kMasked: a causal or sliding-window mask (else only the ragged tail);
// kScoreMod: the logit softcap and ALiBi (each when the call asks for it;
// ScoreMod, mask.cuh); kPaged: K/V rows found through the block
// table. Varlen and seqused_k are runtime properties of the call (FwdParams).
template <typename Traits, bool kMasked, bool kScoreMod, bool kPaged>
__global__ void __launch_bounds__(Traits::kNThreads)
    fwd_kernel(const __grid_constant__ detail::FwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kMTiles = Traits::kMTiles;
  constexpr int kNTilesS = Traits::kNTilesS;
  constexpr int kNTilesO = Traits::kNTilesO;
  constexpr int kStages = Traits::kStages;

  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  // Launch the longest (causal: bottom) query blocks first so the short ones
  // fill the tail. Split-KV (p.num_splits = S > 1): S neighbouring CTAs per
  // query block, CTA split s taking the s-th part of the block's visible
  // K/V blocks (the last part shorter or empty).
  const int splits = p.num_splits > 1 ? p.num_splits : 1;
  const int m_block = static_cast<int>(gridDim.x) / splits - 1 - static_cast<int>(blockIdx.x) / splits;
  const int split = static_cast<int>(blockIdx.x) % splits;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int head_kv = head / p.q_per_kv;
  const SeqInfo seq(p, batch);
  const int row_begin = m_block * kBlockM;
  // Varlen: the grid covers the longest sequence; shorter ones end early.
  if (row_begin >= seq.len_q) return;
  const int row_end = min(row_begin + kBlockM, seq.len_q);

  const WindowMask<kMasked> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
  const ScoreMod<kScoreMod> mods(p);
  const float alibi_neg = kScoreMod && p.alibi_slopes != nullptr ? mods.neg_slope(head) : 0.f;
  const int diag_offset = seq.len_k - seq.len_q;  // d of ALiBi's |i + d - j|
  int n_begin, n_end, u_begin, u_end;
  mask.template visible_blocks<kBlockN>(row_begin, row_end - 1, &n_begin, &n_end);
  mask.template unmasked_blocks<kBlockN>(row_begin, row_end - 1, &u_begin, &u_end);
  if (splits > 1) {
    const int per = (n_end - n_begin + splits - 1) / splits;
    n_begin = min(n_begin + split * per, n_end);
    n_end = min(n_begin + per, n_end);
  }

  const Element* q = static_cast<const Element*>(p.q) + seq.q_offset + head * p.q_head_stride +
                     static_cast<int64_t>(row_begin) * p.q_seq_stride;
  const Element* k = static_cast<const Element*>(p.k) + seq.k_offset + head_kv * p.k_head_stride;
  const Element* v = static_cast<const Element*>(p.v) + seq.v_offset + head_kv * p.v_head_stride;

  const uint32_t smem_q = ptx::smem_addr(smem);
  const uint32_t smem_kv = smem_q + Traits::kQBytes;

  const int chunks = p.head_dim / 8;     // 16-byte chunks of a Q or K row the call has
  const int v_chunks = p.head_dim_v / 8;  // and of a V row
  auto load_kv = [&](int n_block, int stage) {
    const uint32_t sk = smem_kv + stage * Traits::kStageBytes;
    const int first = n_block * kBlockN;
    if constexpr (!kPaged) {
      load_tile<Traits, kBlockN>(sk, k + first * p.k_seq_stride, p.k_seq_stride, seq.len_k - first, chunks, tid);
      load_tile<Traits, kBlockN>(sk + Traits::kKVBytes, v + first * p.v_seq_stride, p.v_seq_stride,
                                 seq.len_k - first, v_chunks, tid);
    } else {
      PagedKV<Traits, kBlockN> pages;
      pages.fetch(p.block_table + batch * p.block_table_batch_stride, p.page_size, p.page_shift, first,
                  seq.len_k - first, tid);
      pages.issue(sk, sk + Traits::kKVBytes, k, v, p.k_batch_stride, p.v_batch_stride, p.k_seq_stride,
                  p.v_seq_stride, p.page_size, p.page_shift, first, seq.len_k - first, chunks, v_chunks, tid);
    }
  };

  // Prologue: Q_i and the first kStages-1 K/V blocks, one commit group each
  // (Q rides in the first), so the wait below counts groups uniformly.
  load_tile<Traits, kBlockM>(smem_q, q, p.q_seq_stride, seq.len_q - row_begin, chunks, tid);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_end - 1 - s >= n_begin) load_kv(n_end - 1 - s, s);
    ptx::cp_async_commit();
  }

  float acc_o[kMTiles][kNTilesO][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][nt][e] = 0.f;
  OnlineSoftmax<kMTiles> softmax;

  const int warp_row = warp * Traits::kWarpRows;
  // Lane roles of the three ldmatrix.x4 patterns (see LdsmAddress):
  //   Q (A operand):    matrices = rows 0-7 / 8-15 x chunks k / k+1
  //   K (B operand):    matrices = chunks k / k+1 x keys 0-7 / 8-15
  //   V (B, .trans):    matrices = keys 0-7 / 8-15 x chunks n / n+1
  const LdsmAddress<Traits, kBlockM> q_addr(smem_q, warp_row + lane % 16, lane / 16);
  const int k_lane_row = lane % 8 + (lane / 16) * 8;
  const int v_lane_row = lane % 8 + ((lane / 8) % 2) * 8;

  auto step = [&](int n_block, int iter, bool is_masked) {
    // Block n_block has landed once at most kStages-2 later groups are pending;
    // the barrier also tells every warp that the stage consumed in the
    // previous iteration is free for the next prefetch.
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    const int n_prefetch = n_block - (kStages - 1);
    if (n_prefetch >= n_begin) load_kv(n_prefetch, (iter + kStages - 1) % kStages);
    ptx::cp_async_commit();

    const uint32_t sk = smem_kv + (iter % kStages) * Traits::kStageBytes;
    const LdsmAddress<Traits, kBlockN> k_addr(sk, k_lane_row, (lane / 8) % 2);
    const LdsmAddress<Traits, kBlockN> v_addr(sk + Traits::kKVBytes, v_lane_row, lane / 16);

    // S = Q_i K_j^T
    float s[kMTiles][kNTilesS][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Traits::kKStepsQK; ++ks) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ptx::ldmatrix_x4(a[mt], q_addr.at(mt * 16, 2 * ks));
      }
#pragma unroll
      for (int np = 0; np < kNTilesS / 2; ++np) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, k_addr.at(np * 16, 2 * ks));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ptx::mma_m16n8k16<Element>(s[mt][2 * np], a[mt], b[0], b[1]);
          ptx::mma_m16n8k16<Element>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }

    mods.apply(
        s, n_block * kBlockN, lane,
        [&](int mt, int hi) { return row_begin + warp_row + mt * 16 + lane / 4 + hi * 8 + diag_offset; },
        [&](int, int) { return alibi_neg; });

    // Only the blocks crossing a window edge or the ragged tail pay for the
    // per-element mask; the branch is uniform across the CTA.
    if (is_masked) {
      const RowRange<kMTiles> ranges = mask.template ranges<kMTiles>(
          [&](int mt, int hi) { return row_begin + warp_row + mt * 16 + lane / 4 + hi * 8; });
      apply_mask<kMasked, false>(s, ranges, n_block * kBlockN, lane);
    }

    float correction[2 * kMTiles];
    softmax.update(s, p.softmax_scale_log2, correction);
    softmax.rescale(acc_o, correction);

    // O += P V_j, with P taken straight from the S accumulators: the m16n8
    // C fragment of two adjacent n8 tiles is the m16k16 A fragment.
#pragma unroll
    for (int ks = 0; ks < Traits::kKStepsPV; ++ks) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        a[mt][0] = ptx::pack2<Element>(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        a[mt][1] = ptx::pack2<Element>(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        a[mt][2] = ptx::pack2<Element>(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        a[mt][3] = ptx::pack2<Element>(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < kNTilesO / 2; ++np) {
        uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, v_addr.at(ks * 16, 2 * np));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ptx::mma_m16n8k16<Element>(acc_o[mt][2 * np], a[mt], b[0], b[1]);
          ptx::mma_m16n8k16<Element>(acc_o[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
  };

  int iter = 0;
  for (int n_block = n_end - 1; n_block >= n_begin; --n_block, ++iter) {
    step(n_block, iter, block_needs_mask(n_block, u_begin, u_end));
  }

  // Epilogue: normalise, round, stage O through the (now free) Q tile so the
  // global stores are whole 16-byte rows, then write the LSE.
  float inv_l[2 * kMTiles];
  float lse[2 * kMTiles];
  softmax.finalize(p.softmax_scale, inv_l, lse);

  ptx::cp_async_wait<0>();
  __syncthreads();
  // Re-derived rather than kept live through the main loop.
  const SeqInfo out(p, batch);
  if (splits > 1) {
    // This split's O (normalised, float32) and LSE at the combine kernel's
    // slots (decode/combine_kernel.cuh): split * rows + (batch * heads_q +
    // head) * seqlen_q + row. A row that sees no key of the split stores
    // O = 0 and LSE = -inf.
    const int64_t first = split * (static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q) +
                          (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int row = row_begin + warp_row + mt * 16 + lane / 4 + hi * 8;
        if (row >= out.len_q) continue;
        float* o_row = p.o_partial + (first + row) * Traits::kHeadDim + (lane % 4) * 2;
#pragma unroll
        for (int nt = 0; nt < kNTilesO; ++nt) {
          *reinterpret_cast<float2*>(o_row + nt * 8) =
              make_float2(acc_o[mt][nt][2 * hi] * inv_l[2 * mt + hi], acc_o[mt][nt][2 * hi + 1] * inv_l[2 * mt + hi]);
        }
        if (lane % 4 == 0) p.lse_partial[first + row] = lse[2 * mt + hi];
      }
    }
    return;
  }
  if (p.sinks != nullptr) {
    const float sink = p.sinks[head];
#pragma unroll
    for (int r = 0; r < 2 * kMTiles; ++r) add_sink(sink, inv_l[r], lse[r]);
  }
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = warp_row + mt * 16 + lane / 4 + hi * 8;
#pragma unroll
      for (int nt = 0; nt < kNTilesO; ++nt) {
        const uint32_t packed = ptx::pack2<Element>(acc_o[mt][nt][2 * hi] * inv_l[2 * mt + hi],
                                                    acc_o[mt][nt][2 * hi + 1] * inv_l[2 * mt + hi]);
        *reinterpret_cast<uint32_t*>(smem + chunk_offset<Traits, kBlockM>(row, nt) + (lane % 4) * 4) = packed;
      }
    }
  }
  __syncthreads();

  Element* o = static_cast<Element*>(p.o) + out.o_offset + head * p.o_head_stride +
               static_cast<int64_t>(row_begin) * p.o_seq_stride;
  constexpr int kStoreIters = kBlockM * Traits::kChunksPerRow / Traits::kNThreads;
#pragma unroll
  for (int i = 0; i < kStoreIters; ++i) {
    const int idx = tid + i * Traits::kNThreads;
    const int row = idx / Traits::kChunksPerRow;
    const int c = idx % Traits::kChunksPerRow;
    if (row_begin + row < out.len_q && c * 8 < p.head_dim_v) {
      *reinterpret_cast<uint4*>(o + row * p.o_seq_stride + c * 8) =
          *reinterpret_cast<const uint4*>(smem + chunk_offset<Traits, kBlockM>(row, c));
    }
  }

  if (p.lse != nullptr && lane % 4 == 0) {
    // Dense: [batch, heads_q, seqlen_q]; varlen: [heads_q, total_q].
    float* lse_row = p.cu_seqlens_q != nullptr
                         ? p.lse + static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + out.q_start
                         : p.lse + (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int row = row_begin + warp_row + mt * 16 + lane / 4 + hi * 8;
        if (row < out.len_q) lse_row[row] = lse[2 * mt + hi];
      }
    }
  }
}

}  // namespace flash::sm80
