// FlashAttention forward for Hopper (sm_90a): warp-specialised, TMA-fed,
// wgmma-computed.
//
// One CTA owns kBlockM query rows of one (batch, head). Warpgroup 0 is the
// producer: one thread loads Q_i once and streams K_j and V_j through
// kStages-deep shared-memory rings with the bulk tensor copy engine, each
// load completing on a "full" mbarrier. Every other warpgroup is a consumer
// owning 64 query rows: S = Q_i K_j^T by wgmma from shared memory, the
// online softmax on the fp32 accumulators in registers, then O += P V_j by
// wgmma with P straight from registers; after each GEMM a consumer warp
// arrives on the stage's "empty" mbarrier so the producer may refill it.
// Blocks are visited from the last visible one down (masked blocks first,
// then unmasked ones); blocks wholly hidden by the causal mask are never
// loaded. The epilogue stages O through the consumer's own rows of the Q
// tile and writes it with a TMA store, which clips the ragged tail.
#pragma once

#include <cstdint>

#include "../common/mask.cuh"
#include "../common/ptx.cuh"
#include "../common/softmax.cuh"
#include "kernel_traits.cuh"
#include "params.h"
#include "ptx_sm90.cuh"
#include "wgmma_ops.cuh"

namespace flash::sm90 {

template <typename Traits, bool kIsCausal>
__global__ void __launch_bounds__(Traits::kNThreads, 1) fwd_kernel(const __grid_constant__ FwdParams params) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  const detail::FwdParams& p = params.common;

  extern __shared__ unsigned char smem_raw[];
  // SWIZZLE_128B tiles need 1024-byte alignment; kSmemBytes has the slack.
  const uint32_t smem_base = (ptx::smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* const smem_ptr = smem_raw + (smem_base - ptx::smem_addr(smem_raw));
  const uint32_t smem_q = smem_base + Traits::kQOffset;
  auto smem_k = [&](int stage) { return smem_base + Traits::kKOffset + stage * Traits::kKVBytes; };
  auto smem_v = [&](int stage) { return smem_base + Traits::kVOffset + stage * Traits::kKVBytes; };
  const uint32_t bar_q_full = smem_base + Traits::kBarrierOffset;
  auto bar_k_full = [&](int stage) { return bar_q_full + 8 * (1 + stage); };
  auto bar_v_full = [&](int stage) { return bar_q_full + 8 * (1 + kStages + stage); };
  auto bar_k_empty = [&](int stage) { return bar_q_full + 8 * (1 + 2 * kStages + stage); };
  auto bar_v_empty = [&](int stage) { return bar_q_full + 8 * (1 + 3 * kStages + stage); };

  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  // Longest (causal: bottom) query blocks first, so short ones fill the tail.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int head_kv = head / p.q_per_kv;
  const int row_begin = m_block * kBlockM;
  const int row_end = min(row_begin + kBlockM, p.seqlen_q);

  const CausalTailMask<kIsCausal> mask(p.seqlen_q, p.seqlen_k);
  const int n_blocks = mask.template num_visible_blocks<kBlockN>(row_begin, row_end);
  const int n_unmasked = min(n_blocks, mask.template num_unmasked_blocks<kBlockN>(row_begin, row_end));

  if (threadIdx.x == 0) {
    mbarrier_init(bar_q_full, 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(bar_k_full(s), 1);
      mbarrier_init(bar_v_full(s), 1);
      mbarrier_init(bar_k_empty(s), Traits::kConsumerWarps);
      mbarrier_init(bar_v_empty(s), Traits::kConsumerWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer
    setmaxnreg_dec<Traits::kProducerRegs>();
    if (threadIdx.x == 0 && n_blocks > 0) {
      prefetch_tensormap(&params.tma_q);
      prefetch_tensormap(&params.tma_k);
      prefetch_tensormap(&params.tma_v);
      mbarrier_arrive_expect_tx(bar_q_full, Traits::kQBytes);
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
        tma_load_4d(smem_q + cb * kBlockM * 128, &params.tma_q, bar_q_full, cb * 64, row_begin, head, batch);
      }
      for (int i = 0; i < n_blocks; ++i) {
        const int n_block = n_blocks - 1 - i;
        const int stage = i % kStages;
        // Parity of the previous use of this stage; the first round passes at once.
        const uint32_t empty_parity = ((i / kStages) & 1) ^ 1;
        mbarrier_wait(bar_k_empty(stage), empty_parity);
        mbarrier_arrive_expect_tx(bar_k_full(stage), Traits::kKVBytes);
#pragma unroll
        for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
          tma_load_4d(smem_k(stage) + cb * kBlockN * 128, &params.tma_k, bar_k_full(stage), cb * 64,
                      n_block * kBlockN, head_kv, batch);
        }
        mbarrier_wait(bar_v_empty(stage), empty_parity);
        mbarrier_arrive_expect_tx(bar_v_full(stage), Traits::kKVBytes);
#pragma unroll
        for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
          tma_load_4d(smem_v(stage) + cb * kBlockN * 128, &params.tma_v, bar_v_full(stage), cb * 64,
                      n_block * kBlockN, head_kv, batch);
        }
      }
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  setmaxnreg_inc<Traits::kConsumerRegs>();
  const int wg = warpgroup - 1;                   // consumer index: rows [64 wg, 64 wg + 64) of the block
  const int warp_in_wg = (threadIdx.x / 32) % 4;  // 16 rows each
  const int wg_thread = threadIdx.x % 128;
  const uint32_t smem_q_wg = smem_q + wg * 64 * 128;

  float o[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.f;
  OnlineSoftmax<1> softmax;
  // The wgmma accumulator of an m64nN tile, seen per warp, is N/8 m16n8
  // accumulator fragments side by side: the layout OnlineSoftmax expects.
  auto& o_frag = *reinterpret_cast<float(*)[1][kHeadDim / 8][4]>(&o);

  // S = Q_i K_j^T: both operands K-major; K advances 16 elements (32 bytes)
  // inside a 128-byte swizzle row, then to the next column block.
  auto issue_qk = [&](int stage, float (&s)[kBlockN / 2]) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint64_t desc_q = smem_descriptor(smem_q_wg + (kk / 4) * kBlockM * 128 + (kk % 4) * 32, 0);
      const uint64_t desc_k = smem_descriptor(smem_k(stage) + (kk / 4) * kBlockN * 128 + (kk % 4) * 32, 0);
      wgmma_ss<kBlockN, 0, Element>(s, desc_q, desc_k, kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  // O += P V_j: V is N-major for this GEMM (keys are rows, head_dim is
  // contiguous); 16 keys are 16 swizzled rows, 2048 bytes.
  auto issue_pv = [&](int stage, const uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t desc_v = smem_descriptor(smem_v(stage) + kk * 16 * 128, kBlockN * 128);
      wgmma_rs<kHeadDim, 1, Element>(o, pa[kk], desc_v, 1);
    }
    wgmma_commit();
  };
  // Mask (only blocks that need it), then the online softmax on S.
  auto softmax_step = [&](float (&s)[kBlockN / 2], int n_block, float (&correction)[2]) {
    auto& s_frag = *reinterpret_cast<float(*)[1][kBlockN / 8][4]>(&s);
    if (n_block >= n_unmasked) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int row = row_begin + wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
        const int limit = mask.col_limit(row) - n_block * kBlockN;
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (nt * 8 + (lane % 4) * 2 + e >= limit) s_frag[0][nt][2 * hi + e] = -INFINITY;
          }
        }
      }
    }
    softmax.update(s_frag, p.softmax_scale_log2, correction);
  };
  // P as the register A operand: per 16 keys, two adjacent n8 fragments.
  auto convert_p = [&](const float (&s)[kBlockN / 2], uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = ptx::pack2<Element>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    }
  };

  // Pingpong: consumer warpgroups take turns issuing their GEMMs, so one's
  // softmax runs while the tensor cores work on another's. Turn w is named
  // barrier kTurnBarrier + w, completed by warpgroup w (sync) and its
  // predecessor (arrive). The last warpgroup opens the first turn and skips
  // its final arrive, so every barrier sees matched counts.
  constexpr int kTurnBarrier = 4;
  constexpr int kCWG = Traits::kConsumerWarpgroups;
  auto turn_begin = [&] { named_barrier_sync(kTurnBarrier + wg, 256); };
  auto turn_end = [&](bool last) {
    if (!(last && wg == kCWG - 1)) named_barrier_arrive(kTurnBarrier + (wg + 1) % kCWG, 256);
  };

  if (n_blocks > 0) {
    mbarrier_wait(bar_q_full, 0);
    if (wg == kCWG - 1) named_barrier_arrive(kTurnBarrier, 256);

    // Block 0 of the walk: S only.
    float s[kBlockN / 2];
    float correction[2];
    uint32_t pa[kBlockN / 16][4];
    mbarrier_wait(bar_k_full(0), 0);
    turn_begin();
    wgmma_fence();
    issue_qk(0, s);
    turn_end(n_blocks == 1);
    wgmma_wait<0>();
    fence_registers(s);
    if (lane == 0) mbarrier_arrive(bar_k_empty(0));
    softmax_step(s, n_blocks - 1, correction);
    convert_p(s, pa);

    // Steady state: issue S_i = Q K_i^T and O += P_{i-1} V_{i-1} together,
    // then run S_i's softmax while the P V product is still on the tensor cores.
    for (int i = 1; i < n_blocks; ++i) {
      const int stage = i % kStages;
      const int prev = (i - 1) % kStages;
      mbarrier_wait(bar_k_full(stage), (i / kStages) & 1);
      turn_begin();
      wgmma_fence();
      issue_qk(stage, s);
      mbarrier_wait(bar_v_full(prev), ((i - 1) / kStages) & 1);
      OnlineSoftmax<1>::rescale(o_frag, correction);
      wgmma_fence();
      issue_pv(prev, pa);
      turn_end(i == n_blocks - 1);
      wgmma_wait<1>();
      fence_registers(s);
      if (lane == 0) mbarrier_arrive(bar_k_empty(stage));
      softmax_step(s, n_blocks - 1 - i, correction);
      wgmma_wait<0>();
      fence_registers(o);
      if (lane == 0) mbarrier_arrive(bar_v_empty(prev));
      convert_p(s, pa);
    }

    // The last block's P V.
    const int last = (n_blocks - 1) % kStages;
    mbarrier_wait(bar_v_full(last), ((n_blocks - 1) / kStages) & 1);
    OnlineSoftmax<1>::rescale(o_frag, correction);
    wgmma_fence();
    issue_pv(last, pa);
    wgmma_wait<0>();
    fence_registers(o);
    if (lane == 0) mbarrier_arrive(bar_v_empty(last));
  }

  // ------------------------------------------------------------------ epilogue
  float inv_l[2];
  float lse[2];
  softmax.finalize(p.softmax_scale, inv_l, lse);

  // This warpgroup's rows of the Q tile are free: its last S wgmma has
  // completed. Write O there in the swizzled layout the O tensor map expects.
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int row = wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      const int cb = nt / 8;
      const int chunk = (nt % 8) ^ (row % 8);
      const uint32_t packed = ptx::pack2<Element>(o_frag[0][nt][2 * hi] * inv_l[hi], o_frag[0][nt][2 * hi + 1] * inv_l[hi]);
      *reinterpret_cast<uint32_t*>(smem_ptr + Traits::kQOffset + cb * kBlockM * 128 + row * 128 + chunk * 16 +
                                   (lane % 4) * 4) = packed;
    }
  }
  fence_proxy_async_smem();
  named_barrier_sync(1 + wg, 128);
  if (wg_thread == 0) {
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      tma_store_4d(&params.tma_o, smem_q_wg + cb * kBlockM * 128, cb * 64, row_begin + wg * 64, head, batch);
    }
    tma_store_commit();
    tma_store_wait_read();
  }

  if (p.lse != nullptr && lane % 4 == 0) {
    float* lse_row = p.lse + (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int row = row_begin + wg * 64 + warp_in_wg * 16 + lane / 4 + hi * 8;
      if (row < p.seqlen_q) lse_row[row] = lse[hi];
    }
  }
}

}  // namespace flash::sm90
