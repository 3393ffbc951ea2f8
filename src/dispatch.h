// The execution layer: turns a plan (plan.h) and one of its candidates into
// kernel arguments and a launch of the matching template instantiation. It
// decides nothing; the only place that maps runtime values (backend,
// head_dim, dtype, mask variant, candidate) to instantiations.
#pragma once

#include <cuda_runtime_api.h>

#include "flash/flash.hpp"
#include "kernels/params.h"
#include "plan.h"

namespace flash::detail {

// The window as the kernels see it: sides beyond any sequence length
// (validate() caps lengths at 2^30) are unbounded (-1); causal is window_right = 0.
int kernel_window_left(const AttentionParams& p) noexcept;
int kernel_window_right(const AttentionParams& p) noexcept;

// The current device's capabilities (kCudaError if it cannot be queried,
// kUnsupported below sm_80).
Status query_device(DeviceCaps* caps) noexcept;

// Kernel arguments of `p` on a device with `caps`, for one split (launch()
// sets the split fields from the plan).
FwdParams make_fwd_params(const AttentionParams& p, const DeviceCaps& caps) noexcept;

// Fills backend, tile, warps, stages and name of `c` as `plan` runs it (source untouched).
bool describe(const Plan& plan, const Candidate& c, const AttentionParams& p, KernelChoice* choice);

// Launches candidate `c` of `plan` for `p`. Errors: the launch's;
// cudaErrorNotSupported when the driver's tensor-map encoder refused
// tensors the plan accepted (nothing launched).
// `appended`: the call as the caller made it when `p` is its attention
// after an append (attention_call, src/append.h). Either the append kernel
// was launched on `stream` just before (the decode kernel's launch may
// overlap its run; the kernel waits for it, then reads the lengths and
// rotated Q it wrote); or, with
// `decode_appends` (only where decode_does_append() said so), no append
// kernel ran and the decode kernel does the whole append itself.
cudaError_t launch(const Plan& plan, const Candidate& c, const AttentionParams& p, cudaStream_t stream,
                   const AttentionParams* appended = nullptr, bool decode_appends = false);

// Whether the decode kernel can do the whole append of `appended` (a call
// with k_new, accepted) itself when candidate `c` of `plan` runs its
// attention: the decode kernel's default (candidate 0; the two-stage
// variant has no such kernel) on a bf16/fp16 cache, on sm_90 or newer.
bool decode_does_append(const Plan& plan, const Candidate& c, const AttentionParams& appended) noexcept;

// The candidate and split count of the last launch() on this thread, so
// tests can check that query_kernel_choice names what attention_forward runs.
struct LaunchRecord {
  Candidate candidate;
  int num_splits = 0;  // 0: nothing launched yet on this thread
};
LaunchRecord last_launch() noexcept;

// flash::validate, optionally without the check that a requested split
// (num_splits > 1) has its workspace: attention_workspace_size is how a
// caller learns that size, so it must accept the call before it has one.
Status validate_call(const AttentionParams& p, bool check_workspace) noexcept;

}  // namespace flash::detail
