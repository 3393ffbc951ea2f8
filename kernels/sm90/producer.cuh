// The producer of the sm90 kernel: one thread of warpgroup 0 loads each
// tile's Q_i and streams its K_j / V_j blocks, last visible block first,
// through the kStages-deep rings with TMA, each load completing on its
// stage's "full" mbarrier. The rings run on across tiles, so the next
// tile's first blocks load while this one finishes.
#pragma once

#include "../common/constants.h"
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
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
#pragma unroll
      for (int slice = 0; slice < kCWG; ++slice) {
        if (slice < slices_skipped) continue;
        tma_load_4d(smem.q() + cb * kBlockM * kSwizzleBytes + slice * kWarpgroupRows * kSwizzleBytes, &params.tma_q,
                    smem.bar(Barrier::kQFull), cb * kSwizzleColumns, tile.q_row + slice * kWarpgroupRows, tile.head,
                    tile.q_batch);
      }
    }
  }

  // One K or V block into `dst` once the consumers have released the stage.
  __device__ __forceinline__ static void load_kv(const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty,
                                                 uint32_t empty_parity, int row, int head_kv, int batch) {
    mbarrier_wait(empty, empty_parity);
    mbarrier_arrive_expect_tx(full, Traits::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      tma_load_4d(dst + cb * kBlockN * kSwizzleBytes, map, full, cb * kSwizzleColumns, row, head_kv, batch);
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
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        // The consumers must be done with the previous tile's Q.
        mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
        ++q_count;
        load_q(params, smem, tile);
        // Unrolled twice, as the loads were before this file split them out:
        // left to itself the compiler unrolls hd256's loop four times.
#pragma unroll 2
        for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
          const int row = tile.k_row + (tile.n_first + tile.n_blocks - 1 - i) * kBlockN;
          const int stage = Smem::stage_of(kv_count);
          // Parity of the stage's previous use; a stage's first use passes at once.
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          load_kv(&params.tma_k, smem.k(stage), smem.bar(Barrier::kKFull, stage), smem.bar(Barrier::kKEmpty, stage),
                  empty_parity, row, head_kv, tile.k_batch);
          load_kv(&params.tma_v, smem.v(stage), smem.bar(Barrier::kVFull, stage), smem.bar(Barrier::kVEmpty, stage),
                  empty_parity, row, head_kv, tile.k_batch);
        }
      }
    }
  }
};

}  // namespace flash::sm90
