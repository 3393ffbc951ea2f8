// The dispatch layer: which compiled configurations can run a call, which
// one the heuristic picks, and launching one of them. The only place that
// maps runtime values (backend, head_dim, dtype, candidate) to template
// instantiations.
#pragma once

#include <cuda_runtime_api.h>

#include "flash/flash.hpp"
#include "kernels/params.h"

namespace flash::detail {

// One compiled configuration: a kernel family and its candidate index.
struct Candidate {
  Backend backend = Backend::kSm80;
  int index = 0;
};

// What the current device offers.
struct DeviceCaps {
  int device = 0;
  int major = 0;
  int minor = 0;
  int num_sms = 0;
  int max_smem = 0;  // dynamic shared memory a block may opt in to, bytes (0: unknown, no limit applied)
  int smem_per_sm = 0;  // shared memory per multiprocessor, bytes (0: unknown)
};

// Whether `p` uses any inference-engine feature: varlen, seqused_k, a paged
// cache, a sliding window, a softcap or a requested split (such calls are
// not autotuned).
bool uses_engine_features(const AttentionParams& p);
// Whether the sm90 kernel covers every feature `p` uses: varlen (with
// total_q / total_k given), causal, sliding windows, softcap; not
// seqused_k, paged caches or splits.
bool sm90_supports_features(const AttentionParams& p);
// Whether the split-KV decode kernel exists in this build for p.head_dim and fits `caps`.
bool decode_available(const AttentionParams& p, const DeviceCaps& caps);
// Shared memory the decode kernel needs per block for p.head_dim, bytes.
int decode_smem_bytes(const AttentionParams& p);

// How the decode kernel would run `p`: its split count (after the workspace
// rule: a split needs a workspace, and num_splits = 0 with none gives 1) and
// the workspace that split count needs.
struct DecodePlan {
  int num_splits = 1;
  size_t workspace_bytes = 0;  // for num_splits; 0 when 1
};
// The split count flash would choose (or p.num_splits, clamped), ignoring the workspace.
int decode_splits_wanted(const AttentionParams& p, const DeviceCaps& caps);
size_t decode_workspace_bytes(const AttentionParams& p, int num_splits);
// The plan for `p`; kInvalidArgument when the workspace it asks for is missing or too small.
Status plan_decode(const AttentionParams& p, const DeviceCaps& caps, DecodePlan* plan);

// Whether the sm90 kernel exists in this build for p.head_dim and can run on `caps`.
bool sm90_available(const AttentionParams& p, const DeviceCaps& caps);
// Whether the sm80 kernel exists in this build for p.head_dim.
bool sm80_available(const AttentionParams& p);
// The least shared memory any sm80 configuration for p.head_dim needs, bytes.
int sm80_min_smem(const AttentionParams& p);

// The configurations p.backend allows on this device, heuristic's first:
// those whose shared memory fits caps.max_smem, and fallback-only ones only
// when nothing before them fits. Returns how many were written (at most
// `capacity`).
int list_candidates(const AttentionParams& p, const DeviceCaps& caps, Candidate* out, int capacity);

// Fills backend, tile, warps, stages and name of `c` (source untouched).
bool describe(const Candidate& c, const AttentionParams& p, KernelChoice* choice);

// Launches `c`. cudaErrorNotSupported from an sm90 candidate means TMA
// cannot describe the tensors and nothing was launched.
cudaError_t launch(const Candidate& c, const AttentionParams& p, const FwdParams& f, cudaStream_t stream);

FwdParams make_fwd_params(const AttentionParams& p, const DeviceCaps& caps);

// flash::validate, optionally without the check that a requested split
// (num_splits > 1) has its workspace: attention_workspace_size is how a
// caller learns that size, so it must accept the call before it has one.
Status validate_call(const AttentionParams& p, bool check_workspace) noexcept;
// Points f's split fields at p.workspace for `plan`.
void set_split(const AttentionParams& p, const DecodePlan& plan, FwdParams* f);

}  // namespace flash::detail
