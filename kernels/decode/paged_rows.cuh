// Paged K/V blocks for the decode kernel, with one page lookup and one
// address per row instead of one per 16-byte chunk.
//
// The copy of a kRows-key block follows load_tile's layout: at step i,
// thread t copies chunk t % kCPR of row (t + i * kThreads) / kCPR, so a warp
// copies kRowsPerStep = 32 / kCPR whole rows a step and the same
// kRows / 4 rows every block. Lane l of a warp looks up the l-th of those
// rows (fetch(), a block ahead, so the table read hides under a block's
// compute). At issue() it turns the lookup into the row's K and V source
// addresses and stores both in the warp's slot l of shared memory (kBytes
// a CTA, at place()); each step, every lane reads its row's pair with one
// 16-byte shared load (handing out two 64-bit offsets by shuffle takes four
// SHFL and their bounds tests). Two registers a thread carry the lookup
// between the two calls, where sm80::PagedKV keeps one page number per
// step and recomputes the address (a division without a power-of-two page)
// in every lane of a row. fetch() and issue() take sm80::PagedKV's
// arguments, so the kernel can use either.
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
  // Rows a warp looks up, one a lane (kRows / warps).
  static constexpr int kLookups = kApplies ? kIters * kRowsPerStep : 0;
  // Shared memory a CTA: each warp's kLookups slots of a K and a V address.
  static constexpr int kBytes = (kThreads / 32) * kLookups * 16;

  int page = -1;  // this lane's row: its page (-1: past the keys, or no row)
  int in_page = 0;
  uint32_t slots = 0;  // this warp's slots (shared address)

  // `smem_rows`: kBytes of shared memory, 16-byte aligned, for this object alone.
  __device__ __forceinline__ void place(uint32_t smem_rows, int tid) {
    slots = smem_rows + (tid / 32) * kLookups * 16;
  }

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

  // `k_head` / `v_head` point at the head's element 0 of page 0. Every lane
  // of the warp calls it (its __syncwarp()s).
  __device__ __forceinline__ void issue(uint32_t smem_k, uint32_t smem_v, const Element* k_head,
                                        const Element* v_head, int64_t k_page_stride, int64_t v_page_stride,
                                        int64_t k_row_stride, int64_t v_row_stride, int /*page_size*/,
                                        int /*page_shift*/, int /*first*/, int valid_rows, int k_chunks,
                                        int v_chunks, int tid) const {
    const int lane = tid % 32;
    // A row past the keys keeps the head's first row, which its zero-filling
    // copies never read (a table entry out of [0, num_pages) is outside the
    // contract; a negative one lands there too).
    const Element* k_src = k_head;
    const Element* v_src = v_head;
    if (page >= 0) {
      k_src += page * k_page_stride + in_page * k_row_stride;
      v_src += page * v_page_stride + in_page * v_row_stride;
    }
    __syncwarp();  // the warp's reads of the last block's slots are done
    if (lane < kLookups) {
      asm volatile("st.shared.v2.u64 [%0], {%1, %2};\n" ::"r"(slots + lane * 16), "l"(k_src), "l"(v_src)
                   : "memory");
    }
    __syncwarp();
    const int c = tid % kCPR;
    const bool k_column = c < k_chunks;
    const bool v_column = c < v_chunks;
    // Step i's row is row0 + i * kStepRows, the row lane i * kRowsPerStep +
    // lane / kCPR looked up (lookup_row). The swizzle repeats every 8 rows
    // and 2 * kStepRows is a multiple of 8, so the destination is one of two
    // per-thread offsets plus a compile-time one.
    constexpr int kStepRows = kThreads / kCPR;
    const int row0 = tid / kCPR;
    const int rows_left = valid_rows - row0;
    const uint32_t dst[2] = {sm80::chunk_offset<Tile, kRows>(row0, c),
                             sm80::chunk_offset<Tile, kRows>(row0 + kStepRows, c)};
    const uint32_t slot = slots + (lane / kCPR) * 16;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      uint64_t k_row, v_row;
      asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n"
                   : "=l"(k_row), "=l"(v_row)
                   : "r"(slot + i * kRowsPerStep * 16)
                   : "memory");
      const bool row_valid = rows_left > i * kStepRows;
      const uint32_t at = dst[i % 2] + (i / 2) * 2 * kStepRows * Tile::kSwizzleChunks * 16;
      ptx::cp_async_16(smem_k + at, reinterpret_cast<const Element*>(k_row) + c * kChunkElems, k_column && row_valid);
      ptx::cp_async_16(smem_v + at, reinterpret_cast<const Element*>(v_row) + c * kChunkElems, v_column && row_valid);
    }
  }
};

}  // namespace flash::decode
