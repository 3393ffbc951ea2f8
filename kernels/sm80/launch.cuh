// Definition of flash::sm80::run_fwd, included by the instantiation files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "api.h"
#include "../common/element.cuh"
#include "../decode/combine_kernel.cuh"
#include "fwd_kernel.cuh"

namespace flash::sm80 {

template <typename Traits, bool kMasked, bool kScoreMod, bool kPaged>
cudaError_t launch_fwd(const detail::FwdParams& params, cudaStream_t stream) {
  auto* kernel = &fwd_kernel<Traits, kMasked, kScoreMod, kPaged>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSmemBytes > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  // Split-KV: num_splits CTAs per query block (gridDim.x), the plan keeps
  // that and the combine's one CTA per (batch, head, query) row below 2^31.
  const int64_t splits = params.num_splits > 1 ? params.num_splits : 1;
  const int64_t m_blocks = (params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  if (m_blocks * splits > INT32_MAX ||
      (splits > 1 && static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q > INT32_MAX)) {
    return cudaErrorInvalidConfiguration;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(m_blocks * splits), params.heads_q, params.batch);
  config.blockDim = dim3(Traits::kNThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  // cudaLaunchKernelEx reports this launch's own error, never a stale one.
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, params);
  if (err != cudaSuccess || splits == 1) return err;
  // Merge the partial results, one CTA per (batch, head, query) row.
  return decode::launch_combine<Traits::kHeadDim, typename Traits::Element>(params, stream);
}

template <DType kDType, int kHeadDim, int kIndex>
cudaError_t run_candidate(const detail::FwdParams& params, cudaStream_t stream) {
  using Traits = CandidateTraits<kHeadDim, kIndex, typename ElementOf<kDType>::type>;
  const bool window = params.window_left >= 0 || params.window_right >= 0;
  const bool softcap = params.softcap > 0.f || params.alibi_slopes != nullptr;  // the score-modifier variant
  if (params.block_table != nullptr) {
    // Paged caches: one variant with every feature on (a window of (-1, -1)
    // and no softcap behave as none) keeps the instantiation count down.
    return softcap ? launch_fwd<Traits, true, true, true>(params, stream)
                   : launch_fwd<Traits, true, false, true>(params, stream);
  }
  if (window) {
    return softcap ? launch_fwd<Traits, true, true, false>(params, stream)
                   : launch_fwd<Traits, true, false, false>(params, stream);
  }
  return softcap ? launch_fwd<Traits, false, true, false>(params, stream)
                 : launch_fwd<Traits, false, false, false>(params, stream);
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, int candidate, cudaStream_t stream) {
  static_assert(kNumCandidates<kHeadDim> <= kMaxCandidates, "extend the candidate switch");
  if (candidate == 0) return run_candidate<kDType, kHeadDim, 0>(params, stream);
  if constexpr (kNumCandidates<kHeadDim> > 1) {
    if (candidate == 1) return run_candidate<kDType, kHeadDim, 1>(params, stream);
  }
  if constexpr (kNumCandidates<kHeadDim> > 2) {
    if (candidate == 2) return run_candidate<kDType, kHeadDim, 2>(params, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace flash::sm80
