// Hopper (sm_90a) PTX this project uses: mbarriers, the bulk tensor copy
// engine (TMA), warpgroup MMA bookkeeping, register reallocation and named
// barriers. One instruction per wrapper; the kernels decide the order.
#pragma once

#include <cuda.h>  // CUtensorMap (a plain 128-byte struct; no driver calls here)

#include <cstdint>

namespace flash::sm90 {

// ---- mbarrier --------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA) and to
// the other threads before anyone waits on them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// An arrival on `bar` once every cp.async this thread has issued so far has
// landed. The arrival counts toward the barrier's initial count (noinc).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Blocks until the barrier's phase with the given parity has completed. A
// fresh barrier counts its (never run) previous phase, parity 1, as done: a
// producer waiting on an "empty" barrier with parity 1 passes at once.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// ---- TMA -------------------------------------------------------------------

// 4-d tiled load of one box into shared memory, completing on `bar` with the
// box's full byte count (out-of-bounds elements are zero-filled and counted).
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 4-d tiled store of one box from shared memory; out-of-bounds rows are
// clipped, so a ragged last query block writes only its valid rows.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until the committed stores have finished reading shared memory.
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Waits until the committed stores have completed.
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// Shared memory written by ordinary stores and read next by the async proxy
// (a TMA store) needs this fence in each writing thread before the barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- warpgroup MMA bookkeeping ---------------------------------------------

// Orders this thread's earlier register writes (accumulators, A fragments)
// before the wgmma that reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across a wgmma
// wait: the registers are "changed" here as far as it knows.
template <int kN>
__device__ __forceinline__ void fence_registers(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor of an operand stored as TMA's
// SWIZZLE_<kSwizzleBytes>B writes it: rows of kSwizzleBytes bytes (128, 64
// or 32), 8-row atoms of 8 * kSwizzleBytes bytes, the stride between 8-row
// groups.
//   K-major operand (rows are M/N, the K index is contiguous; each k-step's
//     bytes inside one row): the leading offset is unused.
//   MN-major operand (rows are K, M/N contiguous; 128-byte swizzle only
//     here): `lead_bytes` steps from one 64-element column block to the next.
template <int kSwizzleBytes>
__device__ __forceinline__ uint64_t smem_descriptor_kmajor(uint32_t addr) {
  static_assert(kSwizzleBytes == 128 || kSwizzleBytes == 64 || kSwizzleBytes == 32, "swizzle of 128, 64 or 32 bytes");
  constexpr uint64_t kMode = kSwizzleBytes == 128 ? 1 : kSwizzleBytes == 64 ? 2 : 3;
  constexpr uint64_t kStrideBytes = 8 * kSwizzleBytes;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | ((kStrideBytes >> 4) << 32) | (kMode << 62);
}

// The 128-byte swizzle's descriptor, with a leading byte offset (MN-major
// operands; 0 for K-major ones).
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t addr, uint32_t lead_bytes) {
  return smem_descriptor_kmajor<128>(addr) | (static_cast<uint64_t>(lead_bytes >> 4) << 16);
}

// The descriptor of the same tile `byte_offset` bytes on (a later k-step):
// only the start address field, the low 14 bits, moves, and it cannot carry
// out of them (shared memory ends below 256 KiB), so one 32-bit add on the
// low word replaces rebuilding the descriptor for every wgmma.
__device__ __forceinline__ uint64_t smem_descriptor_at(uint64_t base, uint32_t byte_offset) {
  return (base & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(base) + (byte_offset >> 4));
}

// ---- registers and barriers --------------------------------------------------

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace flash::sm90
