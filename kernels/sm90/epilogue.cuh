// The consumers' epilogue of the sm90 kernel: normalise O by the softmax
// sums, round it, and store it with the LSE. O goes through shared memory
// in the swizzled layout of the O tensor map and out with a TMA store,
// which clips the ragged tail; varlen tiles store their own rows with
// 16-byte stores instead (a TMA store would also write the next
// sequence's rows); a tile that sees no key stores zeros from registers.
// Where shared memory has room O is staged in a buffer of its own (at
// head_dim 256 one of half O's width, filled and stored twice), so Q is
// released early (mainloop.cuh); otherwise in Q's, and Q is released once
// the store has read it (docs/perf/sm90-epilogue.md). Split-KV tiles store
// their normalised float32 O and their LSE to the workspace from registers
// (store_partial); the combine kernel merges the splits.
#pragma once

#include <cstdint>

#include "../common/constants.h"
#include "../common/ptx.cuh"
#include "../common/softmax.cuh"
#include "params.h"
#include "ptx_sm90.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"

namespace flash::sm90 {

// kSplit: the split-KV kernel, whose tiles store partial results (store_partial).
// kRereadRowOffset: store_lse reads a varlen tile's first row from
// cu_seqlens_q again instead of keeping tile.q_start live across the key
// loop; set where the mask's bit words need that register (Mainloop::kMaskWords).
template <typename Traits, bool kSplit = false, bool kRereadRowOffset = false>
struct Epilogue {
  using Element = typename Traits::Element;
  using Smem = SmemLayout<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kOCols = Traits::kOCols;
  // Column blocks staged per pass; O goes out in kOPasses passes.
  static constexpr int kStageColBlocks = Traits::kOStageColBlocks;
  static constexpr int kOPasses = Traits::kOPasses;
  using OTile = float[kOCols / 2];

  const FwdParams& params;
  const detail::FwdParams& p;
  const Smem& smem;
  int wg, warp_in_wg, lane, wg_thread;

  __device__ __forceinline__ Epilogue(const FwdParams& params_, const Smem& smem_, int wg_)
      : params(params_),
        p(params_.common),
        smem(smem_),
        wg(wg_),
        warp_in_wg((threadIdx.x / 32) % 4),
        lane(threadIdx.x % 32),
        wg_thread(threadIdx.x % kWarpgroupThreads) {}

  __device__ __forceinline__ int row_in_wg(int hi) const { return warp_in_wg * 16 + lane / 4 + hi * 8; }
  __device__ __forceinline__ void sync_wg() const {
    named_barrier_sync(named_barrier_id(NamedBarrier::kEpilogue, wg), kWarpgroupThreads);
  }

  // 1 / l and the LSE of this thread's two rows. With kRowSumInO, O's
  // columns kHeadDim to kHeadDim + 7 hold each row's whole sum of P as
  // rounded for the GEMM (bf16, or e4m3 in the FP8 prefill), so O is
  // normalised by the very weights its numerator used; the LSE still takes
  // the softmax's float32 sums where the kernel keeps them (a bf16 P is off
  // by up to 2^-9, an e4m3 one by 2^-4), else O's.
  __device__ __forceinline__ static void finalize(const OTile& o, OnlineSoftmax<1>& softmax, float scale,
                                                  float (&inv_l)[2], float (&lse)[2]) {
    if constexpr (Traits::kRowSumInO) {
      const auto& o_frag = *reinterpret_cast<const float(*)[1][kOCols / 8][4]>(&o);
      const float sums[2] = {o_frag[0][kHeadDim / 8][0], o_frag[0][kHeadDim / 8][2]};
      softmax.finalize_sums(sums, scale, inv_l, lse);
      if constexpr (Traits::kLseSums) {
        float unused[2];
        softmax.finalize(scale, unused, lse);
      }
    } else {
      softmax.finalize(scale, inv_l, lse);
    }
    // The probabilities' offset (FP8 prefill) is in l, hence in 1/l, but
    // not in the log-sum-exp.
    if constexpr (Traits::kPOffsetLog2 != 0) {
      lse[0] -= Traits::kPOffsetLog2 * 0.6931471805599453f;
      lse[1] -= Traits::kPOffsetLog2 * 0.6931471805599453f;
    }
  }

  // No key visible to any row (a window, or len_k = 0): zeros, stored from
  // registers (o = 0, inv_l = 0); Q was never loaded, no shared memory is touched.
  __device__ __forceinline__ void store_from_registers(const Tile& tile, const OTile& o, const float (&inv_l)[2]) const {
    const auto& o_frag = *reinterpret_cast<const float(*)[1][kOCols / 8][4]>(&o);
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = tile.row_begin + wg * kWarpgroupRows + row_in_wg(hi);
      if (row < 0 || row >= tile.len_q) continue;
      Element* o_row = static_cast<Element*>(p.o) + tile.o_offset + tile.head * p.o_head_stride +
                       static_cast<int64_t>(row) * p.o_seq_stride;
#pragma unroll
      for (int nt = 0; nt < kHeadDim / 8; ++nt) {
        if (nt * 8 >= p.head_dim_v) break;  // columns past the call's V head dim are never stored
        *reinterpret_cast<uint32_t*>(o_row + nt * 8 + (lane % 4) * 2) =
            ptx::pack2<Element>(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
      }
    }
  }

  // Split-KV: this split's O (normalised, float32) and LSE of each real
  // row, at the combine kernel's slots: row (batch, head, token) of split s
  // is s * batch * heads_q * seqlen_q + (batch * heads_q + head) * seqlen_q
  // + token (seqlen_q the longest sequence for varlen calls). A row that
  // sees no key of its split stores O = 0 and LSE = -inf.
  __device__ __forceinline__ void store_partial(const Tile& tile, int split, const OTile& o, const float (&inv_l)[2],
                                                const float (&lse)[2]) const {
    const auto& o_frag = *reinterpret_cast<const float(*)[1][kOCols / 8][4]>(&o);
    const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
    const int64_t first = split * rows + (static_cast<int64_t>(tile.batch) * p.heads_q + tile.head) * p.seqlen_q;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = tile.row_begin + wg * kWarpgroupRows + row_in_wg(hi);
      if (row < 0 || row >= tile.len_q) continue;
      const int64_t slot = first + row;
      float* o_row = p.o_partial + slot * kHeadDim + (lane % 4) * 2;
#pragma unroll
      for (int nt = 0; nt < kHeadDim / 8; ++nt) {
        *reinterpret_cast<float2*>(o_row + nt * 8) =
            make_float2(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
      }
      if (lane % 4 == 0) p.lse_partial[slot] = lse[hi];
    }
  }

  // Rounded O of column blocks [pass * kStageColBlocks, +kStageColBlocks)
  // into this warpgroup's staging rows, swizzled as the O tensor map expects.
  __device__ __forceinline__ void stage(const OTile& o, const float (&inv_l)[2], int pass) const {
    const auto& o_frag = *reinterpret_cast<const float(*)[1][kOCols / 8][4]>(&o);
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = wg * kWarpgroupRows + row_in_wg(hi);
#pragma unroll
      for (int nt = pass * kStageColBlocks * 8; nt < (pass + 1) * kStageColBlocks * 8; ++nt) {
        if (nt * 8 >= kHeadDim) break;  // head dim 96: the second column block's last half is never stored
        const int cb = nt / 8 - pass * kStageColBlocks;
        const int chunk = (nt % 8) ^ (row % 8);
        const uint32_t packed =
            ptx::pack2<Element>(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
        *reinterpret_cast<uint32_t*>(smem.o_bytes() + cb * kBlockM * kSwizzleBytes + row * kSwizzleBytes +
                                     chunk * 16 + (lane % 4) * 4) = packed;
      }
    }
  }

  // Varlen: 16-byte stores of the rows this sequence has (the columns of `pass`).
  __device__ __forceinline__ void store_rows(const Tile& tile, int pass) const {
    constexpr int kChunks = kStageColBlocks * 8;
    Element* o_base =
        static_cast<Element*>(p.o) + tile.o_offset + tile.head * p.o_head_stride + pass * kStageColBlocks * 64;
    for (int idx = wg_thread; idx < kWarpgroupRows * kChunks; idx += kWarpgroupThreads) {
      const int r = idx / kChunks;
      const int c = idx % kChunks;
      const int row = tile.row_begin + wg * kWarpgroupRows + r;
      if (row < 0 || row >= tile.len_q || (pass * kChunks + c) * 8 >= p.head_dim_v) continue;
      const uint4 val = *reinterpret_cast<const uint4*>(smem.o_bytes() + (c / 8) * kBlockM * kSwizzleBytes +
                                                        (wg * kWarpgroupRows + r) * kSwizzleBytes +
                                                        ((c % 8) ^ (r % 8)) * 16);
      *reinterpret_cast<uint4*>(o_base + static_cast<int64_t>(row) * p.o_seq_stride + c * 8) = val;
    }
  }

  // One thread issues the warpgroup's TMA store. A masked call's block 0
  // may start at a negative row (first_row): then a warpgroup's 64 rows are
  // either all there or all padding, and padding is never stored.
  __device__ __forceinline__ void store_tma(const Tile& tile, int pass) const {
    if (wg_thread == 0 && tile.row_begin + wg * kWarpgroupRows >= 0) {
      const uint32_t src = smem.o() + wg * kWarpgroupRows * kSwizzleBytes;
#pragma unroll
      for (int cb = 0; cb < kStageColBlocks; ++cb) {
        const int col = (pass * kStageColBlocks + cb) * kSwizzleColumns;
        if (col >= p.head_dim_v) break;  // wholly past the call's V head dim
        tma_store_4d(&params.tma_o, src + cb * kBlockM * kSwizzleBytes, col, tile.row_begin + wg * kWarpgroupRows,
                     tile.head, tile.batch);
      }
      tma_store_commit();
    }
  }

  // A varlen tile's first row in packed Q/O (tile.q_start).
  __device__ __forceinline__ int varlen_q_start(const Tile& tile) const {
    if constexpr (kRereadRowOffset) {
      return p.cu_seqlens_q[tile.batch];
    } else {
      return tile.q_start;
    }
  }

  // The sink of the tile's head where the call has sinks and is not split
  // (a split call's combine adds it), else 0. Read when the tile starts,
  // so its load is not on the epilogue's path at the tile's end.
  __device__ __forceinline__ float sink_of(const Tile& tile) const {
    return !kSplit && p.sinks != nullptr ? p.sinks[tile.head] : 0.f;
  }

  // Dense: [batch, heads_q, seqlen_q]; varlen: [heads_q, total_q].
  __device__ __forceinline__ void store_lse(const Tile& tile, const float (&lse)[2]) const {
    if (p.lse == nullptr || lane % 4 != 0) return;
    float* lse_row = p.cu_seqlens_q != nullptr
                         ? p.lse + static_cast<int64_t>(tile.head) * p.cu_seqlens_q[p.batch] + varlen_q_start(tile)
                         : p.lse + (static_cast<int64_t>(tile.batch) * p.heads_q + tile.head) * p.seqlen_q;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = tile.row_begin + wg * kWarpgroupRows + row_in_wg(hi);
      if (row >= 0 && row < tile.len_q) lse_row[row] = lse[hi];
    }
  }

  // `split`: the tile's key range of a split-KV call (else unused).
  // `o_scale` multiplies the stored O (an fp8 cache's V descale), not the
  // LSE; `score_scale` the softmax's scale for the LSE (the FP8 prefill's
  // q and k descales, left out of the scores); `sink` the tile's head's
  // sink (read when p.sinks is set; sink_of).
  __device__ __forceinline__ void store(const Tile& tile, int split, const OTile& o, OnlineSoftmax<1>& softmax,
                                        float o_scale, float score_scale, float sink) const {
    float inv_l[2];
    float lse[2];
    finalize(o, softmax, p.softmax_scale * score_scale, inv_l, lse);
    if (!kSplit && p.sinks != nullptr) {
      add_sink(sink, inv_l[0], lse[0]);
      add_sink(sink, inv_l[1], lse[1]);
    }
    inv_l[0] *= o_scale;
    inv_l[1] *= o_scale;
    if constexpr (kSplit) {
      store_partial(tile, split, o, inv_l, lse);
      if constexpr (!Traits::kSeparateO) {
        // Q waits for the epilogue to release it (mainloop.cuh); nothing is staged in it here.
        if (tile.n_blocks > 0) {
          sync_wg();
          consumer_release(smem, Barrier::kQEmpty, 0, lane);
        }
      }
      return;
    }
    if (tile.n_blocks == 0) {
      store_from_registers(tile, o, inv_l);
    } else {
#pragma unroll
      for (int pass = 0; pass < kOPasses; ++pass) {
        if constexpr (Traits::kSeparateO) {
          // This warpgroup's previous store (the last tile's, or this
          // tile's previous pass) must be done reading its staging rows.
          if (wg_thread == 0) tma_store_wait_read();
          sync_wg();
        }
        stage(o, inv_l, pass);
        if (p.cu_seqlens_q != nullptr) {
          sync_wg();
          store_rows(tile, pass);
        } else {
          fence_proxy_async_smem();  // generic-proxy stores, read by the TMA store
          sync_wg();
          store_tma(tile, pass);
        }
      }
      if constexpr (!Traits::kSeparateO) {
        // O was staged in the Q tile: hand Q back only once the store has read it.
        if (wg_thread == 0) tma_store_wait_read();
        sync_wg();
        consumer_release(smem, Barrier::kQEmpty, 0, lane);
      }
    }
    store_lse(tile, lse);
  }

  // Outstanding TMA stores must finish before the CTA's shared memory goes away.
  __device__ __forceinline__ void drain() const {
    if (wg_thread == 0) tma_store_wait_all();
  }
};

}  // namespace flash::sm90
