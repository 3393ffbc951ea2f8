// FP8 prefill on Hopper: Q, K and V in e4m3, O in bf16 or fp16, both products on
// e4m3 wgmma (FlashAttention-3 section 3.3). The kernel is the sm90 kernel
// (fwd_kernel.cuh: persistent CTAs, the TMA Producer, consumer warpgroups
// with the online softmax, pingpong and the same epilogue) on
// Fp8FwdTraits:
//   - Q and K tiles are 128-byte swizzle rows of 128 e4m3 elements;
//   - V is read as V^T (head dim rows of keys), written into the workspace
//     by fp8_transpose.cuh first: e4m3 wgmma takes B only K-major;
//   - P goes to e4m3 in registers, at most 256 (Fp8FwdTraits::kPOffsetLog2,
//     with the lazy max at head dim 256: kLazyLog2), its fragment's key
//     order matched by V^T's column order (fp8_vt.h);
//   - q_descale * k_descale of the tile's K/V head joins the softmax's
//     scale (the scores stay raw), and v_descale multiplies O.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../common/constants.h"
#include "../common/element.cuh"
#include "api.h"
#include "fp8_transpose.cuh"
#include "fp8_vt.h"
#include "kernel_traits.cuh"
#include "launch.cuh"
#include "tensor_map.h"

namespace flash::sm90 {

// The tensor maps, V^T into p.fp8_vt, then the attention kernel
// (launch_fwd, unsplit).
template <typename Traits, bool kMasked, bool kLeft>
cudaError_t launch_fp8(const detail::FwdParams& p, cudaStream_t stream) {
  constexpr bool kIsBf16 = std::is_same_v<typename Traits::Element, __nv_bfloat16>;
  if (p.num_splits > 1 || p.fp8_vt_cols > kTmaMaxRows) return cudaErrorInvalidValue;
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
                  make_tensor_map(&params.tma_v, vt, CU_TENSOR_MAP_DATA_TYPE_UINT8, Traits::kVtBoxCols, Traits::kHeadDim,
                                  Traits::kVtBoxCols) &&
                  make_tensor_map(&params.tma_o, t.o, kIsBf16, kWarpgroupRows);
  if (!ok) return cudaErrorNotSupported;
  const cudaError_t transposed = launch_fp8_transpose_v<Traits::kHeadDim>(p, stream);
  if (transposed != cudaSuccess) return transposed;
  // Without a log-sum-exp (and without a window's left edge, whose kernel
  // keeps one variant) the softmax keeps no float32 row sums: O's own
  // (kRowSumInO) normalise it.
  if constexpr (Traits::kRowSumInO && !kLeft) {
    if (p.lse == nullptr) return launch_fwd<typename Traits::WithoutLseSums, kMasked, kLeft, false, false>(params, stream);
  }
  return launch_fwd<Traits, kMasked, kLeft, false, false>(params, stream);
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd_fp8(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  using Element = typename ElementOf<kDType>::type;
  switch (mask) {
    case MaskVariant::kTail: return launch_fp8<Fp8Traits<kHeadDim, false, Element>, false, false>(p, stream);
    case MaskVariant::kCausal: return launch_fp8<Fp8Traits<kHeadDim, true, Element>, true, false>(p, stream);
    case MaskVariant::kWindow: return launch_fp8<Fp8Traits<kHeadDim, true, Element>, true, true>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flash::sm90
