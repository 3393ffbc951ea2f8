// FlashAttention forward for Hopper (sm_90a): persistent, warp-specialised,
// TMA-fed, wgmma-computed.
//
// The grid holds at most one CTA per SM; each CTA walks a static list of
// tiles (one tile = kBlockM query rows of one (batch, head)), heaviest
// causal tiles first. Warpgroup 0 is the producer: one thread loads each
// tile's Q_i and streams its K_j/V_j blocks through kStages-deep
// shared-memory rings with the bulk tensor copy engine, each load
// completing on a "full" mbarrier; the rings run on across tiles, so the
// next tile's first blocks load while this tile finishes. Every other
// warpgroup is a consumer owning 64 query rows: S = Q_i K_j^T by wgmma
// from shared memory, the online softmax on the fp32 accumulators in
// registers, then O += P V_j by wgmma with P straight from registers; a
// consumer warp arrives on a stage's "empty" mbarrier once its GEMM has read
// it. S_{j+1} is issued together with P_j V_j so the softmax of one block
// runs under the other's tensor-core work, and the consumer warpgroups take
// turns issuing (pingpong) so one's softmax also overlaps the other's GEMMs
// (all but head_dim 256's unmasked kernels: FwdTraits::kPingpong).
// At head_dim 64 P V also yields the row sums (FwdTraits::kRowSumInO).
// Blocks are visited from the last visible one down (masked first); blocks
// wholly hidden by the causal or window mask are never loaded. The epilogue stages O
// through shared memory and writes it with a TMA store, which clips the
// ragged tail (in a buffer of its own where shared memory has room, else in
// Q's).
#pragma once

#include <cstdint>

#include "../common/mask.cuh"
#include "../common/ptx.cuh"
#include "../common/softmax.cuh"
#include "kernel_traits.cuh"
#include "params.h"
#include "ptx_sm90.cuh"
#include "tile_scheduler.cuh"
#include "wgmma_ops.cuh"

namespace flash::sm90 {

// kMasked: a causal or sliding-window mask (window from the parameters,
// causal = (-1, 0)); else only the ragged tail. kLeft: the window has a left
// edge (window_left >= 0); without one the left-edge work is compiled out.
// kSoftcap: scores pass through the logit softcap (Softcap, mask.cuh) before
// the mask and the softmax.
template <typename Traits, bool kMasked, bool kLeft, bool kSoftcap>
__global__ void __launch_bounds__(Traits::kNThreads, 1) fwd_kernel(const __grid_constant__ FwdParams params) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  const detail::FwdParams& p = params.common;
  using Scheduler = TileScheduler<kMasked, kLeft, kBlockM, kBlockN, Traits::kSchedSeqs, Traits::kNThreads>;

  extern __shared__ unsigned char smem_raw[];
  // SWIZZLE_128B tiles need 1024-byte alignment; kSmemBytes has the slack.
  const uint32_t smem_base = (ptx::smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* const smem_ptr = smem_raw + (smem_base - ptx::smem_addr(smem_raw));
  const uint32_t smem_q = smem_base + Traits::kQOffset;
  const uint32_t smem_o = smem_base + Traits::kOOffset;
  auto smem_k = [&](int stage) { return smem_base + Traits::kKOffset + stage * Traits::kKVBytes; };
  auto smem_v = [&](int stage) { return smem_base + Traits::kVOffset + stage * Traits::kKVBytes; };
  const uint32_t bar_q_full = smem_base + Traits::kBarrierOffset;
  const uint32_t bar_q_empty = bar_q_full + 8;
  auto bar_k_full = [&](int stage) { return bar_q_full + 8 * (2 + stage); };
  auto bar_v_full = [&](int stage) { return bar_q_full + 8 * (2 + kStages + stage); };
  auto bar_k_empty = [&](int stage) { return bar_q_full + 8 * (2 + 2 * kStages + stage); };
  auto bar_v_empty = [&](int stage) { return bar_q_full + 8 * (2 + 3 * kStages + stage); };
  // The j-th K/V block a CTA handles (counted across its tiles) sits in
  // stage j % kStages, in that stage's (j / kStages)-th use.
  auto stage_of = [](int j) { return j % kStages; };
  auto parity_of = [](int j) { return static_cast<uint32_t>((j / kStages) & 1); };

  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  const Scheduler scheduler(p, reinterpret_cast<int*>(smem_ptr + Traits::kSchedOffset));
  scheduler.build(p);
  const int num_units = scheduler.num_units(p);

  if (threadIdx.x == 0) {
    mbarrier_init(bar_q_full, 1);
    mbarrier_init(bar_q_empty, Traits::kConsumerWarps);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(bar_k_full(s), 1);
      mbarrier_init(bar_v_full(s), 1);
      mbarrier_init(bar_k_empty(s), Traits::kConsumerWarps);
      mbarrier_init(bar_v_empty(s), Traits::kConsumerWarps);
    }
    fence_barrier_init();
  }
  if constexpr (Traits::kRowSumInO) {
    // The ones block P V reads as its last eight columns (kRowSumInO).
    const uint32_t one2 = ptx::pack2<Element>(1.f, 1.f);
    for (int i = threadIdx.x; i < Traits::kOnesBytes / 16; i += Traits::kNThreads) {
      *reinterpret_cast<uint4*>(smem_ptr + Traits::kOnesOffset + 16 * i) = make_uint4(one2, one2, one2, one2);
    }
    fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer
    setmaxnreg_dec<Traits::kProducerRegs>();
    if (threadIdx.x == 0) {
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
          // Wait until the consumers are done with the previous tile's Q.
          mbarrier_wait(bar_q_empty, (q_count & 1) ^ 1);
          ++q_count;
          // Q in one 64-row box per consumer warpgroup. A masked call's block
          // 0 may start at a negative row (first_row), with whole warpgroups
          // of padding rows: those are not loaded (their rows compute on
          // whatever the buffer holds and are never stored), so no TMA copy
          // starts at a negative row (a store there faults; a load there
          // worked, and measured no slower, but is not relied on).
          const int q_slices_skipped = tile.row_begin < 0 ? -tile.row_begin / 64 : 0;
          mbarrier_arrive_expect_tx(bar_q_full, Traits::kQBytes / Traits::kConsumerWarpgroups *
                                                    (Traits::kConsumerWarpgroups - q_slices_skipped));
#pragma unroll
          for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
#pragma unroll
            for (int slice = 0; slice < Traits::kConsumerWarpgroups; ++slice) {
              if (slice < q_slices_skipped) continue;
              tma_load_4d(smem_q + cb * kBlockM * 128 + slice * 64 * 128, &params.tma_q, bar_q_full, cb * 64,
                          tile.q_row + slice * 64, tile.head, tile.q_batch);
            }
          }
          for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
            const int n_block = tile.n_first + tile.n_blocks - 1 - i;
            const int stage = stage_of(kv_count);
            // Parity of the stage's previous use; a stage's first use passes at once.
            const uint32_t empty_parity = parity_of(kv_count) ^ 1;
            mbarrier_wait(bar_k_empty(stage), empty_parity);
            mbarrier_arrive_expect_tx(bar_k_full(stage), Traits::kKVBytes);
#pragma unroll
            for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
              tma_load_4d(smem_k(stage) + cb * kBlockN * 128, &params.tma_k, bar_k_full(stage), cb * 64,
                          tile.k_row + n_block * kBlockN, head_kv, tile.k_batch);
            }
            mbarrier_wait(bar_v_empty(stage), empty_parity);
            mbarrier_arrive_expect_tx(bar_v_full(stage), Traits::kKVBytes);
#pragma unroll
            for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
              tma_load_4d(smem_v(stage) + cb * kBlockN * 128, &params.tma_v, bar_v_full(stage), cb * 64,
                          tile.k_row + n_block * kBlockN, head_kv, tile.k_batch);
            }
          }
        }
      }
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  setmaxnreg_inc<Traits::kConsumerRegs>();
  constexpr int kCWG = Traits::kConsumerWarpgroups;
  const int wg = warpgroup - 1;                   // consumer index: rows [64 wg, 64 wg + 64) of a tile
  const int warp_in_wg = (threadIdx.x / 32) % 4;  // 16 rows each
  const int wg_thread = threadIdx.x % 128;
  const uint32_t smem_q_wg = smem_q + wg * 64 * 128;
  const uint32_t smem_o_wg = smem_o + wg * 64 * 128;

  // O, and with kRowSumInO the row sums in its last eight columns.
  constexpr int kOCols = Traits::kOCols;
  float o[kOCols / 2];
  // The wgmma accumulator of an m64nN tile, seen per warp, is N/8 m16n8
  // accumulator fragments side by side: the layout OnlineSoftmax expects.
  auto& o_frag = *reinterpret_cast<float(*)[1][kOCols / 8][4]>(&o);
  OnlineSoftmax<1> softmax;

  // S = Q_i K_j^T: both operands K-major; K advances 16 elements (32 bytes)
  // inside a 128-byte swizzle row, then to the next column block.
  //
  // kDescriptorAdd: keep a pingpong turn short, since the other
  // warpgroups wait for it: each wgmma's descriptor is one add on a
  // descriptor built once per GEMM (Q's once per kernel) rather than
  // rebuilt in full (~5 instructions a wgmma). (O's rescale is also kept
  // out of the turn: see the steady loop.)
  // Measured (bench/NOTES.md): with the rescale moved too, causal 2k
  // +2-3% at hd128 and hd256, the rest within ±1%, but hd64 non-causal -2%
  // (run 79); hd64 with each part alone: the descriptors -2 to -5%, the
  // rescale -1.4% to +1.8%, the spread (runs 102, 104). So hd64 rebuilds
  // its descriptors.
  constexpr bool kDescriptorAdd = kHeadDim != 64;
  const uint64_t desc_q = smem_descriptor(smem_q_wg, 0);
  auto issue_qk = [&](int stage, float(&s)[kBlockN / 2]) {
    const uint64_t desc_k = smem_descriptor(smem_k(stage), 0);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t q_offset = (kk / 4) * kBlockM * 128 + (kk % 4) * 32;
      const uint32_t k_offset = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      if constexpr (kDescriptorAdd) {
        wgmma_ss<kBlockN, 0, Element>(s, smem_descriptor_at(desc_q, q_offset), smem_descriptor_at(desc_k, k_offset),
                                      kk > 0 ? 1 : 0);
      } else {
        wgmma_ss<kBlockN, 0, Element>(s, smem_descriptor(smem_q_wg + q_offset, 0),
                                      smem_descriptor(smem_k(stage) + k_offset, 0), kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
  };
  // O += P V_j: V is N-major for this GEMM (keys are rows, head_dim is
  // contiguous); 16 keys are 16 swizzled rows, 2048 bytes.
  // With kRowSumInO the second column block is the ones block, however far
  // from this stage it lies.
  auto v_lead_bytes = [&](int stage) {
    return Traits::kRowSumInO ? smem_base + Traits::kOnesOffset - smem_v(stage) : kBlockN * 128;
  };
  auto issue_pv = [&](int stage, const uint32_t(&pa)[kBlockN / 16][4]) {
    const uint64_t desc_v = smem_descriptor(smem_v(stage), v_lead_bytes(stage));
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      if constexpr (kDescriptorAdd) {
        wgmma_rs<kOCols, 1, Element>(o, pa[kk], smem_descriptor_at(desc_v, kk * 16 * 128), 1);
      } else {
        wgmma_rs<kOCols, 1, Element>(o, pa[kk], smem_descriptor(smem_v(stage) + kk * 16 * 128, v_lead_bytes(stage)),
                                     1);
      }
    }
    wgmma_commit();
  };
  // Mask (only the blocks that need it), then the online softmax on S.
  // The keys [cols.begin[hi], cols.limit[hi]) this thread's two rows of the
  // tile see, computed once per tile (begin is 0 unmasked).
  struct RowCols {
    int begin[2], limit[2];
  };
  auto row_cols = [&](const Tile& tile) {
    RowCols c;
    const WindowMask<kMasked, kLeft> mask(tile.len_q, tile.len_k, p.window_left, p.window_right);
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = tile.row_begin + wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
      c.begin[hi] = mask.col_begin(row);
      c.limit[hi] = mask.col_limit(row);
    }
    return c;
  };
  // Returns whether O must be rescaled by `correction`: with the lazy max
  // (Traits::kLazyMax) most blocks leave the max, and O, alone.
  auto softmax_step = [&](const Tile& tile, const RowCols& cols, float(&s)[kBlockN / 2], int n_block,
                          float(&correction)[2]) {
    auto& s_frag = *reinterpret_cast<float(*)[1][kBlockN / 8][4]>(&s);
    Softcap<kSoftcap>{p.softcap_prescale}.apply(s_frag);
    if (n_block >= tile.unmasked_end || n_block < tile.unmasked_begin) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int begin = cols.begin[hi] - n_block * kBlockN;
        const int limit = cols.limit[hi] - n_block * kBlockN;
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = nt * 8 + (lane % 4) * 2 + e;
            if (col >= limit || (kLeft && col < begin)) s_frag[0][nt][2 * hi + e] = -INFINITY;
          }
        }
      }
    }
    return softmax.template update<Traits::kLazyMax, Traits::kLseSums>(s_frag, p.softmax_scale_log2, correction);
  };
  // P as the register A operand: per 16 keys, two adjacent n8 fragments.
  auto convert_p = [&](const float(&s)[kBlockN / 2], uint32_t(&pa)[kBlockN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = ptx::pack2<Element>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }
  };
  // With O staged in its own buffer, Q is free once the tile's last S is done.
  constexpr bool kEarlyQ = Traits::kSeparateO;
  auto release_q = [&] {
    if (lane == 0) mbarrier_arrive(bar_q_empty);
  };

  // Pingpong (where Traits::kPingpong): consumer warpgroups take turns
  // issuing their GEMMs; elsewhere these are no-ops. Turn w is
  // named barrier kTurnBarrier + w, completed by warpgroup w (sync) and its
  // predecessor (arrive). The rotation runs on across this CTA's tiles, so a
  // warpgroup starts its next tile without waiting for the others to finish
  // their epilogues: the last warpgroup opens the very first turn and skips
  // only its very last arrive, so every barrier sees matched counts.
  constexpr int kTurnBarrier = 4;
  constexpr bool kPingpong = Traits::template kPingpong<kMasked>;
  auto turn_begin = [&] {
    if constexpr (kPingpong) named_barrier_sync(kTurnBarrier + wg, 256);
  };
  auto turn_end = [&](bool last_of_cta) {
    if constexpr (kPingpong) {
      if (!(last_of_cta && wg == kCWG - 1)) named_barrier_arrive(kTurnBarrier + (wg + 1) % kCWG, 256);
    }
  };
  // Whether any tile after (u, k) in this CTA's walk has work.
  auto work_after = [&](int u, int k) {
    // Dense, with no left window edge and no more queries than keys: every
    // row sees a key (this tile's do, so seqlen_k > 0), so every tile has
    // work and only the walk's length matters (an unmasked unit is one
    // tile). Measured (bench/NOTES.md): +2.5% at hd128 non-causal N = 2k,
    // where this was the tile boundary's longest integer work (run 83), and
    // +1% to +4.5% on causal calls at N = 2k (run 84).
    // (Not compiled where the window has a left edge: ptxas spilled more.)
    if (!kLeft && p.cu_seqlens_q == nullptr && p.cu_seqlens_k == nullptr &&
        (!kMasked || p.seqlen_k >= p.seqlen_q)) {
      return k + 1 < scheduler.tiles_in_unit(u, p) || u + static_cast<int>(gridDim.x) < num_units;
    }
    for (int k2 = k + 1; k2 < scheduler.tiles_in_unit(u, p); ++k2) {
      if (scheduler.tile(u, k2, p).n_blocks > 0) return true;
    }
    for (int u2 = u + gridDim.x; u2 < num_units; u2 += gridDim.x) {
      for (int k2 = 0; k2 < scheduler.tiles_in_unit(u2, p); ++k2) {
        if (scheduler.tile(u2, k2, p).n_blocks > 0) return true;
      }
    }
    return false;
  };
  bool opened = false;

  int kv_count = 0;
  int q_count = 0;
  for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
    for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
      const Tile tile = scheduler.tile(u, k, p);
      if (tile.skip) continue;
#pragma unroll
      for (int i = 0; i < kOCols / 2; ++i) o[i] = 0.f;
      softmax = OnlineSoftmax<1>();

      if (tile.n_blocks > 0) {
        const int n = tile.n_blocks;
        const RowCols cols = row_cols(tile);
        mbarrier_wait(bar_q_full, q_count & 1);
        ++q_count;
        if (kPingpong && !opened && wg == kCWG - 1) named_barrier_arrive(kTurnBarrier, 256);
        opened = true;
        const bool last_tile = kPingpong && !work_after(u, k);

        // The tile's first block: S only.
        float s[kBlockN / 2];
        float correction[2];
        uint32_t pa[kBlockN / 16][4];
        mbarrier_wait(bar_k_full(stage_of(kv_count)), parity_of(kv_count));
        turn_begin();
        wgmma_fence();
        issue_qk(stage_of(kv_count), s);
        turn_end(last_tile && n == 1);
        wgmma_wait<0>();
        fence_registers(s);
        if (lane == 0) mbarrier_arrive(bar_k_empty(stage_of(kv_count)));
        if (kEarlyQ && n == 1) release_q();
        bool rescale_o = softmax_step(tile, cols, s, tile.n_first + n - 1, correction);
        convert_p(s, pa);

        // Steady state: issue S_i = Q K_i^T and O += P_{i-1} V_{i-1} together,
        // then run S_i's softmax while P V is still on the tensor cores.
        for (int i = 1; i < n; ++i) {
          const int cur = kv_count + i;
          const int prev = cur - 1;
          mbarrier_wait(bar_k_full(stage_of(cur)), parity_of(cur));
          turn_begin();
          wgmma_fence();
          issue_qk(stage_of(cur), s);
          mbarrier_wait(bar_v_full(stage_of(prev)), parity_of(prev));
          wgmma_fence();
          issue_pv(stage_of(prev), pa);
          turn_end(last_tile && i == n - 1);
          wgmma_wait<1>();
          fence_registers(s);
          if (lane == 0) mbarrier_arrive(bar_k_empty(stage_of(cur)));
          if (kEarlyQ && i == n - 1) release_q();
          rescale_o = softmax_step(tile, cols, s, tile.n_first + n - 1 - i, correction);
          wgmma_wait<0>();
          fence_registers(o);
          if (lane == 0) mbarrier_arrive(bar_v_empty(stage_of(prev)));
          convert_p(s, pa);
          // O, idle now, takes block i's max before P_i V_i adds to it:
          // here, outside the pingpong turn, rather than in the next one
          // (after the first block O is still zero, so that block needs none).
          if (rescale_o) OnlineSoftmax<1>::rescale(o_frag, correction);
        }

        // The last block's P V.
        const int last = kv_count + n - 1;
        mbarrier_wait(bar_v_full(stage_of(last)), parity_of(last));
        wgmma_fence();
        issue_pv(stage_of(last), pa);
        wgmma_wait<0>();
        fence_registers(o);
        if (lane == 0) mbarrier_arrive(bar_v_empty(stage_of(last)));
        kv_count += n;
      }

      // ---------------------------------------------------------------- epilogue
      float inv_l[2];
      float lse[2];
      if constexpr (Traits::kRowSumInO) {
        // O's columns 64-71 hold each row's whole sum (no quad reduction),
        // of P as rounded for the GEMM, so O is normalised by the sum of
        // the very weights its numerator used, whether or not the call
        // wants the log-sum-exp. That sum is no good for the float32
        // log-sum-exp, though (a bf16 P is off by up to 2^-9; the tests'
        // 1e-3 failed), which takes the softmax's float32 sums.
        const float sums[2] = {o_frag[0][kHeadDim / 8][0], o_frag[0][kHeadDim / 8][2]};
        softmax.finalize_sums(sums, p.softmax_scale, inv_l, lse);
        if constexpr (Traits::kLseSums) {
          float unused[2];
          softmax.finalize(p.softmax_scale, unused, lse);
        }
      } else {
        softmax.finalize(p.softmax_scale, inv_l, lse);
      }

      if (tile.n_blocks == 0) {
        // No key visible to any row (a window or len_k = 0): zeros, stored
        // from registers (o = 0, inv_l = 0); Q was never loaded for this
        // tile, so no shared memory is touched.
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int row = tile.row_begin + wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
          if (row < 0 || row >= tile.len_q) continue;
          Element* o_row = static_cast<Element*>(p.o) + tile.o_offset + tile.head * p.o_head_stride +
                           static_cast<int64_t>(row) * p.o_seq_stride;
#pragma unroll
          for (int nt = 0; nt < kHeadDim / 8; ++nt) {
            *reinterpret_cast<uint32_t*>(o_row + nt * 8 + (lane % 4) * 2) =
                ptx::pack2<Element>(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
          }
        }
      } else {
        if constexpr (Traits::kSeparateO) {
          // This warpgroup's previous TMA store must be done reading its staging rows.
          if (wg_thread == 0) tma_store_wait_read();
          named_barrier_sync(1 + wg, 128);
        }
        // Rounded O into the staging rows, in the swizzled layout of the O tensor map.
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int row = wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
#pragma unroll
          for (int nt = 0; nt < kHeadDim / 8; ++nt) {
            const int cb = nt / 8;
            const int chunk = (nt % 8) ^ (row % 8);
            const uint32_t packed =
                ptx::pack2<Element>(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
            *reinterpret_cast<uint32_t*>(smem_ptr + Traits::kOOffset + cb * kBlockM * 128 + row * 128 + chunk * 16 +
                                         (lane % 4) * 4) = packed;
          }
        }
        if (p.cu_seqlens_q != nullptr) {
          // Varlen: a TMA store would also write the rows past this
          // sequence's end, which belong to the next one; 16-byte stores of
          // the rows it has instead.
          named_barrier_sync(1 + wg, 128);
          constexpr int kChunks = kHeadDim / 8;
          Element* o_base = static_cast<Element*>(p.o) + tile.o_offset + tile.head * p.o_head_stride;
          for (int idx = wg_thread; idx < 64 * kChunks; idx += 128) {
            const int r = idx / kChunks;
            const int c = idx % kChunks;
            const int row = tile.row_begin + wg * 64 + r;
            if (row < 0 || row >= tile.len_q) continue;
            const uint4 val = *reinterpret_cast<const uint4*>(smem_ptr + Traits::kOOffset + (c / 8) * kBlockM * 128 +
                                                              (wg * 64 + r) * 128 + ((c % 8) ^ (r % 8)) * 16);
            *reinterpret_cast<uint4*>(o_base + static_cast<int64_t>(row) * p.o_seq_stride + c * 8) = val;
          }
        } else {
          fence_proxy_async_smem();
          named_barrier_sync(1 + wg, 128);
          // A masked call's block 0 may start at a negative row (first_row):
          // then a warpgroup's 64 rows are either all there or all padding.
          if (wg_thread == 0 && tile.row_begin + wg * 64 >= 0) {
#pragma unroll
            for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
              tma_store_4d(&params.tma_o, smem_o_wg + cb * kBlockM * 128, cb * 64, tile.row_begin + wg * 64,
                           tile.head, tile.batch);
            }
            tma_store_commit();
          }
        }
        if constexpr (!kEarlyQ) {
          // O was staged in the Q tile: hand Q back only once the store has read it.
          if (wg_thread == 0) tma_store_wait_read();
          named_barrier_sync(1 + wg, 128);
          release_q();
        }
      }

      if (p.lse != nullptr && lane % 4 == 0) {
        // Dense: [batch, heads_q, seqlen_q]; varlen: [heads_q, total_q].
        float* lse_row = p.cu_seqlens_q != nullptr
                             ? p.lse + static_cast<int64_t>(tile.head) * p.cu_seqlens_q[p.batch] + tile.q_start
                             : p.lse + (static_cast<int64_t>(tile.batch) * p.heads_q + tile.head) * p.seqlen_q;
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int row = tile.row_begin + wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
          if (row >= 0 && row < tile.len_q) lse_row[row] = lse[hi];
        }
      }
    }
  }
  // Outstanding TMA stores must finish before the CTA's shared memory goes away.
  if (wg_thread == 0) tma_store_wait_all();
}

}  // namespace flash::sm90
