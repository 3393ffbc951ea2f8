// The producer of the sm90 kernel: one thread of warpgroup 0 loads each
// tile's Q_i and streams its K_j / V_j blocks, last visible block first,
// through the kStages-deep rings with TMA, each load completing on its
// stage's "full" mbarrier. The rings run on across tiles, so the next
// tile's first blocks load while this one finishes.
//
// KV-cache calls (seqused_k or a paged cache; CacheProducer) use the whole
// of warp 0: under a paged cache lane i looks up and loads box i of each
// block (paged_box_rows(page_size, kBlockN) rows inside one page), so a
// block's page lookups are one warp-wide load, not a chain of them. Paged
// caches that gathers_pages (tma_limits.h) picks are copied row by row with
// cp.async by the whole warpgroup instead (GatherProducer). An fp8 (e4m3)
// cache is copied by the whole warpgroup too and widened to Element in
// shared memory (ConvertProducer).
#pragma once

#include "../common/constants.h"
#include "../common/fp8.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
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

// The KV-cache producer: every lane of warp 0 runs it (the leader, lane 0,
// waits for Q and the stages and posts the byte counts). A dense cache with
// seqused_k loads as a dense call does: the rows past a sequence's keys are
// in the allocation. A paged cache's block is kBlockN / box boxes, box i
// from lane i; a box past the sequence's last key loads that key's page
// again (any page the table names will do): the consumers mask those keys
// and zero those V rows (Mainloop::zero_v_tail).
template <typename Traits>
struct CacheProducer {
  static constexpr int kBlockN = Traits::kBlockN;
  using Smem = SmemLayout<Traits>;
  static_assert(kBlockN / 8 <= 32, "a paged block's boxes (8 rows at least) must fit one per lane");

  __device__ __forceinline__ static void load_kv(const FwdParams& params, const CUtensorMap* map, uint32_t dst,
                                                 uint32_t full, uint32_t empty, uint32_t empty_parity, int row,
                                                 int head_kv, int batch, bool issue) {
    mbarrier_wait(empty, empty_parity);
    if (threadIdx.x % 32 == 0) mbarrier_arrive_expect_tx(full, Traits::kKVBytes);
    __syncwarp();
    if (!issue) return;
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      // Box i (lane i) of a paged block lands at row i * kv_box_rows.
      tma_load_4d(dst + (cb * kBlockN + threadIdx.x % 32 * params.kv_box_rows) * kSwizzleBytes, map, full,
                  cb * kSwizzleColumns, row, head_kv, batch);
    }
  }

  // The unit count is read again where needed, not kept in a register.
  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem) {
    const detail::FwdParams& p = params.common;
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
      prefetch_tensormap(&params.tma_q);
      prefetch_tensormap(&params.tma_k);
      prefetch_tensormap(&params.tma_v);
    }
    // Read from the parameters where used (constant memory): the producer
    // warp runs on few registers.
    int kv_count = 0;
    int q_count = 0;
    for (int u = blockIdx.x; u < scheduler.num_units(p); u += gridDim.x) {
      for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
        const Tile tile = scheduler.tile(u, k, p);
        if (tile.n_blocks == 0) continue;
        const int head_kv = tile.head / p.q_per_kv;
        if (lane == 0) {
          mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
          Producer<Traits>::load_q(params, smem, tile);
        }
        ++q_count;
        // Paged: lane i's box of block i of the walk (last block first);
        // its page is looked up a block ahead, under the waits of the one before.
        const bool paged = p.block_table != nullptr;
        const bool box_lane = lane * params.kv_box_rows < kBlockN;
        auto key_of = [&](int i) { return (tile.n_first + tile.n_blocks - 1 - i) * kBlockN + lane * params.kv_box_rows; };
        auto page_of = [&](int i) {
          const int known = min(key_of(i), tile.len_k - 1);
          return __ldg(p.block_table + static_cast<int64_t>(tile.batch) * p.block_table_batch_stride +
                       known / p.page_size);
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
            row = key < tile.len_k ? key % p.page_size : 0;
          }
          const int stage = Smem::stage_of(kv_count);
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          load_kv(params, &params.tma_k, smem.k(stage), smem.bar(Barrier::kKFull, stage),
                  smem.bar(Barrier::kKEmpty, stage), empty_parity, row, head_kv, batch, issue);
          load_kv(params, &params.tma_v, smem.v(stage), smem.bar(Barrier::kVFull, stage),
                  smem.bar(Barrier::kVEmpty, stage), empty_parity, row, head_kv, batch, issue);
        }
      }
    }
  }
};

// The gathering KV-cache producer, for pages TMA cannot box (a page_size
// that is not a multiple of 8, 1 included) or boxes badly (16 rows or fewer
// at head dim 256; gathers_pages, tma_limits.h): all four warps of warpgroup 0
// copy each K/V block with cp.async, 16 bytes a lane, into the layout TMA's
// 128-byte swizzle would have written. Warp w owns rows [w R, w R + R) of a
// block (R = kBlockN / 4). Lane l looks up row w R + l's page a block ahead
// and turns it into the row's byte offsets in K and V; each step, eight
// lanes copy one row (a 16-byte chunk of each 128-byte column block each),
// four rows a warp, the offsets passed by shuffle. Rows past the sequence's
// keys and columns past the call's width are zero-filled (source size 0),
// so the consumers need not zero V. Each thread's cp.async.mbarrier.arrive
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

  template <typename Scheduler>
  __device__ __forceinline__ static void run(const FwdParams& params, const Scheduler& scheduler, const Smem& smem) {
    const detail::FwdParams& p = params.common;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (threadIdx.x == 0) prefetch_tensormap(&params.tma_q);
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
          mbarrier_wait(smem.bar(Barrier::kKEmpty, stage), empty_parity);
          copy_block(k_base, off.k, k_cols, smem.k(stage), warp, lane);
          cp_async_mbarrier_arrive(smem.bar(Barrier::kKFull, stage));
          mbarrier_wait(smem.bar(Barrier::kVEmpty, stage), empty_parity);
          copy_block(v_base, off.v, v_cols, smem.v(stage), warp, lane);
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
// varlen, seqused_k, paged with any page size). All four warps of warpgroup
// 0 copy a block's e4m3 rows with cp.async, 16 bytes (16 elements) a lane,
// into the upper half of the block's stage (a row of kHeadDim bytes after
// another), then widen them in place to Element in the layout TMA's
// 128-byte swizzle would have written, exactly (fp8.cuh). A stage's
// copies start as soon as the consumers free it, and a landed block is
// widened before the producer waits on any later stage (run). Widening
// writes the lower half first
// (where no fp8 byte lies), then reads the rest of the bytes into
// registers, syncs the warpgroup and writes the upper half. Each thread
// then arrives on the stage's "full" barrier (initialised to 128 arrivals);
// the consumers fence the async proxy after their wait (Mainloop::wait_kv).
// Rows past the sequence's keys and columns past the call's width are
// zero-filled by the copies, so the consumers need not zero V. The
// descales are applied by the consumers (scores and O).
template <typename Traits>
struct ConvertProducer {
  using Element = typename Traits::Element;
  using Smem = SmemLayout<Traits>;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kRowsPerWarp = kBlockN / 4;
  static constexpr int kChunks = kHeadDim / 16;                   // 16-byte e4m3 chunks a row
  static constexpr int kWarpItems = kRowsPerWarp * kChunks;       // chunks a warp copies a block
  static constexpr int kCopySteps = (kWarpItems + 31) / 32;
  static constexpr int kItems = kBlockN * kChunks;                // chunks a block widens
  static constexpr int kHalfItems = (kItems / 2 + kWarpgroupThreads - 1) / kWarpgroupThreads;  // per thread and half
  static constexpr int kStaging = Traits::kKVBytes / 2;           // the e4m3 block's offset in its stage
  static_assert(kBlockN % 4 == 0 && kRowsPerWarp <= 32, "a warp's rows are looked up one per lane");
  static_assert(kHeadDim % 16 == 0 && kBlockN * kHeadDim == kStaging, "the e4m3 block fills half a stage");
  static_assert(kItems % 2 == 0, "the items split into the stage's two halves");

  // Lane l's row of its warp's share of a block: byte offsets of that row
  // from K's and V's head base (-1: past the keys, or no row for the lane).
  struct RowOffsets {
    int64_t k, v;
  };

  __device__ __forceinline__ static RowOffsets lookup(const detail::FwdParams& p, const Tile& tile, int block, int warp,
                                                      int lane) {
    const int key = block * kBlockN + warp * kRowsPerWarp + lane;
    if (lane >= kRowsPerWarp || key >= tile.len_k) return RowOffsets{-1, -1};
    if (p.block_table != nullptr) {
      const int index = page_of_key(key, p.page_size, p.page_shift);
      const int64_t page =
          __ldg(p.block_table + static_cast<int64_t>(tile.batch) * p.block_table_batch_stride + index);
      const int in_page = key - index * p.page_size;
      return RowOffsets{page * p.k_batch_stride + in_page * p.k_seq_stride,
                        page * p.v_batch_stride + in_page * p.v_seq_stride};
    }
    const int64_t row = static_cast<int64_t>(tile.k_row) + key;
    return RowOffsets{tile.k_batch * p.k_batch_stride + row * p.k_seq_stride,
                      tile.k_batch * p.v_batch_stride + row * p.v_seq_stride};
  }

  // Copies one K or V block's e4m3 rows to the upper half of stage `dst`:
  // item t of warp w is chunk t % kChunks of its row t / kChunks. `width`:
  // the call's head_dim or head_dim_v (a multiple of 16).
  __device__ __forceinline__ static void copy_block(const unsigned char* base, int64_t offset, int width, uint32_t dst,
                                                    int warp, int lane) {
#pragma unroll
    for (int step = 0; step < kCopySteps; ++step) {
      const int t = step * 32 + lane;
      const int r = t / kChunks;
      const int j = t % kChunks;
      const int64_t row_offset = __shfl_sync(0xffffffffu, offset, r < kRowsPerWarp ? r : kRowsPerWarp - 1);
      if (kWarpItems % 32 != 0 && t >= kWarpItems) continue;
      const bool valid = row_offset >= 0 && j * 16 < width;
      const int row = warp * kRowsPerWarp + r;
      ptx::cp_async_16(dst + kStaging + row * kHeadDim + j * 16, valid ? base + row_offset + j * 16 : base, valid);
    }
    ptx::cp_async_commit();
  }

  // Item q of a block's widening: chunk pair q % 4 of the widened block's
  // 128-byte row q / 4 (column block cb, key r), so items below kItems / 2
  // write the stage's lower half. Returns the e4m3 source's byte offset in
  // the block and sets the two 16-byte destinations.
  __device__ __forceinline__ static int widen_item(int q, int* first, int* second) {
    const int line = q / 4;
    const int pair = q % 4;
    const int cb = line / kBlockN;
    const int r = line % kBlockN;
    *first = line * kSwizzleBytes + ((2 * pair) ^ (r % 8)) * 16;
    *second = line * kSwizzleBytes + ((2 * pair + 1) ^ (r % 8)) * 16;
    return r * kHeadDim + (cb * 4 + pair) * 16;
  }

  __device__ __forceinline__ static uint4 widen_lo(const uint4& b) {
    return make_uint4(fp8::pair<Element, fp8::kBytes01>(b.x), fp8::pair<Element, fp8::kBytes23>(b.x),
                      fp8::pair<Element, fp8::kBytes01>(b.y), fp8::pair<Element, fp8::kBytes23>(b.y));
  }
  __device__ __forceinline__ static uint4 widen_hi(const uint4& b) {
    return make_uint4(fp8::pair<Element, fp8::kBytes01>(b.z), fp8::pair<Element, fp8::kBytes23>(b.z),
                      fp8::pair<Element, fp8::kBytes01>(b.w), fp8::pair<Element, fp8::kBytes23>(b.w));
  }

  __device__ __forceinline__ static void sync_producer() {
    named_barrier_sync(static_cast<int>(NamedBarrier::kProducer), kWarpgroupThreads);
  }

  // Widens the landed e4m3 block of `stage_bytes` in place, then arrives on `full`.
  __device__ __forceinline__ static void widen_block(unsigned char* stage_bytes, uint32_t full) {
    const int tid = threadIdx.x % kWarpgroupThreads;
    const unsigned char* bytes = stage_bytes + kStaging;
    // Items writing the lower half (no e4m3 byte there): read, widen, write.
#pragma unroll
    for (int i = 0; i < kHalfItems; ++i) {
      const int q = tid + i * kWarpgroupThreads;
      if (kItems / 2 % kWarpgroupThreads != 0 && q >= kItems / 2) continue;
      int first, second;
      const uint4 b = *reinterpret_cast<const uint4*>(bytes + widen_item(q, &first, &second));
      *reinterpret_cast<uint4*>(stage_bytes + first) = widen_lo(b);
      *reinterpret_cast<uint4*>(stage_bytes + second) = widen_hi(b);
    }
    // The others overwrite e4m3 bytes: every thread reads first.
    uint4 upper[kHalfItems];
#pragma unroll
    for (int i = 0; i < kHalfItems; ++i) {
      const int q = kItems / 2 + tid + i * kWarpgroupThreads;
      if (kItems / 2 % kWarpgroupThreads != 0 && q >= kItems) continue;
      int first, second;
      upper[i] = *reinterpret_cast<const uint4*>(bytes + widen_item(q, &first, &second));
    }
    sync_producer();
#pragma unroll
    for (int i = 0; i < kHalfItems; ++i) {
      const int q = kItems / 2 + tid + i * kWarpgroupThreads;
      if (kItems / 2 % kWarpgroupThreads != 0 && q >= kItems) continue;
      int first, second;
      widen_item(q, &first, &second);
      *reinterpret_cast<uint4*>(stage_bytes + first) = widen_lo(upper[i]);
      *reinterpret_cast<uint4*>(stage_bytes + second) = widen_hi(upper[i]);
    }
    mbarrier_arrive(full);
  }

  // Waits until at most `pending` of this thread's copy groups are in
  // flight, then until every producer thread's are (a block's rows are
  // copied by all four warps).
  __device__ __forceinline__ static void wait_copies(int pending) {
    if (pending >= 2) {
      ptx::cp_async_wait<2>();
    } else if (pending == 1) {
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    sync_producer();
  }

  // Widens the CTA's j-th K or V block (its copies landed) and arrives on its "full" barrier.
  __device__ __forceinline__ static void widen_k(const Smem& smem, int j) {
    const int stage = Smem::stage_of(j);
    widen_block(smem.ptr + (smem.k(stage) - smem.base), smem.bar(Barrier::kKFull, stage));
  }

  __device__ __forceinline__ static void widen_v(const Smem& smem, int j) {
    const int stage = Smem::stage_of(j);
    widen_block(smem.ptr + (smem.v(stage) - smem.base), smem.bar(Barrier::kVFull, stage));
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
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
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
        const int last_block = tile.n_first + n - 1;  // blocks run from the last key down
        RowOffsets cur = lookup(p, tile, last_block, warp, lane);
        mbarrier_wait(smem.bar(Barrier::kKEmpty, Smem::stage_of(kv_count)), Smem::parity_of(kv_count) ^ 1);
        copy_block(k_base, cur.k, p.head_dim, smem.k(Smem::stage_of(kv_count)), warp, lane);
        // Copy groups in commit order: K_0, then per step i: K_{i+1}, V_i.
        for (int i = 0; i < n; ++i) {
          const int j = kv_count + i;
          const bool more = i + 1 < n;
          RowOffsets next = cur;
          if (more) {
            next = lookup(p, tile, last_block - 1 - i, warp, lane);
            mbarrier_wait(smem.bar(Barrier::kKEmpty, Smem::stage_of(j + 1)), Smem::parity_of(j + 1) ^ 1);
            copy_block(k_base, next.k, p.head_dim, smem.k(Smem::stage_of(j + 1)), warp, lane);
          }
          // In flight after K_i: V_{i-1} (i > 0) and K_{i+1} (more).
          wait_copies((i > 0 ? 1 : 0) + (more ? 1 : 0));
          widen_k(smem, j);
          if (i > 0) {
            wait_copies(more ? 1 : 0);
            widen_v(smem, j - 1);
          }
          mbarrier_wait(smem.bar(Barrier::kVEmpty, Smem::stage_of(j)), Smem::parity_of(j) ^ 1);
          copy_block(v_base, cur.v, p.head_dim_v, smem.v(Smem::stage_of(j)), warp, lane);
          cur = next;
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
