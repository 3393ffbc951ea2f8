// FlashAttention forward for Hopper (sm_90a): persistent, warp-specialised,
// TMA-fed, wgmma-computed.
//
// The grid holds at most one CTA per SM; each CTA walks a static list of
// tiles (one tile = kBlockM query rows of one (batch, head); the schedule
// is tile_scheduler.cuh's). Warpgroup 0 is the producer (producer.cuh):
// one thread loads Q_i and streams K_j / V_j through shared-memory rings
// with TMA. Every other warpgroup is a consumer owning 64 query rows of a
// tile: the main loop (mainloop.cuh) computes S, the online softmax and
// O += P V_j with wgmma, and the epilogue (epilogue.cuh) normalises O and
// stores it with the LSE. Blocks wholly hidden by the causal or window mask
// are never loaded. Shared memory: smem_layout.cuh.
#pragma once

#include <cstdint>

#include "../common/constants.h"
#include "../common/softmax.cuh"
#include "tma_limits.h"
#include "epilogue.cuh"
#include "kernel_traits.cuh"
#include "mainloop.cuh"
#include "params.h"
#include "producer.cuh"
#include "ptx_sm90.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"

namespace flash::sm90 {

// kMasked: a causal or sliding-window mask (window from the parameters,
// causal = (-1, 0)); else only the ragged tail. kLeft: the window has a left
// edge (window_left >= 0); without one the left-edge work is compiled out.
// kScoreMod: scores pass through the logit softcap and ALiBi (each when the
// call asks for it; ScoreMod, mask.cuh) before the mask and the softmax. kSplit: split-KV (p.num_splits > 1; the
// unsplit kernels carry none of its code): each tile covers its part of
// the keys and stores a partial result for the combine kernel. kCache: a
// KV cache (seqused_k, or pages loaded through the block table; see
// CacheProducer, GatherProducer and Mainloop::zero_v_tail); never split.
// kFp8: (with kCache) K and V are e4m3 bytes in any cache layout, widened in
// shared memory by ConvertProducer (K not, for bf16 at head dims 128 and
// 256: Mainloop::kQkE4m3); the consumers apply the descales.
// Traits::kFp8In (Fp8FwdTraits, fp8_kernel.cuh): the FP8 prefill, Q, K and
// V^T e4m3 in shared memory, loaded by Producer; its q and k descales join
// the softmax's scale (Mainloop::run_tile, Epilogue::store).
template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kSplit, bool kCache = false,
          bool kFp8 = false>
__global__ void __launch_bounds__(Traits::kNThreads, 1) fwd_kernel(const __grid_constant__ FwdParams params) {
  using Element = typename Traits::Element;
  using Scheduler = KernelScheduler<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache>;
  static_assert(!(kSplit && kCache), "KV-cache calls are not split");
  static_assert(!kFp8 || kCache, "fp8 caches run on the KV-cache kernel");
  static_assert(!Traits::kCompactK || kFp8, "compact K stages hold an fp8 cache's e4m3 K");
  // The Q address broadcast (Mainloop's kUniformQ) where the kernel then
  // has neither more spilled bytes nor more LDL/STL than without
  // (docs/perf/sm90-short-calls.md): not in the fp8-cache kernels, head
  // dim 96's, the KV-cache ones of head dims 128 and 192, head dim 256's
  // with a left edge that are split or read a cache, or its 80-key ALiBi
  // kernel.
  constexpr int kHd = Traits::kHeadDim;
  constexpr bool kUniformQ = !kFp8 && kHd != 96 && !(kCache && (kHd == 128 || kHd == 192)) &&
                             !(kHd == 256 && kLeft && (kCache || kSplit)) &&
                             !(kHd == 256 && kScoreMod && !kLeft && Traits::kBlockN == 80);
  using Loop = Mainloop<Traits, kMasked, kLeft, kScoreMod, kCache, kFp8, kUniformQ>;
  const detail::FwdParams& p = params.common;

  // Where the head dim has a gather kernel of its own (gather_tile,
  // run_cache_kernel), gathered calls run on it alone and every other cache
  // call elsewhere: each kernel compiles one paged-cache producer.
  constexpr bool kGatherOnly = kCache && !kFp8 && Traits::kGatherKernel;
  constexpr bool kBoxesOnly = kCache && !kFp8 && gather_tile(Traits::kHeadDim).block_n != 0 && !Traits::kGatherKernel;

  // The KV-cache producer that gathers rows (four warps, or a kernel with
  // both paged producers) needs more registers than the dense one's single
  // thread: with two consumer warpgroups it takes 56 and they 224 (128 * 56
  // + 256 * 224 = 384 * 168, the CTA's launch allocation:
  // FwdTraits::kLaunchRegs); with fewer it spills inside the gather's copy
  // loop. Four warps issuing page boxes alone fit in 40 beside 232 (head
  // dim 256's consumers spill less than at 224; docs/perf/sm90-kv-cache.md).
  // An fp8 cache's producer (ConvertProducer) holds a block's looked-up
  // rows and a pair's e4m3 chunks and their widened values at once: it
  // takes 72 and the consumers 216 (at 56 it spills in the widening, and
  // at head dims 192 and 256 around its lookups; docs/perf/fp8-prefill.md).
  constexpr bool kWideProducer = kCache && Traits::kConsumerWarpgroups == 2 && !kBoxesOnly;
  constexpr bool kBoxes2 = kBoxesOnly && Traits::kConsumerWarpgroups == 2;
  constexpr bool kWidest = kWideProducer && kFp8;
  // A gather kernel of three consumer warpgroups: 56 and 152.
  constexpr bool kGather3 = kGatherOnly && Traits::kConsumerWarpgroups == 3;
  constexpr int kProducerRegs = kWidest ? 72 : kBoxes2 ? 40 : (kWideProducer || kGather3) ? 56 : Traits::kProducerRegs;
  constexpr int kConsumerRegs = kWidest ? 216 : kBoxes2 ? 232 : kWideProducer ? 224 : kGather3 ? 152 : Traits::kConsumerRegs;
  static_assert(128 * kProducerRegs + 128 * Traits::kConsumerWarpgroups * kConsumerRegs <=
                    Traits::kNThreads * Traits::kLaunchRegs,
                "register split exceeds the CTA's launch allocation");

  extern __shared__ unsigned char smem_raw[];
  const SmemLayout<Traits> smem(smem_raw);
  // Broadcast from lane 0, the index is warp-uniform to ptxas too, which
  // then keeps the branches on a warpgroup's rows (Loop::kPassHidden)
  // uniform and what they read off the vector registers; elsewhere the
  // broadcast costs more spills than it saves (docs/perf/sm90-short-calls.md).
  int warpgroup = threadIdx.x / kWarpgroupThreads;
  if constexpr (Loop::kPassHidden) warpgroup = __shfl_sync(0xffffffffu, warpgroup, 0);

  const Scheduler scheduler(p, smem.sched());
  scheduler.build(p);

  // A gathered or widened K/V block is complete when every producer thread has arrived.
  const bool per_thread_kv = kFp8 || (kCache && params.gather_kv);
  if (threadIdx.x == 0) smem.init_barriers(per_thread_kv ? kWarpgroupThreads : 1);
  if constexpr (Traits::kRowSumInO && Traits::kFp8In) {
    // The eight rows of e4m3 ones (0x38) after each V^T box's head-dim
    // rows, in every stage (kRowSumInO): P V's last eight columns.
    constexpr int kOnesRowBytes = 8 * Traits::kVtBoxCols;
    for (int i = threadIdx.x; i < Traits::kStages * Traits::kVtBoxes * kOnesRowBytes / 16; i += Traits::kNThreads) {
      const int chunk = i % (kOnesRowBytes / 16);
      const int box = (i / (kOnesRowBytes / 16)) % Traits::kVtBoxes;
      const int stage = i / (kOnesRowBytes / 16) / Traits::kVtBoxes;
      unsigned char* rows = smem.v_bytes(stage) + (box * Traits::kVtRows + Traits::kHeadDim) * Traits::kVtBoxCols;
      *reinterpret_cast<uint4*>(rows + 16 * chunk) = make_uint4(0x38383838u, 0x38383838u, 0x38383838u, 0x38383838u);
    }
    fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
  } else if constexpr (Traits::kRowSumInO) {
    // The ones block P V reads as its last eight columns (kRowSumInO).
    const uint32_t one2 = ptx::pack2<typename Loop::PVElement>(1.f, 1.f);
    for (int i = threadIdx.x; i < Traits::kOnesBytes / 16; i += Traits::kNThreads) {
      uint4 chunk = make_uint4(one2, one2, one2, one2);
      if constexpr (Loop::kAlibiMma) {
        // ALiBi's step (Mainloop::kAlibiMma) reads columns 16-31 as B: row
        // k holds k in 16-18 and zeros in 19-31 (16-byte chunks 2 and 3,
        // at chunk ^ (k % 8) in the 128-byte swizzle). Its A atoms
        // (columns 48-63 of rows 0-23) are written a tile at a time.
        static_assert(Loop::kAlibiKeyColumn == 16, "chunks 2 and 3");
        using E = typename Loop::AlibiElement;
        const int row = i / 8, logical = (i % 8) ^ (row % 8);
        const float k = static_cast<float>(row);
        if (logical == 2) chunk = make_uint4(ptx::pack2<E>(k, k), ptx::pack2<E>(k, 0.f), 0u, 0u);
        if (logical == 3) chunk = make_uint4(0u, 0u, 0u, 0u);
      }
      *reinterpret_cast<uint4*>(smem.ones_bytes() + 16 * i) = chunk;
    }
    fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
  }
  __syncthreads();

  if (warpgroup == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if constexpr (kFp8) {
      ConvertProducer<Traits>::run(params, scheduler, smem);
    } else if constexpr (kCache) {
      if constexpr (kGatherOnly) {
        GatherProducer<Traits>::run(params, scheduler, smem);
      } else if constexpr (kBoxesOnly) {
        CacheProducer<Traits>::run(params, scheduler, smem);
      } else if (params.gather_kv) {
        GatherProducer<Traits>::run(params, scheduler, smem);
      } else {
        CacheProducer<Traits>::run(params, scheduler, smem);
      }
    } else {
      if (threadIdx.x == 0) Producer<Traits>::run(params, scheduler, smem, scheduler.num_units(p));
    }
    return;
  }

  setmaxnreg_inc<kConsumerRegs>();
  // Counted on each side of the split: a value live into both would be
  // held on the producer's few registers (spilled).
  const int num_units = scheduler.num_units(p);
  const int wg = warpgroup - 1;
  const Loop loop(smem, p, wg, per_thread_kv);
  const Epilogue<Traits, kSplit, Loop::kMaskWords> epilogue(params, smem, wg);
  Turns<Loop::kPingpong, Traits::kConsumerWarpgroups> turns{wg};
  typename Loop::OTile o;
  OnlineSoftmax<1> softmax;

  int kv_count = 0;
  int q_count = 0;
  int slot = 0;
  for (int u = blockIdx.x; u < num_units; u += gridDim.x, ++slot) {
    for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
      const Tile tile = scheduler.tile(u, k, p, slot);
      if (tile.skip) continue;
      // O is zeroed where it starts to live: with kQkE4m3 after Q's split,
      // whose registers it would crowd.
      auto zero_o = [&] {
#pragma unroll
        for (int i = 0; i < Traits::kOCols / 2; ++i) o[i] = 0.f;
      };
      if constexpr (!Loop::kQkE4m3) zero_o();
      softmax = OnlineSoftmax<1>();
      // fp8: K's descale (the FP8 prefill: Q's times K's) scales the
      // scores, V's the stored O.
      float k_scale = 1.f, v_scale = 1.f;
      if constexpr (kFp8 || Traits::kFp8In) {
        const int64_t at = static_cast<int64_t>(tile.head / p.q_per_kv) * p.descale_head_stride;
        if constexpr (Traits::kFp8In) {
          if (p.q_descale != nullptr) k_scale = p.q_descale[at];
          if (p.k_descale != nullptr) k_scale *= p.k_descale[at];
        } else {
          if (p.k_descale != nullptr) k_scale = p.k_descale[at];
        }
        if (p.v_descale != nullptr) v_scale = p.v_descale[at];
      }
      const float sink = epilogue.sink_of(tile);
      if (tile.n_blocks > 0) {
        const RowRange<1> ranges = loop.row_ranges(tile);
        mbarrier_wait(smem.bar(Barrier::kQFull), q_count & 1);
        ++q_count;
        float row_scale[2] = {k_scale, k_scale};
        loop.convert_q(row_scale);
        if constexpr (Loop::kQkE4m3) zero_o();
        turns.open_once();
        const bool last_of_cta =
            Loop::kPingpong && !scheduler.template has_work_after<kCache>(u, k, num_units, p, slot);
        if constexpr (Loop::kPassHidden) {
          // The warpgroup passes over the top blocks none of its rows sees,
          // and runs the rest as a tile of its own.
          const int hidden = loop.hidden_top_blocks(tile);
          loop.pass_blocks(hidden, kv_count, turns, last_of_cta && hidden == tile.n_blocks);
          if (hidden < tile.n_blocks) {
            Tile rest = tile;
            rest.n_blocks -= hidden;
            loop.template run_tile<kFp8>(rest, ranges, kv_count + hidden, o, softmax, turns, last_of_cta, row_scale);
          } else if constexpr (Loop::kEarlyQ) {
            loop.release_q();
          }
        } else {
          loop.template run_tile<kFp8>(tile, ranges, kv_count, o, softmax, turns, last_of_cta, row_scale);
        }
        kv_count += tile.n_blocks;
      } else if constexpr (Loop::kQkE4m3) {
        zero_o();
      }
      epilogue.store(tile, kSplit ? Scheduler::split_of(u, p) : 0, o, softmax, v_scale,
                     Traits::kFp8In ? k_scale : 1.f, sink);
    }
  }
  epilogue.drain();
}

}  // namespace flash::sm90
