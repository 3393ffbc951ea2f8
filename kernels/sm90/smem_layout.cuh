// Where each part of the sm90 kernel's shared memory lives, and the names
// of its barriers. FwdTraits (kernel_traits.cuh) sizes the regions; this
// type turns them into addresses.
#pragma once

#include <cstdint>

#include "../common/constants.h"
#include "../common/ptx.cuh"
#include "ptx_sm90.cuh"

namespace flash::sm90 {

// The mbarriers: Q's pair, then one of each kind per K/V stage. A "full"
// barrier completes when TMA has landed its bytes (one arrival, the
// producer's expect_tx), or, when the producer gathers K/V with cp.async,
// on one arrival per producer thread; an "empty" one when every consumer
// warp has read the buffer (one arrival per consumer warp).
enum class Barrier : int { kQFull, kQEmpty, kKFull, kVFull, kKEmpty, kVEmpty };

// Named barriers (id 0 is __syncthreads): per consumer warpgroup, one for
// its epilogue and one for its pingpong turn.
enum class NamedBarrier : int { kEpilogue = 1, kTurn = 4 };
inline constexpr int kMaxConsumerWarpgroups = 3;
__device__ __forceinline__ int named_barrier_id(NamedBarrier b, int consumer_wg) {
  return static_cast<int>(b) + consumer_wg;
}

template <typename Traits>
struct SmemLayout {
  static_assert(Traits::kConsumerWarpgroups <= kMaxConsumerWarpgroups, "named barrier ids would overlap");
  static constexpr int kStages = Traits::kStages;

  uint32_t base;       // shared-space address, aligned to the swizzle atom
  unsigned char* ptr;  // the same byte, generic

  // The dynamic shared memory base rounded up to the swizzle atom;
  // Traits::kSmemBytes has the slack.
  __device__ __forceinline__ explicit SmemLayout(unsigned char* raw)
      : base((ptx::smem_addr(raw) + (kSwizzleAtomBytes - 1)) & ~uint32_t{kSwizzleAtomBytes - 1}),
        ptr(raw + (base - ptx::smem_addr(raw))) {}

  __device__ __forceinline__ uint32_t q() const { return base + Traits::kQOffset; }
  __device__ __forceinline__ uint32_t o() const { return base + Traits::kOOffset; }
  // K's block of `stage`: kKVBytes from here. With Traits::kCompactK only
  // its upper half is used, at kKOffset + stage * kKStageBytes; the lower
  // half named here belongs to the previous stage (or, for stage 0, to Q)
  // and is never touched through K.
  __device__ __forceinline__ uint32_t k(int stage) const {
    return base + Traits::kKOffset + stage * Traits::kKStageBytes - (Traits::kCompactK ? Traits::kKStageBytes : 0);
  }
  __device__ __forceinline__ uint32_t v(int stage) const { return base + Traits::kVOffset + stage * Traits::kKVBytes; }
  __device__ __forceinline__ uint32_t ones() const { return base + Traits::kOnesOffset; }
  __device__ __forceinline__ unsigned char* o_bytes() const { return ptr + Traits::kOOffset; }
  __device__ __forceinline__ unsigned char* ones_bytes() const { return ptr + Traits::kOnesOffset; }
  __device__ __forceinline__ unsigned char* v_bytes(int stage) const {
    return ptr + Traits::kVOffset + stage * Traits::kKVBytes;
  }
  __device__ __forceinline__ int* sched() const { return reinterpret_cast<int*>(ptr + Traits::kSchedOffset); }

  __device__ __forceinline__ uint32_t bar(Barrier b, int stage = 0) const {
    const uint32_t first = base + Traits::kBarrierOffset;
    switch (b) {
      case Barrier::kQFull: return first;
      case Barrier::kQEmpty: return first + 8;
      case Barrier::kKFull: return first + 8 * (2 + stage);
      case Barrier::kVFull: return first + 8 * (2 + kStages + stage);
      case Barrier::kKEmpty: return first + 8 * (2 + 2 * kStages + stage);
      default: return first + 8 * (2 + 3 * kStages + stage);  // kVEmpty
    }
  }

  // Thread 0 initialises every mbarrier (the caller then syncs the CTA);
  // `kv_full_arrivals`: 1, or the gathering producer's thread count.
  __device__ __forceinline__ void init_barriers(uint32_t kv_full_arrivals = 1) const {
    mbarrier_init(bar(Barrier::kQFull), 1);
    mbarrier_init(bar(Barrier::kQEmpty), Traits::kConsumerWarps);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(bar(Barrier::kKFull, s), kv_full_arrivals);
      mbarrier_init(bar(Barrier::kVFull, s), kv_full_arrivals);
      mbarrier_init(bar(Barrier::kKEmpty, s), Traits::kConsumerWarps);
      mbarrier_init(bar(Barrier::kVEmpty, s), Traits::kConsumerWarps);
    }
    fence_barrier_init();
  }

  // The j-th K/V block a CTA handles (counted across its tiles) sits in
  // stage j % kStages, in that stage's (j / kStages)-th use.
  __device__ __forceinline__ static int stage_of(int j) { return j % kStages; }
  __device__ __forceinline__ static uint32_t parity_of(int j) { return static_cast<uint32_t>((j / kStages) & 1); }
};

// A consumer warp's arrival on an "empty" barrier (one per warp).
template <typename Traits>
__device__ __forceinline__ void consumer_release(const SmemLayout<Traits>& smem, Barrier b, int stage, int lane) {
  if (lane == 0) mbarrier_arrive(smem.bar(b, stage));
}

}  // namespace flash::sm90
