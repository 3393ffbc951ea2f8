// Host-side entry points of the sm90 forward kernels: plain C++
// declarations, defined by one .cu file per (dtype, head_dim) in
// instantiations/, compiled for sm_90a only.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::sm90 {

using detail::MaskVariant;

// Launches compiled configuration `candidate` (0: the heuristic's usual
// choice, see CandidateTile; describe_candidate) of the Hopper forward kernel for one dtype, head
// dim and mask variant. The plan (src/plan.cpp) has checked that TMA can
// describe the tensors (kernels/sm90/tma_limits.h); cudaErrorNotSupported
// means the driver's tensor-map encoder refused them anyway, and nothing
// was launched. cudaErrorInvalidValue: a candidate out of range.
template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, MaskVariant mask, int candidate, cudaStream_t stream);

// The same for a call with seqused_k or a paged cache (any page size,
// unsplit): cache_candidate(kHeadDim, false)'s tiles, with the KV-cache producer, or where the
// kernel gathers the pages and gather_tile (tma_limits.h) names a tile,
// that one (bf16/fp16 caches; fp8 ones: run_fwd_cache_fp8).
// Defined in instantiations/fwd_cache_*.cu.
template <DType kDType, int kHeadDim>
cudaError_t run_fwd_cache(const detail::FwdParams& params, MaskVariant mask, cudaStream_t stream);

// The same for a call on an fp8 (e4m3) KV cache (kv_dtype), dense, varlen,
// seqused_k or paged with any page size, unsplit: the producer widens K/V
// in shared memory (ConvertProducer), in the tiles of candidate
// cache_candidate(kHeadDim, true). Defined in instantiations/fwd_cache_*_e4m3_*.cu.
template <DType kDType, int kHeadDim>
cudaError_t run_fwd_cache_fp8(const detail::FwdParams& params, MaskVariant mask, cudaStream_t stream);

// The candidate whose tiles a KV-cache call runs (the plan offers only
// that one). An fp8 cache (fp8): at head dim 64 the 128-row tile with two
// consumer warpgroups and three stages (candidate 1), whose producer has
// the registers to widen (72, against 32 beside three consumer
// warpgroups; docs/perf/fp8-prefill.md). A bf16/fp16 cache at head dim 96:
// 128 x 128 (candidate 1), whose producer has 56 registers beside two
// consumer warpgroups; beside candidate 0's three it would have 32 and
// spill. Elsewhere candidate 0.
constexpr int cache_candidate(int64_t head_dim, bool fp8) {
  return (fp8 ? head_dim == 64 : head_dim == 96) ? 1 : 0;
}
// An fp8 cache's bf16 calls at head dims 128 and 256 read K as e4m3 (Q in
// two parts, kFp8CacheQkE4m3), half a block a stage. At head dim 256 their
// kernel takes the candidate's tile with kFp8CacheCompactStages stages
// (FwdTraits::kCompactK); at 128 the third stage measures slower
// (docs/perf/fp8-prefill.md).
inline constexpr int kFp8CacheCompactStages = 3;
constexpr bool fp8_cache_compact_k(int64_t head_dim, DType dtype) {
  return dtype == DType::kBFloat16 && head_dim == 256;
}
// Score-modifier calls (softcap, ALiBi) at head dim 96 run this candidate
// (128 x 128) alone; candidate 0 compiles no score-modifier kernels.
inline constexpr int kScoreModCandidate96 = 1;
// Whether an ALiBi call at head dim 64 puts its bias's column term on the
// tensor cores (AlibiCausalTraits, candidate 0): the right window edge at
// the diagonal (kernel_window_right 0: causal), any left edge, no softcap,
// no LSE, unsplit. The plan keeps these calls on candidate 0; run_candidate
// launches that kernel for them.
constexpr bool alibi_on_tensor_cores(bool alibi, float softcap, int window_right, bool lse, int num_splits) {
  return alibi && softcap <= 0.f && window_right == 0 && !lse && num_splits <= 1;
}

// FP8 prefill (kernels/sm90/fp8_kernel.cuh): Q, K and V in e4m3 (dense or
// varlen), O in kDType, head dims 64, 128 and 256, no mask, causal or a
// sliding window (kTail, kCausal, kWindow; else cudaErrorInvalidValue). params.fp8_vt is workspace
// for V^T (fp8_vt.h), written first on the same stream. Defined in
// instantiations/fwd_fp8_*.cu.
template <DType kDType, int kHeadDim>
cudaError_t run_fwd_fp8(const detail::FwdParams& params, MaskVariant mask, cudaStream_t stream);

// MLA decode (kernels/sm90/mla_kernel.cuh): Q K^T over up to 576 columns,
// V and O over up to 512, V being K's rows (params.v == params.k, same
// strides), any K/V head count, dense, varlen or paged caches (any page
// size), split or not. cudaErrorInvalidValue: V is not K's rows, or the
// head dims exceed 576 / 512. Defined in instantiations/mla_*.cu.
// Its shared memory per CTA (MlaTraits::kSmemBytes; the instantiations check).
inline constexpr int kMlaSmemBytes = 230912;
template <DType kDType>
cudaError_t run_mla(const detail::FwdParams& params, cudaStream_t stream);

// The FP8 prefill's configuration at head_dim (64, 128, 256), unmasked or
// causal / windowed (`masked`). False if none.
bool describe_fp8(int64_t head_dim, bool masked, KernelChoice* choice);

// Number of compiled configurations for (head_dim, masked) (0 if none).
int num_candidates(int64_t head_dim, bool masked);
// Describes configuration `index` (source left as is). False if none.
bool describe_candidate(int64_t head_dim, bool masked, int index, KernelChoice* choice);
// The configuration of an fp8-cache call (cache_candidate's tile, with
// kFp8CacheCompactStages stages where fp8_cache_compact_k). False if none.
bool describe_fp8_cache(int64_t head_dim, bool masked, DType dtype, KernelChoice* choice);
// The tile of the paged calls the kernel gathers at this head dim where
// they have one of their own (gather_tile, tma_limits.h); false where not.
bool describe_gather(int64_t head_dim, KernelChoice* choice);

}  // namespace flash::sm90
