// Paged K/V blocks for the decode kernel, with one page lookup and one
// address per row instead of one per 16-byte chunk.
//
// The copy of a kRows-key block follows load_tile's layout: at step i,
// thread t copies chunk t % kCPR of row (t + i * kThreads) / kCPR, so a warp
// copies kRowsPerStep = 32 / kCPR whole rows a step and the same
// kRows / 4 rows every block. Lane l of a warp looks up the l-th of those
// rows (fetch(), a block ahead, so the table read hides under a block's
// compute) and turns it into the row's K and V offsets at issue(); each
// step the lanes copying a row take them from that lane by shuffle. Two
// registers a thread carry the lookup between the two calls, where
// sm80::PagedKV keeps one page number per step and recomputes the address
// (a division without a power-of-two page) in every lane of a row.
// fetch() and issue() take sm80::PagedKV's arguments, so the kernel can
// use either.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../sm80/fwd_kernel.cuh"  // chunk_offset

namespace flash::decode {

template <typename Tile, int kRows>
struct PagedRows {
  static constexpr int kCPR = Tile::kChunksPerRow;
  static constexpr int kThreads = Tile::kNThreads;
  static constexpr int kIters = kRows * kCPR / kThreads;
  using Element = typename Tile::Element;
  static constexpr int kChunkElems = 16 / static_cast<int>(sizeof(Element));
  // Only where a warp's lanes cover whole rows at every step.
  static constexpr bool kApplies = 32 % kCPR == 0 && kThreads % 32 == 0;
  static constexpr int kRowsPerStep = kApplies ? 32 / kCPR : 1;
  static_assert(!kApplies || kIters * kRowsPerStep <= 32, "a warp's rows are looked up one per lane");
  static_assert(!kApplies || (2 * kThreads / kCPR) % 8 == 0, "two steps span whole swizzle periods");

  int page = -1;  // this lane's row: its page (-1: past the keys, or no row)
  int in_page = 0;

  // The block row lane `lane` of warp `warp` looks up.
  __device__ __forceinline__ static int lookup_row(int warp, int lane) {
    return (lane / kRowsPerStep) * (kThreads / kCPR) + warp * kRowsPerStep + lane % kRowsPerStep;
  }

  __device__ __forceinline__ void fetch(const int* table, int page_size, int page_shift, int first, int valid_rows,
                                        int tid) {
    const int lane = tid % 32;
    const int row = lookup_row(tid / 32, lane);
    page = -1;
    in_page = 0;
    if (lane < kIters * kRowsPerStep && row < valid_rows) {
      const int key = first + row;
      const int index = page_of_key(key, page_size, page_shift);
      page = __ldg(table + index);
      in_page = key - index * page_size;
    }
  }

  // `k_head` / `v_head` point at the head's element 0 of page 0.
  __device__ __forceinline__ void issue(uint32_t smem_k, uint32_t smem_v, const Element* k_head,
                                        const Element* v_head, int64_t k_page_stride, int64_t v_page_stride,
                                        int64_t k_row_stride, int64_t v_row_stride, int /*page_size*/,
                                        int /*page_shift*/, int /*first*/, int /*valid_rows*/, int k_chunks,
                                        int v_chunks, int tid) const {
    const int lane = tid % 32;
    const int64_t k_offset = page >= 0 ? page * k_page_stride + in_page * k_row_stride : -1;
    const int64_t v_offset = page >= 0 ? page * v_page_stride + in_page * v_row_stride : -1;
    const int c = tid % kCPR;
    const bool k_column = c < k_chunks;
    const bool v_column = c < v_chunks;
    // Step i's row is row0 + i * kStepRows. The swizzle repeats every 8
    // rows and 2 * kStepRows is a multiple of 8, so the destination is one
    // of two per-thread offsets plus a compile-time one.
    constexpr int kStepRows = kThreads / kCPR;
    const int row0 = tid / kCPR;
    const uint32_t dst[2] = {sm80::chunk_offset<Tile, kRows>(row0, c),
                             sm80::chunk_offset<Tile, kRows>(row0 + kStepRows, c)};
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int src_lane = i * kRowsPerStep + lane / kCPR;
      const int64_t k_row = __shfl_sync(0xffffffffu, k_offset, src_lane);
      const int64_t v_row = __shfl_sync(0xffffffffu, v_offset, src_lane);
      const bool k_valid = k_column && k_row >= 0;
      const bool v_valid = v_column && v_row >= 0;
      const uint32_t at = dst[i % 2] + (i / 2) * 2 * kStepRows * Tile::kSwizzleChunks * 16;
      ptx::cp_async_16(smem_k + at, k_valid ? k_head + k_row + c * kChunkElems : k_head, k_valid);
      ptx::cp_async_16(smem_v + at, v_valid ? v_head + v_row + c * kChunkElems : v_head, v_valid);
    }
  }
};

}  // namespace flash::decode
