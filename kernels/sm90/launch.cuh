// Definition of flash::sm90::run_fwd, included by the instantiation files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "api.h"
#include "../common/element.cuh"
#include "../decode/combine_kernel.cuh"
#include "fwd_kernel.cuh"
#include "tensor_map.h"

namespace flash::sm90 {

template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kSplit, bool kCache = false,
          bool kFp8 = false>
cudaError_t launch_fwd(const FwdParams& params, cudaStream_t stream) {
  auto* kernel = &fwd_kernel<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache, kFp8>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  const detail::FwdParams& p = params.common;
  // Persistent: at most one CTA per SM, each walking tiles with a stride of the grid size.
  const int num_sms = p.num_sms > 0 ? p.num_sms : 1;
  const int64_t num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  // Unit indices (times the splits) and the CTAs' strided walk (u +
  // gridDim.x) stay in int; the plan never sends a call past this
  // (src/plan.cpp), nor a split one past the combine's grid.
  const int64_t splits = kSplit ? p.num_splits : 1;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  if (num_m_blocks * p.heads_q * p.batch * splits > INT32_MAX - num_sms || (splits > 1 && rows > INT32_MAX)) {
    return cudaErrorInvalidValue;
  }
  // Dense causal and ALiBi-only calls walk their tiles longest first where that balances
  // the CTAs better than causal pairs (unit_map.h, longest_first_section),
  // and where each CTA's walk fits the table build() writes.
  constexpr bool kLongestFirst = kWalksLongestFirst<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache>;
  using Scheduler = KernelScheduler<Traits, kMasked, kLeft, kScoreMod, kSplit, kCache>;
  FwdParams run = params;
  run.common.sched_section = 0;
  run.common.sched_unit_div =
      FastDivmod::make(UnitMap{static_cast<int>(num_m_blocks), p.heads_q * p.batch, kMasked}.unit_divisor());
  run.common.sched_heads_div = FastDivmod::make(p.heads_q);
  if constexpr (kLongestFirst) {
    const int64_t heads_x_batch = static_cast<int64_t>(p.heads_q) * p.batch;
    const int64_t tiles = num_m_blocks * heads_x_batch;
    const int64_t grid = tiles < num_sms ? tiles : num_sms;
    const bool fits = grid > 0 && (tiles + grid - 1) / grid <= Scheduler::kSlotCapacity &&
                      num_m_blocks < (int64_t{1} << Scheduler::kSlotBlockBits) &&
                      heads_x_batch < (int64_t{1} << (31 - Scheduler::kSlotBlockBits));
    if (fits && p.cu_seqlens_q == nullptr && p.cu_seqlens_k == nullptr) {
      const long long kv_bytes = static_cast<long long>(p.seqlen_k) * (p.head_dim + p.head_dim_v) *
                                 static_cast<long long>(sizeof(typename Traits::Element));
      run.common.sched_section = longest_first_section(Traits::kBlockM, static_cast<int>(num_m_blocks),
                                                       static_cast<int>(heads_x_batch), kv_bytes, p.q_per_kv);
    }
  }
  const int num_units =
      Scheduler::units(static_cast<int>(num_m_blocks), p.heads_q * p.batch, run.common.sched_section) *
      static_cast<int>(splits);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(num_units < num_sms ? num_units : num_sms));
  config.blockDim = dim3(Traits::kNThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, run);
  if constexpr (kSplit) {
    // Split-KV: merge the partial results, one CTA per (batch, head, query) row.
    if (launched == cudaSuccess && splits > 1) {
      return decode::launch_combine<Traits::kHeadDim, typename Traits::Element>(p, stream);
    }
  }
  return launched;
}

// Builds the four tensor maps for Traits' boxes and launches; returns
// cudaErrorNotSupported, having launched nothing, if the driver refuses one.
// kCache: the KV-cache kernel (seqused_k or a paged cache), unsplit. kFp8
// (with kCache): K and V are e4m3 (kv_dtype), in any cache layout.
template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kCache = false, bool kFp8 = false>
cudaError_t run_with_traits(const detail::FwdParams& p, cudaStream_t stream);

// A kernel without the softmax's float32 row sums where the call wants no
// log-sum-exp, is not split and Traits can do without them (kRowSumInO).
template <typename Traits, bool kMasked, bool kCache = false, bool kLeft = false, bool kScoreMod = false,
          bool kFp8 = false>
cudaError_t run_lse_variant(const detail::FwdParams& p, cudaStream_t stream) {
  if constexpr (Traits::kRowSumInO) {
    // Split-KV needs the sums too: every split stores its LSE.
    if (p.lse == nullptr && p.num_splits <= 1) {
      return run_with_traits<typename Traits::WithoutLseSums, kMasked, kLeft, kScoreMod, kCache, kFp8>(p, stream);
    }
  }
  return run_with_traits<Traits, kMasked, kLeft, kScoreMod, kCache, kFp8>(p, stream);
}

// Candidate kIndex of the tail-only (kMasked false) or masked configurations.
template <DType kDType, int kHeadDim, bool kMasked, int kIndex>
cudaError_t run_candidate(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  using Traits = CandidateTraits<kHeadDim, kMasked, kIndex, typename ElementOf<kDType>::type>;
  if constexpr (!kMasked) {
    return run_lse_variant<Traits, false>(p, stream);
  } else {
    switch (mask) {
      case MaskVariant::kCausal: return run_lse_variant<Traits, true>(p, stream);
      case MaskVariant::kWindow: return run_lse_variant<Traits, true, false, true>(p, stream);
      // Score modifiers: causal ALiBi without a softcap, an LSE or splits
      // puts its column term on the tensor cores (candidate 0, below);
      // other ALiBi calls without a softcap and without a left window edge
      // run a kernel with neither (kLeft false: Mainloop compiles the
      // softcap out there); every other call the kernel with both, where a
      // window of (-1, -1) masks only the ragged tail.
      case MaskVariant::kScoreMod:
        // Head dim 96 runs these on one candidate only (the plan's
        // kScoreModCandidate96).
        if constexpr (kHeadDim == 96 && kIndex != kScoreModCandidate96) {
          return cudaErrorInvalidValue;
        } else {
          if constexpr (Traits::kRowSumInO && kIndex == 0) {
            // Causal ALiBi, with or without a left window edge, and
            // without a softcap, an LSE or splits: its column term on the
            // tensor cores (AlibiCausalTraits). Candidate 0 only: these
            // calls are not tuned, and the plan starts them with it.
            if (alibi_on_tensor_cores(p.alibi_slopes != nullptr, p.softcap, p.window_right, p.lse != nullptr,
                                      p.num_splits)) {
              using Alibi = AlibiCausalTraits<typename Traits::WithoutLseSums>;
              if (p.window_left < 0) return run_with_traits<Alibi, true, false, true>(p, stream);
              return run_with_traits<Alibi, true, true, true>(p, stream);
            }
          }
          if (p.softcap <= 0.f && p.window_left < 0) return run_lse_variant<Traits, true, false, false, true>(p, stream);
          return run_lse_variant<Traits, true, false, true, true>(p, stream);
        }
      default: return cudaErrorInvalidValue;
    }
  }
}

// Candidate `candidate` of the tail-only or masked list: one case per
// compiled candidate, generated from kNumCandidates.
template <DType kDType, int kHeadDim, bool kMasked, int... kIndex>
cudaError_t run_index(const detail::FwdParams& p, MaskVariant mask, int candidate, cudaStream_t stream,
                      std::integer_sequence<int, kIndex...>) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)((candidate == kIndex && (err = run_candidate<kDType, kHeadDim, kMasked, kIndex>(p, mask, stream), true)) ||
         ...);
  return err;
}

template <DType kDType, int kHeadDim, bool kMasked>
cudaError_t run_masking(const detail::FwdParams& p, MaskVariant mask, int candidate, cudaStream_t stream) {
  return run_index<kDType, kHeadDim, kMasked>(p, mask, candidate, stream,
                                              std::make_integer_sequence<int, kNumCandidates<kHeadDim, kMasked>>{});
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& p, MaskVariant mask, int candidate, cudaStream_t stream) {
  return mask == MaskVariant::kTail ? run_masking<kDType, kHeadDim, false>(p, mask, candidate, stream)
                             : run_masking<kDType, kHeadDim, true>(p, mask, candidate, stream);
}

// One KV-cache kernel per mask variant, on `Tail` (no mask) or `Masked` tiles.
template <typename Tail, typename Masked, bool kFp8>
cudaError_t run_cache_variants(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  switch (mask) {
    case MaskVariant::kTail: return run_lse_variant<Tail, false, true, false, false, kFp8>(p, stream);
    case MaskVariant::kCausal: return run_lse_variant<Masked, true, true, false, false, kFp8>(p, stream);
    case MaskVariant::kWindow: return run_with_traits<Masked, true, true, false, true, kFp8>(p, stream);
    case MaskVariant::kScoreMod: return run_lse_variant<Masked, true, true, true, true, kFp8>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

// KV-cache calls: one candidate's tiles (cache_candidate's), every mask
// variant; a paged bf16/fp16
// cache that the kernel gathers row by row on gather_tile's tile where
// the head dim has one.
template <DType kDType, int kHeadDim, bool kFp8>
cudaError_t run_cache_kernel(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  using Element = typename ElementOf<kDType>::type;
  constexpr GatherTile kGather = gather_tile(kHeadDim);
  if constexpr (!kFp8 && kGather.block_n != 0) {
    if (p.block_table != nullptr && gathers_pages(p.page_size, kHeadDim, kGather.block_n)) {
      using Gather = FwdTraits<kHeadDim, kGather.block_m, kGather.block_n, kGather.stages, Element, true, true>;
      return run_cache_variants<Gather, Gather, false>(p, mask, stream);
    }
  }
  constexpr int kIndex = cache_candidate(kHeadDim, kFp8);
  if constexpr (kFp8 && fp8_cache_compact_k(kHeadDim, kDType)) {
    // K stays e4m3 (half a block a stage): three stages where two fit otherwise.
    using Tail = CandidateTile<kHeadDim, false, kIndex>;
    using Masked = CandidateTile<kHeadDim, true, kIndex>;
    return run_cache_variants<
        FwdTraits<kHeadDim, Tail::kBlockM, Tail::kBlockN, kFp8CacheCompactStages, Element, true, false, true>,
        FwdTraits<kHeadDim, Masked::kBlockM, Masked::kBlockN, kFp8CacheCompactStages, Element, true, false, true>,
        kFp8>(p, mask, stream);
  } else {
    return run_cache_variants<CandidateTraits<kHeadDim, false, kIndex, Element>,
                              CandidateTraits<kHeadDim, true, kIndex, Element>, kFp8>(p, mask, stream);
  }
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd_cache(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  return run_cache_kernel<kDType, kHeadDim, false>(p, mask, stream);
}

template <DType kDType, int kHeadDim>
cudaError_t run_fwd_cache_fp8(const detail::FwdParams& p, MaskVariant mask, cudaStream_t stream) {
  return run_cache_kernel<kDType, kHeadDim, true>(p, mask, stream);
}

template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kCache, bool kFp8>
cudaError_t run_with_traits(const detail::FwdParams& p, cudaStream_t stream) {
  constexpr bool kIsBf16 = std::is_same_v<typename Traits::Element, __nv_bfloat16>;
  // A kernel without float32 row sums would write an LSE from the rounded
  // sums in O: run_lse_variant never picks one for a call with an LSE.
  if constexpr (!Traits::kLseSums) {
    if (p.lse != nullptr || p.num_splits > 1) return cudaErrorInvalidValue;
  }
  // Only the KV-cache kernel reads seqused_k and block tables (and fp8
  // caches of any layout); it never splits.
  const bool cache = p.seqused_k != nullptr || p.block_table != nullptr;
  if ((cache && !kCache) || (!cache && kCache && !kFp8) || (kCache && p.num_splits > 1)) return cudaErrorInvalidValue;
  if (!kFp8 && p.block_table != nullptr && paged_problem(p.page_size, p.num_pages) != nullptr) {
    return cudaErrorInvalidValue;
  }
  FwdParams params = {};
  params.common = p;
  params.gather_kv =
      !kFp8 && p.block_table != nullptr && gathers_pages(p.page_size, Traits::kHeadDim, Traits::kBlockN);
  // A head dim with a gather tile gathers on it alone (run_cache_kernel;
  // fwd_kernel compiles one paged-cache producer each).
  if constexpr (kCache && !kFp8) {
    if (gather_tile(Traits::kHeadDim).block_n != 0 && (params.gather_kv != 0) != Traits::kGatherKernel) {
      return cudaErrorInvalidValue;
    }
  }
  params.kv_box_rows = p.block_table != nullptr ? paged_box_rows(p.page_size, Traits::kBlockN) : Traits::kBlockN;
  // The call's head dim: TMA zero-fills the columns of a wider kernel and
  // stores none of them (the gather and the fp8 copies zero-fill them themselves).
  const bool kv_maps = !kFp8 && !params.gather_kv;
  const TmaTensors t = tma_tensors(p);
  const bool ok = make_tensor_map(&params.tma_q, t.q, kIsBf16, 64) &&
                  (!kv_maps || (make_tensor_map(&params.tma_k, t.k, kIsBf16, params.kv_box_rows) &&
                                make_tensor_map(&params.tma_v, t.v, kIsBf16, params.kv_box_rows))) &&
                  make_tensor_map(&params.tma_o, t.o, kIsBf16, 64);
  if (!ok) return cudaErrorNotSupported;
  if constexpr (kCache) {
    return launch_fwd<Traits, kMasked, kLeft, kScoreMod, false, true, kFp8>(params, stream);
  } else {
    // The split-KV variant only for split calls: the others run kernels without its code.
    if (p.num_splits > 1) {
      if constexpr (Traits::kLseSums) return launch_fwd<Traits, kMasked, kLeft, kScoreMod, true>(params, stream);
      return cudaErrorInvalidValue;
    }
    return launch_fwd<Traits, kMasked, kLeft, kScoreMod, false>(params, stream);
  }
}

}  // namespace flash::sm90
