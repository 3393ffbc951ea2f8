// FP8 prefill on Hopper: Q, K and V in e4m3, O in bf16, both products on
// e4m3 wgmma (FlashAttention-3 section 3.3). The kernel is the sm90
// kernel's structure (fwd_kernel.cuh: persistent CTAs, a TMA producer
// warpgroup, consumer warpgroups with the online softmax, pingpong and the
// same epilogue) on Fp8FwdTraits:
//   - Q and K tiles are 128-byte swizzle rows of 128 e4m3 elements;
//   - V is read as V^T (head dim rows of keys), written into the workspace
//     by fp8_transpose.cuh first: e4m3 wgmma takes B only K-major;
//   - P goes to e4m3 in registers, scaled by 2^8 (Fp8FwdTraits::kPOffsetLog2),
//     its fragment's key order matched by V^T's column order (fp8_vt.h);
//   - q_descale * k_descale of the tile's K/V head joins the softmax's
//     scale (the scores stay raw), and v_descale multiplies O.
#pragma once

#include <cstdint>

#include "../common/constants.h"
#include "../common/element.cuh"
#include "../common/softmax.cuh"
#include "epilogue.cuh"
#include "fp8_vt.h"
#include "kernel_traits.cuh"
#include "mainloop.cuh"
#include "params.h"
#include "producer.cuh"
#include "ptx_sm90.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"

#include <cuda_runtime.h>

#include "api.h"
#include "fp8_transpose.cuh"
#include "tensor_map.h"

namespace flash::sm90 {

// One thread of warpgroup 0 loads each tile's Q and streams K and V^T
// blocks, last visible block first, as Producer does for 16-bit tiles.
// tma_v describes V^T: (columns, head dim rows, heads_kv, 1).
template <typename Traits>
struct Fp8Producer {
  static constexpr int kBlockN = Traits::kBlockN;
  using Smem = SmemLayout<Traits>;

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
        const int64_t first_key =
            p.cu_seqlens_k != nullptr ? tile.k_row : static_cast<int64_t>(tile.batch) * p.seqlen_k;
        const int vt_col = static_cast<int>(fp8_vt_start(first_key, tile.batch));
        mbarrier_wait(smem.bar(Barrier::kQEmpty), (q_count & 1) ^ 1);
        ++q_count;
        Producer<Traits>::load_q(params, smem, tile);
#pragma unroll 2
        for (int i = 0; i < tile.n_blocks; ++i, ++kv_count) {
          const int block = tile.n_first + tile.n_blocks - 1 - i;
          const int stage = Smem::stage_of(kv_count);
          const uint32_t empty_parity = Smem::parity_of(kv_count) ^ 1;
          mbarrier_wait(smem.bar(Barrier::kKEmpty, stage), empty_parity);
          mbarrier_arrive_expect_tx(smem.bar(Barrier::kKFull, stage), Traits::kKBytes);
#pragma unroll
          for (int cb = 0; cb < Traits::kInColBlocks; ++cb) {
            tma_load_4d(smem.k(stage) + cb * kBlockN * kSwizzleBytes, &params.tma_k, smem.bar(Barrier::kKFull, stage),
                        cb * kSwizzleBytes, tile.k_row + block * kBlockN, head_kv, tile.k_batch);
          }
          mbarrier_wait(smem.bar(Barrier::kVEmpty, stage), empty_parity);
          mbarrier_arrive_expect_tx(smem.bar(Barrier::kVFull, stage), Traits::kVtBytes);
          tma_load_4d(smem.v(stage), &params.tma_v, smem.bar(Barrier::kVFull, stage), vt_col + block * kBlockN, 0,
                      head_kv, 0);
        }
      }
    }
  }
};

// kMasked: causal (window (-1, 0)); else only the ragged tail.
template <typename Traits, bool kMasked>
__global__ void __launch_bounds__(Traits::kNThreads, 1) fp8_fwd_kernel(const __grid_constant__ FwdParams params) {
  static_assert(Traits::kFp8In, "Fp8FwdTraits");
  using Scheduler =
      TileScheduler<kMasked, false, Traits::kBlockM, Traits::kBlockN, Traits::kSchedSeqs, Traits::kNThreads, false>;
  using Loop = Mainloop<Traits, kMasked, false, false>;
  const detail::FwdParams& p = params.common;

  extern __shared__ unsigned char smem_raw[];
  const SmemLayout<Traits> smem(smem_raw);
  const int warpgroup = threadIdx.x / kWarpgroupThreads;

  const Scheduler scheduler(p, smem.sched());
  scheduler.build(p);
  if (threadIdx.x == 0) smem.init_barriers(1);
  __syncthreads();

  if (warpgroup == 0) {
    setmaxnreg_dec<Traits::kProducerRegs>();
    if (threadIdx.x == 0) Fp8Producer<Traits>::run(params, scheduler, smem, scheduler.num_units(p));
    return;
  }

  setmaxnreg_inc<Traits::kConsumerRegs>();
  const int num_units = scheduler.num_units(p);
  const int wg = warpgroup - 1;
  const Loop loop(smem, p, wg);
  const Epilogue<Traits, false> epilogue(params, smem, wg);
  Turns<Loop::kPingpong, Traits::kConsumerWarpgroups> turns{wg};
  typename Loop::OTile o;
  OnlineSoftmax<1> softmax;

  int kv_count = 0;
  int q_count = 0;
  for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
    for (int k = 0; k < scheduler.tiles_in_unit(u, p); ++k) {
      const Tile tile = scheduler.tile(u, k, p);
      if (tile.skip) continue;
#pragma unroll
      for (int i = 0; i < Traits::kOCols / 2; ++i) o[i] = 0.f;
      softmax = OnlineSoftmax<1>();
      const int64_t at = static_cast<int64_t>(tile.head / p.q_per_kv) * p.descale_head_stride;
      float qk_scale = 1.f, v_scale = 1.f;
      if (p.q_descale != nullptr) qk_scale = p.q_descale[at];
      if (p.k_descale != nullptr) qk_scale *= p.k_descale[at];
      if (p.v_descale != nullptr) v_scale = p.v_descale[at];
      if (tile.n_blocks > 0) {
        const RowRange<1> ranges = loop.row_ranges(tile);
        mbarrier_wait(smem.bar(Barrier::kQFull), q_count & 1);
        ++q_count;
        const float row_scale[2] = {qk_scale, qk_scale};
        turns.open_once();
        const bool last_of_cta = Loop::kPingpong && !scheduler.template has_work_after<false>(u, k, num_units, p);
        loop.template run_tile<false>(tile, ranges, kv_count, o, softmax, turns, last_of_cta, row_scale);
        kv_count += tile.n_blocks;
      }
      epilogue.store(tile, 0, o, softmax, v_scale, qk_scale);
    }
  }
  epilogue.drain();
}

// V^T into p.fp8_vt, the tensor maps, then the attention kernel.
template <typename Traits, bool kMasked>
cudaError_t launch_fp8(const detail::FwdParams& p, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr bool kIsBf16 = std::is_same_v<Element, __nv_bfloat16>;
  auto* kernel = &fp8_fwd_kernel<Traits, kMasked>;
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const int num_sms = p.num_sms > 0 ? p.num_sms : 1;
  const int64_t num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  if (num_m_blocks * p.heads_q * p.batch > INT32_MAX - num_sms || p.fp8_vt_cols > kTmaMaxRows) {
    return cudaErrorInvalidValue;
  }

  FwdParams params = {};
  params.common = p;
  params.kv_box_rows = Traits::kBlockN;
  params.gather_kv = 0;
  TmaTensors t = tma_tensors(p);
  t.q.elem_bytes = 1;
  t.k.elem_bytes = 1;
  if (t.k.rows == 0) t.k.rows = t.k.batch = 1;  // no keys: every tile is empty, K never loaded
  const TmaTensor vt{p.fp8_vt, p.fp8_vt_cols, Traits::kHeadDim, p.heads_kv, 1,
                     p.fp8_vt_cols, Traits::kHeadDim * p.fp8_vt_cols, 0, 1};
  const bool ok = make_tensor_map(&params.tma_q, t.q, CU_TENSOR_MAP_DATA_TYPE_UINT8, kSwizzleBytes, kWarpgroupRows) &&
                  make_tensor_map(&params.tma_k, t.k, CU_TENSOR_MAP_DATA_TYPE_UINT8, kSwizzleBytes, Traits::kBlockN) &&
                  make_tensor_map(&params.tma_v, vt, CU_TENSOR_MAP_DATA_TYPE_UINT8, Traits::kBlockN, Traits::kHeadDim) &&
                  make_tensor_map(&params.tma_o, t.o, kIsBf16, kWarpgroupRows);
  if (!ok) return cudaErrorNotSupported;

  const cudaError_t transposed = launch_fp8_transpose_v<Traits::kHeadDim>(p, stream);
  if (transposed != cudaSuccess) return transposed;
  const int num_units =
      TileScheduler<kMasked, false, Traits::kBlockM, Traits::kBlockN, Traits::kSchedSeqs, Traits::kNThreads,
                    false>::units(static_cast<int>(num_m_blocks), p.heads_q * p.batch);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(num_units < num_sms ? num_units : num_sms));
  config.blockDim = dim3(Traits::kNThreads);
  config.dynamicSmemBytes = Traits::kSmemBytes;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, params);
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd_fp8(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  using Traits = Fp8Traits<kHeadDim, typename ElementOf<kDType>::type>;
  switch (mask) {
    case MaskVariant::kTail: return launch_fp8<Traits, false>(p, stream);
    case MaskVariant::kCausal: return launch_fp8<Traits, true>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flash::sm90
