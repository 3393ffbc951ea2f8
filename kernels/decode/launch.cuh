// Definition of flash::decode::run_decode, included by the instantiation files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "../common/element.cuh"
#include "../common/launch.cuh"
#include "api.h"
#include "combine_kernel.cuh"
#include "decode_kernel.cuh"

namespace flash::decode {

// Whether `params` fits the decode and combine grids: seqlen_q * q_per_kv
// packed rows per (batch, K/V head) indexed in int with a 16-row block of
// room past the last, gridDim.x = ceil(rows / 16) * splits < 2^31, y =
// heads_kv and z = batch <= 65535, and with splits the combine's one CTA per
// (batch, head, query) row < 2^31. 64-bit arithmetic throughout.
inline bool decode_grid_fits(const detail::FwdParams& params) {
  constexpr int64_t kMaxX = INT32_MAX;
  constexpr int64_t kMaxYZ = 65535;
  if (params.num_splits < 1 || params.seqlen_q < 0 || params.q_per_kv < 1 || params.batch < 0 ||
      params.heads_kv < 1 || params.heads_kv > kMaxYZ || params.batch > kMaxYZ) {
    return false;
  }
  const int64_t rows = static_cast<int64_t>(params.seqlen_q) * params.q_per_kv;
  const int64_t ctas = (rows + kBlockM - 1) / kBlockM * params.num_splits;
  const int64_t combine_rows = static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q;
  return rows <= kMaxX - kBlockM && ctas <= kMaxX && (params.num_splits == 1 || combine_rows <= kMaxX);
}

// `programmatic`: launch as a programmatic dependent of the kernel before
// it on the stream (the decode kernel waits for it before reading anything).
template <typename Traits, bool kMasked, bool kScoreMod, bool kWrites = false>
cudaError_t launch_decode(const detail::FwdParams& params, cudaStream_t stream, bool programmatic) {
  auto* kernel = &decode_kernel<Traits, kMasked, kScoreMod, kWrites>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSmemBytes > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  const int64_t rows = static_cast<int64_t>(params.seqlen_q) * params.q_per_kv;
  cudaLaunchConfig_t config = {};
  if (!split_rows_grid(rows, Traits::kBlockM, params.num_splits, params.heads_kv, params.batch, &config.gridDim)) {
    return cudaErrorInvalidConfiguration;  // decode_grid_fits holds where the launcher calls this
  }
  config.blockDim = dim3(Traits::kNThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attribute;
  if (programmatic) allow_programmatic_launch(&config, &attribute);
  return cudaLaunchKernelEx(&config, kernel, params);
}

// Whether the images of the decode and combine kernels that run on this
// device were compiled for sm_90 or newer, so that they contain the
// griddepcontrol instructions a programmatic dependent launch relies on
// (a build for sm_80 only, JIT-compiled for a newer GPU, has neither).
template <typename Traits, typename Element, int kHeadDim>
bool programmatic_launch_compiled() {
  static const bool compiled = [] {
    cudaFuncAttributes decode_attr = {}, combine_attr = {};
    return cudaFuncGetAttributes(&decode_attr, &decode_kernel<Traits, false, false>) == cudaSuccess &&
           cudaFuncGetAttributes(&combine_attr, &combine_kernel<kHeadDim, Element>) == cudaSuccess &&
           decode_attr.ptxVersion >= 90 && combine_attr.ptxVersion >= 90;
  }();
  return compiled;
}

template <DType kDType, int kHeadDim, bool kFp8KV, int kStages = stages(kHeadDim, kFp8KV)>
cudaError_t run_decode_kernels(const detail::FwdParams& params, cudaStream_t stream) {
  using Element = typename ElementOf<kDType>::type;
  using Traits = DecodeTraits<kHeadDim, Element, kFp8KV, kStages>;
  static_assert(Traits::kBlockM == kBlockM && Traits::kBlockN == block_n(kHeadDim, kFp8KV) &&
                    Traits::kSmemBytes == smem_bytes(kHeadDim, kFp8KV, kStages),
                "api.h constants out of date");
  // Checked before anything runs, so a call too large for the grids launches
  // nothing: cudaErrorInvalidConfiguration, CUDA's own code for such a grid.
  if (!decode_grid_fits(params)) return cudaErrorInvalidConfiguration;
  const bool window = params.window_left >= 0 || params.window_right >= 0;
  const bool softcap = params.softcap > 0.f || params.alibi_slopes != nullptr;  // the score-modifier variant
  // After an append kernel (kernels/append, compiled for the same
  // architectures; it runs first for an fp8 cache and on sm_80) the decode
  // kernel launches as its programmatic dependent on sm_90+, so its launch
  // overlaps the append's run; it waits for the append before it reads
  // anything.
  const bool programmatic = params.cc_major >= 9 && programmatic_launch_compiled<Traits, Element, kHeadDim>();
  const bool after = programmatic && params.follows_append;
  // Where the host ran no append kernel (AppendFusion::writes), the
  // kWrites kernel does the whole append: Q and the lengths as the caller
  // gave them.
  detail::FwdParams fused;
  const detail::FwdParams* call = &params;
  if (!kFp8KV && params.append.writes) {
    fused = params;
    fused.q = params.append.q;
    fused.q_batch_stride = params.append.q_batch_stride;
    fused.q_seq_stride = params.append.q_seq_stride;
    fused.q_head_stride = params.append.q_head_stride;
    fused.seqused_k = params.append.seqused_k;
    call = &fused;
  }
  // The mask and score-modifier variant of the call; kWrites where the
  // kernel does the append itself (`after` is then false: no append
  // kernel ran).
  auto launch_variant = [&](auto writes) {
    constexpr bool kWrites = decltype(writes)::value;
    if (window) {
      return softcap ? launch_decode<Traits, true, true, kWrites>(*call, stream, after)
                     : launch_decode<Traits, true, false, kWrites>(*call, stream, after);
    }
    return softcap ? launch_decode<Traits, false, true, kWrites>(*call, stream, after)
                   : launch_decode<Traits, false, false, kWrites>(*call, stream, after);
  };
  cudaError_t err;
  if constexpr (!kFp8KV && kStages == stages(kHeadDim, kFp8KV)) {
    err = params.append.writes ? launch_variant(std::true_type{}) : launch_variant(std::false_type{});
  } else {
    // The two-stage variant has no kWrites kernel: decode_does_append
    // leaves its calls to the append kernel.
    if (params.append.writes) return cudaErrorInvalidValue;
    err = launch_variant(std::false_type{});
  }
  if (err != cudaSuccess || params.num_splits <= 1) return err;
  // One CTA per row. On sm_90 and newer the combine launches as a
  // programmatic dependent of the decode kernel: its CTAs start once every
  // decode CTA has started, read their rows' places and wait
  // (griddepcontrol.wait) for the decode kernel's results, instead of the
  // launch starting after it.
  return launch_combine<kHeadDim, Element>(*call, stream, programmatic);
}

template <DType kDType, int kHeadDim>
cudaError_t run_decode(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_decode_kernels<kDType, kHeadDim, false>(params, stream);
  if constexpr (has_two_stage_variant(kHeadDim, false)) {
    if (variant == 1) return run_decode_kernels<kDType, kHeadDim, false, 2>(params, stream);
  }
  return cudaErrorInvalidValue;
}

template <DType kDType, int kHeadDim>
cudaError_t run_decode_fp8(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_decode_kernels<kDType, kHeadDim, true>(params, stream);
  if constexpr (has_two_stage_variant(kHeadDim, true)) {
    if (variant == 1) return run_decode_kernels<kDType, kHeadDim, true, 2>(params, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace flash::decode
