// The producer of the sm90 kernel: one thread of warpgroup 0 loads each
// tile's Q_i and streams its K_j / V_j blocks, last visible block first,
// through the kStages-deep rings with TMA, each load completing on its
// stage's "full" mbarrier. The rings run on across tiles, so the next
// tile's first blocks load while this one finishes.
//
// KV-cache calls (seqused_k or a paged cache; CacheProducer) use up to four
// warps, each loading K's and V's boxes of some of a block's column blocks:
// under a paged cache lane i looks up box i of each block
// (paged_box_rows(page_size, kBlockN) rows inside one page), so a block's
// page lookups are one warp-wide load per warp, not a chain of them. Paged
// caches that gathers_pages (tma_limits.h) picks are copied row by row with
// cp.async by the whole warpgroup instead (GatherProducer). An fp8 (e4m3)
// cache is copied by the whole warpgroup too and widened in shared memory
// (ConvertProducer).
#pragma once

#include <utility>

#include "../common/constants.h"
#include "../common/fp8.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "fp8_vt.h"
#include "params.h"
#include "ptx_sm90.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"

namespace flash::sm90 {

template <typename Traits>
struct Producer {
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kCWG = Traits::kConsumerWarpgroups;
  using Smem = SmemLayout<Traits>;

  // Q in one 64-row box per consumer warpgroup. A masked call's block 0 may
  // start at a negative row (first_row), with whole warpgroups of padding
  // rows: those are not loaded (their rows compute on whatever the buffer
  // holds and are never stored), so no TMA copy starts at a negative row.
  __device__ __forceinline__ static void load_q(const FwdParams& params, const Smem& smem, const Tile& tile) {
    const int slices_skipped = tile.row_begin < 0 ? -tile.row_begin / kWarpgroupRows : 0;
    mbarrier_arrive_expect_tx(smem.bar(Barrier::kQFull), Traits::kQBytes / kCWG * (kCWG - slices_skipped));
#pragma unroll
    for (int cb = 0; cb < Traits::kInColBlocks; ++cb) {
#pragma unroll
      for (int slice = 0; slice < kCWG; ++slice) {
        if (slice < slices_skipped) continue;
        tma_load_4d(smem.q() + cb * kBlockM * kSwizzleBytes + slice * kWarpgroupRows * kSwizzleBytes, &params.tma_q,
                    smem.bar(Barrier::kQFull), cb * Traits::kInColumns, tile.q_row + slice * kWarpgroupRows,
                    tile.head, tile.q_batch);
      }
    }
  }

  // One K or V block into `dst` once the consumers have released the stage
  // (the FP8 prefill's V^T: load_vt).
  __device__ __forceinline__ static void load_kv(const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty,
                                                 uint32_t empty_parity, int row, int head_kv, int batch) {
    mbarrier_wait(empty, empty_parity);
    mbarrier_arrive_expect_tx(full, Traits::kKBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kInColBlocks; ++cb) {
      tma_load_4d(dst + cb * kBlockN * kSwizzleBytes, map, full, cb * Traits::kInColumns, row, head_kv, batch);
    }
  }

  // The FP8 prefill (Traits::kFp8In): V^T's block of keys [col, col +
  // kBlockN), Traits::kVtBoxes boxes of head_dim rows of kVtBoxCols keys;
  // tma_v describes V^T as (columns, head dim rows, heads_kv, 1).
  __device__ __forceinline__ static void load_vt(const FwdParams& params, uint32_t dst, uint32_t full, uint32_t empty,
                                                 uint32_t empty_parity, int col, int head_kv) {
    mbarrier_wait(empty, empty_parity);
    mbarrier_arrive_expect_tx(full, Traits::kVtBytes);
#pragma unroll
    for (int b = 0; b < Traits::kVtBoxes; ++b) {
      tma_load_4d(dst + b * Traits::kVtRows * Traits::kVtBoxCols, &params.tma_v, full, col + b * Traits::kVtBoxCols,
                  0, head_kv, 0);
    }
  }

  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem,
                                             int num_units) {
    const detail::FwdParams& p = params.common;
    prefetch_tensormap(&params.tma_q);
    prefetch_tensormap(&params.tma_k);
    prefetch_tensormap(&params.tma_v);
    int kv_count = 0;
    int q_count = 0;
    int slot = 0;
    for (int u = blockIdx.x; u < num_units; u += gridDim.x, ++slot) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p, slot);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        // The FP8 prefill's V^T: the sequence's first column (fp8_vt.h).
        int vt_col = 0;
        if constexpr (Traits::kFp8In) {
          const int64_t first_key =
              p.cu_seqlens_k != nullptr ? tile.k_row : static_cast<int64_t>(tile.batch) * p.seqlen_k;
          vt_col = static_cast<int>(fp8_vt_start(first_key, tile.batch));
        }
        // The consumers must be done with the previous tile's Q.
        mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
        ++q_count;
        load_q(params, smem, tile);
        // Unrolled twice, as the loads were before this file split them out:
        // left to itself the compiler unrolls hd256's loop four times.
#pragma unroll 2
        for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
          const int block = tile.n_first + tile.n_blocks - 1 - i;
          const int row = tile.k_row + block * kBlockN;
          const int stage = Smem::stage_of(kv_count);
          // Parity of the stage's previous use; a stage's first use passes at once.
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          load_kv(&params.tma_k, smem.k(stage), smem.bar(Barrier::kKFull, stage), smem.bar(Barrier::kKEmpty, stage),
                  empty_parity, row, head_kv, tile.k_batch);
          if constexpr (Traits::kFp8In) {
            load_vt(params, smem.v(stage), smem.bar(Barrier::kVFull, stage), smem.bar(Barrier::kVEmpty, stage),
                    empty_parity, vt_col + block * kBlockN, head_kv);
          } else {
            load_kv(&params.tma_v, smem.v(stage), smem.bar(Barrier::kVFull, stage),
                    smem.bar(Barrier::kVEmpty, stage), empty_parity, row, head_kv, tile.k_batch);
          }
        }
      }
    }
  }
};

// The KV-cache producer: the four warps of warpgroup 0, those with no box
// in the call returning at once (run() says which). Each warp loads
// K's and then V's boxes of some of a block's column blocks: warp w takes
// column block w with four or more of them (head dim 256), else two warps
// share a column block (head dims 96 and 128) or all four the only one (64),
// alternating boxes; head dim 192's three column blocks go to warps 0-2.
// Each box is a TMA issue from one lane, and one warp's issues run one
// after another (each lane's coordinates go to uniform registers in turn),
// so one warp issuing a block's 32 boxes (head dim 256, 16-key pages) is
// slower than the consumers (docs/perf/sm90-kv-cache.md). Each warp waits
// on the stage's "empty" barriers itself; warp 0 posts the byte counts, and
// boxes from other warps may land first (an mbarrier's tx-count may go
// below zero; the phase cannot complete before the count is posted, which
// is also its one arrival). A dense cache with seqused_k loads as a dense
// call does: the rows past a sequence's keys are in the allocation. A
// paged cache's block is kBlockN / box boxes, box i from lane i; a box past
// the sequence's last key loads that key's page again (any page the table
// names will do): the consumers mask those keys and zero those V rows
// (Mainloop::zero_v_tail).
template <typename Traits>
struct CacheProducer {
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kWarps = 4;
  static constexpr int kColBlocks = Traits::kColBlocks;
  // Warps sharing a column block, each issuing every kShare-th box.
  static constexpr int kShare = kColBlocks >= kWarps ? 1 : kWarps / kColBlocks;
  using Smem = SmemLayout<Traits>;
  static_assert(kBlockN / 8 <= 32, "a paged block's boxes (8 rows at least) must fit one per lane");

  __device__ __forceinline__ static bool owns(int warp, int cb) {
    return kShare == 1 ? cb % kWarps == warp : warp / kShare == cb;
  }

  // This warp's column blocks of one K or V block into `dst` once the
  // consumers have released the stage. `issue`: whether this lane has a
  // box of the block (before the warps' sharing of boxes).
  __device__ __forceinline__ static void load(const FwdParams& params, const CUtensorMap* map, uint32_t dst,
                                              uint32_t full, uint32_t empty, uint32_t empty_parity, int row,
                                              int head_kv, int batch, bool issue, int warp, int lane) {
    mbarrier_wait(empty, empty_parity);
    if (warp == 0 && lane == 0) mbarrier_arrive_expect_tx(full, Traits::kKVBytes);
    __syncwarp();
    if (!issue || lane % kShare != warp % kShare) return;
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb) {
      if (!owns(warp, cb)) continue;
      // Box i (lane i) of a paged block lands at row i * kv_box_rows.
      tma_load_4d(dst + (cb * kBlockN + lane * params.kv_box_rows) * kSwizzleBytes, map, full,
                  cb * kSwizzleColumns, row, head_kv, batch);
    }
  }

  // The unit count is read again where needed, not kept in a register.
  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem) {
    const detail::FwdParams& p = params.common;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    // A warp with no box to issue in this call (one box a column block, as
    // with seqused_k or pages of a multiple of kBlockN keys, leaves warps
    // idle; head dim 192 leaves warp 3 idle) returns now: nothing would keep
    // it within a phase of the "empty" barriers it polls, and a wait on a
    // parity two phases old never returns. Warp 0 always has box 0 of
    // column block 0.
    bool owns_any = false;
#pragma unroll
    for (int cb = 0; cb < kColBlocks; ++cb) owns_any |= owns(warp, cb);
    const bool has_box = (p.block_table != nullptr ? lane * params.kv_box_rows < kBlockN : lane == 0) &&
                         lane % kShare == warp % kShare;
    if (!owns_any || !__any_sync(0xffffffffu, has_box)) return;
    if (threadIdx.x == 0) {
      prefetch_tensormap(&params.tma_q);
      prefetch_tensormap(&params.tma_k);
      prefetch_tensormap(&params.tma_v);
    }
    // Read from the parameters where used (constant memory): the producer
    // warps run on few registers.
    int kv_count = 0;
    int q_count = 0;
    for (int u = blockIdx.x; u < scheduler.num_units(p); u += gridDim.x) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        if (threadIdx.x == 0) {
          mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
          Producer<Traits>::load_q(params, smem, tile);
        }
        ++q_count;
        // Paged: lane i's box of block i of the walk (last block first);
        // its page is looked up a block ahead, under the waits of the one
        // before. Little but the TMA issues may sit between one block's V
        // and the next block's K (two stages at head dim 256 leave the
        // consumers waiting on K for any delay there): power-of-two pages
        // take shifts, not divisions (page_of_key).
        const bool paged = p.block_table != nullptr;
        const bool box_lane = lane * params.kv_box_rows < kBlockN;
        auto key_of = [&](int i) { return (tile.n_first + tile.n_blocks - 1 - i) * kBlockN + lane * params.kv_box_rows; };
        auto page_of = [&](int i) {
          const int known = min(key_of(i), tile.len_k - 1);
          return __ldg(p.block_table + static_cast<int64_t>(tile.batch) * p.block_table_batch_stride +
                       page_of_key(known, p.page_size, p.page_shift));
        };
        int next_page = paged && box_lane ? page_of(0) : 0;
        for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
          const int block = tile.n_first + tile.n_blocks - 1 - i;
          int row = tile.k_row + block * kBlockN;
          int batch = tile.k_batch;
          bool issue = lane == 0;
          if (paged) {
            batch = next_page;
            if (box_lane && i + 1 < tile.n_blocks) next_page = page_of(i + 1);
            const int key = key_of(i);
            issue = box_lane;
            row = key < tile.len_k ? key - page_of_key(key, p.page_size, p.page_shift) * p.page_size : 0;
          }
          const int stage = Smem::stage_of(kv_count);
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          load(params, &params.tma_k, smem.k(stage), smem.bar(Barrier::kKFull, stage),
               smem.bar(Barrier::kKEmpty, stage), empty_parity, row, head_kv, batch, issue, warp, lane);
          load(params, &params.tma_v, smem.v(stage), smem.bar(Barrier::kVFull, stage),
               smem.bar(Barrier::kVEmpty, stage), empty_parity, row, head_kv, batch, issue, warp, lane);
        }
      }
    }
  }
};

// The gathering KV-cache producer, for pages TMA cannot box (a page_size
// that is not a multiple of 8, 1 included) or boxes badly (8- and 16-row
// boxes at head dim 256; gathers_pages, tma_limits.h): all four warps of warpgroup 0
// copy each K/V block with cp.async, 16 bytes a lane, into the layout TMA's
// 128-byte swizzle would have written. Warp w owns rows [w R, w R + R) of a
// block (R = kBlockN / 4). Lane l looks up row w R + l's page a block ahead
// and turns it into the row's byte offsets in K and V; each step, eight
// lanes copy one row (a 16-byte chunk of each 128-byte column block each),
// four rows a warp, the offsets passed by shuffle. Rows past the sequence's
// keys and columns past the call's width are zero-filled (source size 0),
// so the consumers need not zero V. Those checks cost the producer more
// issue slots than the copies themselves (a block's copies then outlast
// its GEMMs), so every block of a tile but its last, in a call of whole
// 64-column blocks, takes a copy path without them (copy_full_block).
// Each thread's cp.async.mbarrier.arrive
// completes the stage's "full" barrier, initialised to 128 arrivals
// (fwd_kernel); the consumers fence the async proxy before wgmma reads the
// stage (Mainloop::wait_kv).
template <typename Traits>
struct GatherProducer {
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kRowsPerWarp = kBlockN / 4;
  static constexpr int kBytes = 2;  // bytes per element
  using Smem = SmemLayout<Traits>;
  static_assert(kBlockN % 16 == 0 && kRowsPerWarp <= 32, "a warp's rows are looked up one per lane, four per step");

  // Lane l's row of its warp's share of a block, as looked up: its page (-1
  // past the sequence's keys, or for lanes without a row) and its row in that page.
  struct RowRef {
    int page, in_page;
  };
  // The same row's byte offsets from K's and V's head base (-1: zero-fill).
  struct RowOffsets {
    int64_t k, v;
  };

  __device__ __forceinline__ static RowRef lookup(const detail::FwdParams& p, const Tile& tile, int block, int warp,
                                                  int lane) {
    const int key = block * kBlockN + warp * kRowsPerWarp + lane;
    if (lane >= kRowsPerWarp || key >= tile.len_k) return RowRef{-1, 0};
    const int index = page_of_key(key, p.page_size, p.page_shift);
    const int page = __ldg(p.block_table + static_cast<int64_t>(tile.batch) * p.block_table_batch_stride + index);
    return RowRef{page, key - index * p.page_size};
  }

  __device__ __forceinline__ static RowOffsets offsets(const detail::FwdParams& p, RowRef r) {
    if (r.page < 0) return RowOffsets{-1, -1};
    return RowOffsets{(r.page * p.k_batch_stride + r.in_page * p.k_seq_stride) * kBytes,
                      (r.page * p.v_batch_stride + r.in_page * p.v_seq_stride) * kBytes};
  }

  // One K or V block into `dst`: `base` is the tensor's head base, `offset`
  // lane l's row offset (RowOffsets), bit cb of `cols` whether this lane's
  // chunk of column block cb lies inside the call's width.
  __device__ __forceinline__ static void copy_block(const unsigned char* base, int64_t offset, uint32_t cols,
                                                    uint32_t dst, int warp, int lane) {
    const int chunk = lane % 8;
    const int first_row = warp * kRowsPerWarp + lane / 8;
    // Row first_row + 4 step: the swizzle's row term alternates with the step's parity.
    const uint32_t row_dst = dst + first_row * kSwizzleBytes;
    const uint32_t swizzle[2] = {static_cast<uint32_t>((chunk ^ (first_row % 8)) * 16),
                                 static_cast<uint32_t>((chunk ^ ((first_row + 4) % 8)) * 16)};
#pragma unroll 2
    for (int step = 0; step < kRowsPerWarp / 4; ++step) {
      const int64_t row_offset = __shfl_sync(0xffffffffu, offset, 4 * step + lane / 8);
      const unsigned char* src = base + row_offset + chunk * 16;
      const uint32_t row = row_dst + step * 4 * kSwizzleBytes + swizzle[step % 2];
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
        const bool valid = row_offset >= 0 && (cols >> cb & 1u);
        ptx::cp_async_16(row + cb * kBlockN * kSwizzleBytes, valid ? src + cb * kSwizzleBytes : base, valid);
      }
    }
  }

  // copy_block for a block whose rows are all keys of the sequence, in a
  // call whose rows are whole column blocks wide: no row or column checks,
  // so a copy costs its share of one shuffled offset and a 64-bit add.
  __device__ __forceinline__ static void copy_full_block(const unsigned char* base, int64_t offset, uint32_t dst,
                                                         int warp, int lane) {
    const int chunk = lane % 8;
    const int first_row = warp * kRowsPerWarp + lane / 8;
    const unsigned char* src = base + chunk * 16;
    const uint32_t row_dst = dst + first_row * kSwizzleBytes;
    const uint32_t swizzle[2] = {static_cast<uint32_t>((chunk ^ (first_row % 8)) * 16),
                                 static_cast<uint32_t>((chunk ^ ((first_row + 4) % 8)) * 16)};
#pragma unroll
    for (int step = 0; step < kRowsPerWarp / 4; ++step) {
      const int64_t row_offset = __shfl_sync(0xffffffffu, offset, 4 * step + lane / 8);
      const unsigned char* row_src = src + row_offset;
      const uint32_t row = row_dst + step * 4 * kSwizzleBytes + swizzle[step % 2];
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
        ptx::cp_async_16(row + cb * kBlockN * kSwizzleBytes, row_src + cb * kSwizzleBytes);
      }
    }
  }

  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem) {
    const detail::FwdParams& p = params.common;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (threadIdx.x == 0) prefetch_tensormap(&params.tma_q);
    // Rows of whole column blocks (no column past the call's width): the
    // blocks below the tile's last take copy_full_block.
    const bool whole_rows = p.head_dim == Traits::kColBlocks * kSwizzleColumns &&
                            p.head_dim_v == Traits::kColBlocks * kSwizzleColumns;
    uint32_t k_cols = 0, v_cols = 0;
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      const int col = cb * kSwizzleColumns + lane % 8 * 8;
      k_cols |= static_cast<uint32_t>(col < p.head_dim) << cb;
      v_cols |= static_cast<uint32_t>(col < p.head_dim_v) << cb;
    }
    int kv_count = 0;
    int q_count = 0;
    for (int u = blockIdx.x; u < scheduler.num_units(p); u += gridDim.x) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        if (threadIdx.x == 0) {
          mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
          Producer<Traits>::load_q(params, smem, tile);
        }
        ++q_count;
        const unsigned char* k_base = static_cast<const unsigned char*>(p.k) + head_kv * p.k_head_stride * kBytes;
        const unsigned char* v_base = static_cast<const unsigned char*>(p.v) + head_kv * p.v_head_stride * kBytes;
        // Block i's page, loaded while block i - 1 is copied.
        RowRef next = lookup(p, tile, tile.n_first + tile.n_blocks - 1, warp, lane);
        for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
          const RowOffsets off = offsets(p, next);
          if (i + 1 < tile.n_blocks) next = lookup(p, tile, tile.n_first + tile.n_blocks - 2 - i, warp, lane);
          const int stage = Smem::stage_of(kv_count);
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          // Blocks run from the tile's last: only the first can hold rows past the keys.
          const bool full = whole_rows && (tile.n_first + tile.n_blocks - i) * kBlockN <= tile.len_k;
          mbarrier_wait(smem.bar(Barrier::kKEmpty, stage), empty_parity);
          if (full) {
            copy_full_block(k_base, off.k, smem.k(stage), warp, lane);
          } else {
            copy_block(k_base, off.k, k_cols, smem.k(stage), warp, lane);
          }
          cp_async_mbarrier_arrive(smem.bar(Barrier::kKFull, stage));
          mbarrier_wait(smem.bar(Barrier::kVEmpty, stage), empty_parity);
          if (full) {
            copy_full_block(v_base, off.v, smem.v(stage), warp, lane);
          } else {
            copy_block(v_base, off.v, v_cols, smem.v(stage), warp, lane);
          }
          cp_async_mbarrier_arrive(smem.bar(Barrier::kVFull, stage));
        }
      }
    }
    // Nothing left in flight when the thread exits.
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
  }
};

// The fp8 KV-cache producer (kv_dtype e4m3; any cache layout: dense,
// varlen, seqused_k, paged with any page size). The four warps of
// warpgroup 0 copy a block's e4m3 rows with cp.async, 16 bytes (16
// elements) a copy, into the upper half of the block's stage, then widen
// them in place in the layout TMA's 128-byte swizzle would have written,
// exactly: V to fp16 whatever Element is (one hardware conversion a pair,
// fp8::f16_pair; P V runs on fp16, Mainloop::PVElement), and K, at head
// dims 64 and 192, to Traits::Fp8QKElement (fp16 at 64, where Q K^T runs on
// fp16), and for fp16 calls at 128 and 256 too. For bf16 at head dims
// 128 and 256 (kFp8CacheQkE4m3) K stays e4m3 where its
// copies put it: the upper half's line of key row j and column block
// u + kColBlocks / 2 holds, in its 16-byte chunks 4a + 2h + b (before the
// swizzle), the key's columns 64 (u + h kColBlocks / 2) + 16 (2a + b), 16
// each: an e4m3 tile of kColBlocks / 2 column blocks in the 128-byte
// swizzle, its columns in that order; Q K^T reads it as it is
// (Mainloop::kQkE4m3 lays Q out in the same order).
//
// The widened block is kLines 128-byte lines (line = column block * kBlockN
// + key row); a 16-byte e4m3 chunk widens to one 32-byte item, two 16-byte
// slots of one line. Item pairs: lower-half item (line L, pair p) goes
// with upper-half item (L + kHalfLines, p), and one thread copies both
// their e4m3 chunks into the upper line (Pair: chunks 2a and 2a + 1 of a
// key row, one 32-byte sector, side by side), waits for its own copies
// (wait_group), reads them, meets its warp (the other threads' chunks
// sit in its items' slots) and writes both items. Each thread then
// arrives on the stage's "full" barrier (initialised to 128
// arrivals); the consumers fence the async proxy after their wait
// (Mainloop::wait_kv; at head dim 128 and up once for a K and a V block,
// Mainloop::kFenceAhead). Rows past the sequence's keys and columns past the
// call's width are zero-filled by the copies, so the consumers need not
// zero V. The descales are applied by the consumers (scores and O).
template <typename Traits>
struct ConvertProducer {
  using Smem = SmemLayout<Traits>;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kLines = kHeadDim / 64 * kBlockN;  // 128-byte lines of a widened block
  static constexpr int kHalfLines = kLines / 2;
  static constexpr int kPairs = kHalfLines * 4;
  static constexpr int kPairsPerThread = (kPairs + kWarpgroupThreads - 1) / kWarpgroupThreads;
  // Both items of a pair on one key row (an even number of column blocks).
  static constexpr bool kSameRow = kHalfLines % kBlockN == 0;
  // Pairs whose chunks are read before any is written (registers: 8 a
  // pair). One: with two, the producer's 72 registers no longer hold the
  // widening's offsets across the block loop (docs/perf/fp8-prefill.md,
  // "Sectors split by the copies").
  static constexpr int kBatch = 1;
  static_assert(kHeadDim % 64 == 0 && kLines % 2 == 0, "whole column blocks, an even number of lines");
  static_assert(kHalfLines * kSwizzleBytes == Traits::kKVBytes / 2, "the e4m3 block fills the upper half");
  static_assert(kBlockN % 8 == 0, "the swizzle's row phase is the line's");

  // Thread t's pair i: lower line t / 4 + 32 i, pair index t % 4, so a
  // quarter warp's 16-byte accesses fall in eight distinct slots of two
  // lines. kHalfLines and kBlockN being multiples of 8, every line of the
  // thread has the swizzle phase (t / 4) % 8, and its slots are two
  // per-thread offsets plus constants.
  //
  // The e4m3 chunks in the upper line: the lower item's chunk p in slot
  // 4 (p / 2) + p % 2, the upper item's in 4 (p / 2) + 2 + p % 2 (before
  // the swizzle). So the two chunks of each 32-byte sector of a key row
  // land in one aligned pair of slots, and a warp's copy asks L2 for whole
  // sectors (docs/perf/fp8-prefill.md, "Sectors split by the copies").
  struct Pair {
    int line, p, slot0;  // lower line of pair 0; offset of its item's first slot (the second: slot0 ^ 16)
    int chunk0, chunk1;         // offsets of the lower and upper items' e4m3 chunks in the upper line
    __device__ __forceinline__ Pair() : Pair(threadIdx.x % kWarpgroupThreads) {}
    __device__ __forceinline__ explicit Pair(int t) {
      line = t / 4;
      p = t % 4;
      slot0 = line * kSwizzleBytes + ((2 * p) ^ (line % 8)) * 16;
      chunk0 = line * kSwizzleBytes + ((4 * (p / 2) + p % 2) ^ (line % 8)) * 16;
      chunk1 = line * kSwizzleBytes + ((4 * (p / 2) + 2 + p % 2) ^ (line % 8)) * 16;
    }
    static constexpr int kLineStep = kWarpgroupThreads / 4;  // lines between a thread's pairs
    __device__ __forceinline__ bool valid(int i) const {
      return kHalfLines % kLineStep == 0 || line + i * kLineStep < kHalfLines;
    }
    __device__ __forceinline__ int lo(int i) const { return line + i * kLineStep; }
    __device__ __forceinline__ int up(int i) const { return lo(i) + kHalfLines; }
    // Offset of the lower (h = 0) or upper (h = 1) item's e4m3 chunk in the block.
    __device__ __forceinline__ int up_chunk(int i, int h) const {
      return (h == 0 ? chunk0 : chunk1) + (i * kLineStep + kHalfLines) * kSwizzleBytes;
    }
    // The e4m3 chunk of `l`'s item: its byte column in its key row, and the row.
    __device__ __forceinline__ int column(int l) const { return (l / kBlockN * 4 + p) * 16; }
    __device__ __forceinline__ static int row(int l) { return l % kBlockN; }
  };
  static_assert(kHalfLines % 8 == 0, "the upper half's lines keep the lower ones' swizzle phase");

  // A key row as looked up: its byte offset from K's or V's head base is
  // a * batch_stride + b * seq_stride (page and row in it, or batch and
  // row); a < 0 past the sequence's keys.
  struct RowRef {
    int a, b;
  };
  // The key rows a warp's copies of a block need: slot s (x = s % 8, pair
  // i = s / 8 % kPairsPerThread) is the row of line 8 w + x + 32 i, the
  // lower line of lane 4 x's pair i, or (s >= 8 kPairsPerThread) of that
  // pair's upper line. Lane l looks up slots l, l + 32, ...
  static constexpr int kSlotsPerWarp = 8 * kPairsPerThread * (kSameRow ? 1 : 2);
  static constexpr int kLookups = (kSlotsPerWarp + 31) / 32;
  struct Lookups {
    RowRef r[kLookups];
  };

  // The rows of `block` this lane looks up; their pages are loaded here, a
  // step before the copies that shuffle them out.
  __device__ __forceinline__ static Lookups lookup(const detail::FwdParams& p, const Tile& tile, int block) {
    const int warp = threadIdx.x % kWarpgroupThreads / 32;
    const int lane = threadIdx.x % 32;
    Lookups out;
#pragma unroll
    for (int k = 0; k < kLookups; ++k) {
      const int s = lane + 32 * k;
      const int line = 8 * warp + s % 8 + Pair::kLineStep * (s / 8 % kPairsPerThread) +
                       (s >= 8 * kPairsPerThread ? kHalfLines : 0);
      const int key = block * kBlockN + Pair::row(line);
      if ((kSlotsPerWarp % 32 != 0 && s >= kSlotsPerWarp) || key >= tile.len_k) {
        out.r[k] = RowRef{-1, 0};
      } else if (p.block_table != nullptr) {
        const int index = page_of_key(key, p.page_size, p.page_shift);
        const int page =
            __ldg(p.block_table + static_cast<int64_t>(tile.batch) * p.block_table_batch_stride + index);
        out.r[k] = RowRef{page, key - index * p.page_size};
      } else {
        out.r[k] = RowRef{tile.k_batch, tile.k_row + key};
      }
    }
    return out;
  }

  // A looked-up row's byte offset from K's or V's head base (-1: none).
  __device__ __forceinline__ static int64_t row_offset(const RowRef& r, int64_t batch_stride, int64_t seq_stride) {
    return r.a < 0 ? int64_t{-1} : r.a * batch_stride + r.b * seq_stride;
  }
  __device__ __forceinline__ static int64_t shuffle_offset(int64_t held, int src_lane) {
    return __shfl_sync(0xffffffffu, held, src_lane);
  }

  // A thread's copies of a block go to the same slots and byte columns
  // every block; only the rows change. Left to itself the compiler hoists
  // each copy's source address (base plus column, 64 bits) out of the block
  // loop, and the producer spills them. So with kBlockN and kHalfLines
  // multiples of 32 (a thread's lines are its first, below 32, plus
  // multiples of 32, so each stays in a compile-time column block) the
  // column is 16 p plus a constant and the slot the thread's plus a
  // constant, and both constants ride in the instruction (cp_async_16_at):
  // two address registers for all the copies. Otherwise the pair geometry
  // is rebuilt from an opaque copy of the thread index in every call and
  // each source offset passes through an empty asm, so nothing per copy is
  // held across blocks.
  static constexpr bool kConstColumns = kBlockN % Pair::kLineStep == 0 && kHalfLines % Pair::kLineStep == 0;
  __host__ __device__ static constexpr int lo_column(int i) { return Pair::kLineStep * i / kBlockN * 64; }
  __host__ __device__ static constexpr int up_column(int i) {
    return (Pair::kLineStep * i + kHalfLines) / kBlockN * 64;
  }
  __host__ __device__ static constexpr int up_slot_step(int i) {
    return (Pair::kLineStep * i + kHalfLines) * kSwizzleBytes;
  }

  // Pair i's two copies (kConstColumns): base_p = base + 16 p, width_p =
  // width - 16 p, dst_lo / dst_up = the stage plus the thread's chunk0 /
  // chunk1.
  template <int i>
  __device__ __forceinline__ static void copy_pair_at(const int64_t (&held)[kLookups], int x,
                                                      const unsigned char* base_p, int width_p, uint32_t dst_lo,
                                                      uint32_t dst_up) {
    constexpr int kUpper = kSameRow ? 0 : kPairsPerThread;
    const int64_t lo_row = shuffle_offset(held[i / 4], x + 8 * (i % 4));
    const int64_t up_row = kSameRow ? lo_row : shuffle_offset(held[(i + kUpper) / 4], x + 8 * ((i + kUpper) % 4));
    const bool lo_valid = lo_row >= 0 && lo_column(i) < width_p;
    const bool up_valid = up_row >= 0 && up_column(i) < width_p;
    ptx::cp_async_16_at<up_slot_step(i), lo_column(i)>(dst_lo, base_p + (lo_valid ? lo_row : 0), lo_valid);
    ptx::cp_async_16_at<up_slot_step(i), up_column(i)>(dst_up, base_p + (up_valid ? up_row : 0), up_valid);
  }
  template <int... kI>
  __device__ __forceinline__ static void copy_pairs_at(const int64_t (&held)[kLookups], int x,
                                                       const unsigned char* base, int width, uint32_t dst,
                                                       std::integer_sequence<int, kI...>) {
    const Pair pair;
    (copy_pair_at<kI>(held, x, base + 16 * pair.p, width - 16 * pair.p, dst + pair.chunk0, dst + pair.chunk1), ...);
  }
  __device__ __forceinline__ static void copy_pairs(const int64_t (&held)[kLookups], int x,
                                                    const unsigned char* base, int width, uint32_t dst) {
    const Pair pair(threadIdx.x % kWarpgroupThreads + ptx::opaque_zero());
#pragma unroll
    for (int i = 0; i < kPairsPerThread; ++i) {
      // Slots x + 8 i (lower line) and x + 8 (i + kPairsPerThread) (upper).
      constexpr int kUpper = kSameRow ? 0 : kPairsPerThread;
      const int64_t lo_row = shuffle_offset(held[i / 4], x + 8 * (i % 4));
      const int64_t up_row = kSameRow ? lo_row : shuffle_offset(held[(i + kUpper) / 4], x + 8 * ((i + kUpper) % 4));
      if (!pair.valid(i)) continue;
      const int lo_col = pair.column(pair.lo(i));
      const int up_col = pair.column(pair.up(i));
      const bool lo_valid = lo_row >= 0 && lo_col < width;
      const bool up_valid = up_row >= 0 && up_col < width;
      int64_t lo_off = lo_valid ? lo_row + lo_col : 0;
      int64_t up_off = up_valid ? up_row + up_col : 0;
      asm("" : "+l"(lo_off), "+l"(up_off));
      ptx::cp_async_16(dst + pair.up_chunk(i, 0), base + lo_off, lo_valid);
      ptx::cp_async_16(dst + pair.up_chunk(i, 1), base + up_off, up_valid);
    }
  }

  // Copies this thread's chunks of one K or V block into the upper half of
  // stage `dst`, at Pair's chunk0 and chunk1 of the upper line. `width`:
  // the call's head_dim or head_dim_v (a multiple of 16). Each lane turns
  // the rows it looked up into byte offsets once; the copying lanes
  // shuffle those out.
  __device__ __forceinline__ static void copy_block(const Lookups& rows, const unsigned char* base,
                                                    int64_t batch_stride, int64_t seq_stride, int width,
                                                    uint32_t dst) {
    const int x = threadIdx.x % 32 / 4;
    int64_t held[kLookups];
#pragma unroll
    for (int k = 0; k < kLookups; ++k) held[k] = row_offset(rows.r[k], batch_stride, seq_stride);
    if constexpr (kConstColumns) {
      copy_pairs_at(held, x, base, width, dst, std::make_integer_sequence<int, kPairsPerThread>{});
    } else {
      copy_pairs(held, x, base, width, dst);
    }
    ptx::cp_async_commit();
  }

  // Sixteen e4m3 bytes to eight Out pairs: the first (lo) or last (hi)
  // eight. fp16 by the hardware's conversion, bf16 by fp8::pair's integer one.
  template <typename Out, bool kHigh>
  __device__ __forceinline__ static uint32_t widen_word(uint32_t w) {
    if constexpr (std::is_same_v<Out, __half>) {
      return fp8::f16_pair<kHigh>(w);
    } else {
      return fp8::pair<Out, kHigh ? fp8::kBytes23 : fp8::kBytes01>(w);
    }
  }
  template <typename Out>
  __device__ __forceinline__ static uint4 widen_lo(const uint4& b) {
    return make_uint4(widen_word<Out, false>(b.x), widen_word<Out, true>(b.x), widen_word<Out, false>(b.y),
                      widen_word<Out, true>(b.y));
  }
  template <typename Out>
  __device__ __forceinline__ static uint4 widen_hi(const uint4& b) {
    return make_uint4(widen_word<Out, false>(b.z), widen_word<Out, true>(b.z), widen_word<Out, false>(b.w),
                      widen_word<Out, true>(b.w));
  }

  // Widens this thread's pairs of the landed block at `stage_bytes` to Out,
  // then arrives on `full`. A thread reads only the chunks it copied, but
  // its items' slots in the upper line hold chunks of the line's other
  // three threads (the same quarter warp): the warp meets between the
  // reads and the writes. Even lines read and write their lower item
  // first and odd lines their upper one, so the two lines of a quarter
  // warp (swizzle phases 2k and 2k + 1) touch disjoint banks.
  template <typename Out>
  __device__ __forceinline__ static void widen_block(unsigned char* stage_bytes, uint32_t full) {
    const Pair pair;
    const int h0 = pair.line % 2;  // the item read and written first
    constexpr int kUpperItem = kHalfLines * kSwizzleBytes;
    constexpr int kStep = Pair::kLineStep * kSwizzleBytes;
    // The first item's e4m3 chunk, and its two slots; the second item's
    // chunk is two slots over (h flipped), its slots kUpperItem away.
    const int read0 = (h0 == 0 ? pair.chunk0 : pair.chunk1) + kUpperItem;
    const int read1 = read0 ^ 32;
    const int write0 = pair.slot0 + h0 * kUpperItem;
    const int write1 = write0 ^ 16;
    const int apart = (1 - 2 * h0) * kUpperItem;
#pragma unroll
    for (int i0 = 0; i0 < kPairsPerThread; i0 += kBatch) {
      uint4 first[kBatch], second[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (i0 + b >= kPairsPerThread || !pair.valid(i0 + b)) continue;
        first[b] = *reinterpret_cast<const uint4*>(stage_bytes + read0 + (i0 + b) * kStep);
        second[b] = *reinterpret_cast<const uint4*>(stage_bytes + read1 + (i0 + b) * kStep);
      }
      __syncwarp();
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (i0 + b >= kPairsPerThread || !pair.valid(i0 + b)) continue;
        unsigned char* const at = stage_bytes + (i0 + b) * kStep;
        *reinterpret_cast<uint4*>(at + write0) = widen_lo<Out>(first[b]);
        *reinterpret_cast<uint4*>(at + write1) = widen_hi<Out>(first[b]);
        *reinterpret_cast<uint4*>(at + write0 + apart) = widen_lo<Out>(second[b]);
        *reinterpret_cast<uint4*>(at + write1 + apart) = widen_hi<Out>(second[b]);
      }
    }
    mbarrier_arrive(full);
  }

  // Waits until at most `pending` of this thread's copy groups are in flight.
  __device__ __forceinline__ static void wait_copies(int pending) {
    if (pending >= 2) {
      ptx::cp_async_wait<2>();
    } else if (pending == 1) {
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
  }

  // K_j is ready: widened, or with kFp8CacheQkE4m3 as landed (this
  // thread's copies are complete).
  __device__ __forceinline__ static void widen_k(const Smem& smem, int j) {
    const int stage = Smem::stage_of(j);
    if constexpr (kFp8CacheQkE4m3<Traits>) {
      mbarrier_arrive(smem.bar(Barrier::kKFull, stage));
    } else {
      widen_block<typename Traits::Fp8QKElement>(smem.ptr + (smem.k(stage) - smem.base),
                                                 smem.bar(Barrier::kKFull, stage));
    }
  }

  __device__ __forceinline__ static void widen_v(const Smem& smem, int j) {
    const int stage = Smem::stage_of(j);
    widen_block<__half>(smem.ptr + (smem.v(stage) - smem.base), smem.bar(Barrier::kVFull, stage));
  }

  // The order of a tile's work follows when the consumers free and need
  // each stage. They free K_j's stage once S_j is computed, early in their
  // iteration j, and need K_j at the start of iteration j; they free V_j's
  // stage only after P_j V_j, at the end of iteration j + 1, and need V_j in
  // iteration j + 1. So K_{i+1} is copied as soon as its stage is free, K_i
  // and V_{i-1} are widened (both needed at the start of iteration i)
  // before the producer waits for V_i's stage, and V_i's copy is the last
  // thing of step i: nothing waits on a stage while a landed block could be
  // widened.
  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem) {
    const detail::FwdParams& p = params.common;
    if (threadIdx.x == 0) prefetch_tensormap(&params.tma_q);
    int kv_count = 0;
    int q_count = 0;
    for (int u = blockIdx.x; u < scheduler.num_units(p); u += gridDim.x) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        if (threadIdx.x == 0) {
          mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
          Producer<Traits>::load_q(params, smem, tile);
        }
        ++q_count;
        const unsigned char* k_base = static_cast<const unsigned char*>(p.k) + head_kv * p.k_head_stride;
        const unsigned char* v_base = static_cast<const unsigned char*>(p.v) + head_kv * p.v_head_stride;
        const int n = tile.n_blocks;
        const int last_block = tile.n_first + n - 1;  // blocks run from the last key down: step i has block last_block - i
        Lookups cur = lookup(p, tile, last_block);                        // step i's block
        Lookups next = n > 1 ? lookup(p, tile, last_block - 1) : cur;  // step i + 1's
        mbarrier_wait(smem.bar(Barrier::kKEmpty, Smem::stage_of(kv_count)), Smem::parity_of(kv_count) ^ 1);
        copy_block(cur, k_base, p.k_batch_stride, p.k_seq_stride, p.head_dim, smem.k(Smem::stage_of(kv_count)));
        // Copy groups in commit order: K_0, then per step i: K_{i+1}, V_i.
        for (int i = 0; i < n; ++i) {
          const int j = kv_count + i;
          const bool more = i + 1 < n;
          if (more) {
            mbarrier_wait(smem.bar(Barrier::kKEmpty, Smem::stage_of(j + 1)), Smem::parity_of(j + 1) ^ 1);
            copy_block(next, k_base, p.k_batch_stride, p.k_seq_stride, p.head_dim, smem.k(Smem::stage_of(j + 1)));
          }
          // In flight after K_i: V_{i-1} (i > 0) and K_{i+1} (more).
          wait_copies((i > 0 ? 1 : 0) + (more ? 1 : 0));
          widen_k(smem, j);
          if (i > 0) {
            wait_copies(more ? 1 : 0);
            widen_v(smem, j - 1);
          }
          // Step i + 2's pages load while V_i's stage is awaited.
          const Lookups after = i + 2 < n ? lookup(p, tile, last_block - 2 - i) : next;
          mbarrier_wait(smem.bar(Barrier::kVEmpty, Smem::stage_of(j)), Smem::parity_of(j) ^ 1);
          copy_block(cur, v_base, p.v_batch_stride, p.v_seq_stride, p.head_dim_v, smem.v(Smem::stage_of(j)));
          cur = next;
          next = after;
        }
        kv_count += n;
        // The tile's last V, before the next tile's Q waits on the consumers.
        wait_copies(0);
        widen_v(smem, kv_count - 1);
      }
    }
  }
};

}  // namespace flash::sm90
