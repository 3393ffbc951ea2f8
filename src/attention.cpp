// The C++ API: flash::attention_forward, query_kernel_choice and
// attention_workspace_size. Each validates, queries the device, and reads
// the plan (plan.h); the autotuner may pick among the plan's candidates, and
// dispatch.h launches the one chosen.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>

#include "append.h"
#include "autotune/autotuner.h"
#include "dispatch.h"
#include "flash/flash.hpp"
#include "flash/version.h"
#include "status.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/tensor_map.h"
#endif

namespace flash {
namespace {

using detail::DeviceCaps;
using detail::make_status;
using detail::Plan;

// The device's capabilities and the plan of `p` on it.
Status plan_call(const AttentionParams& p, Plan* plan) {
  DeviceCaps caps;
  const Status status = detail::query_device(&caps);
  return status.ok() ? detail::make_plan(p, caps, plan) : status;
}

// `fp8_prefill`: the call has no other kernel to fall back on.
Status launch_status(cudaError_t launch_error, const DeviceCaps& caps, bool fp8_prefill = false) {
  if (launch_error == cudaErrorNoKernelImageForDevice || launch_error == cudaErrorInvalidDeviceFunction) {
    return make_status(StatusCode::kUnsupported,
                       "this build has no kernel image for sm_%d%d (%s); add it to CMAKE_CUDA_ARCHITECTURES",
                       caps.major, caps.minor, cudaGetErrorString(launch_error));
  }
  if (launch_error == cudaErrorInvalidConfiguration) {
    return make_status(StatusCode::kUnsupported,
                       "the launch exceeds the device's grid limits for this shape; split the call");
  }
  if (launch_error == cudaErrorNotSupported) {
    // The plan checks every limit of the encoder that flash knows of
    // (kernels/sm90/tma_limits.h): reaching this is a gap in those checks.
    return make_status(StatusCode::kUnsupported,
                       "the CUDA driver refused a TMA tensor map that flash's checks accepted (please report it)%s",
                       fp8_prefill ? "" : "; Backend::kSm80 runs this call");
  }
  if (launch_error != cudaSuccess) {
    return make_status(StatusCode::kCudaError, "kernel launch failed: %s", cudaGetErrorString(launch_error));
  }
  return Status{};
}

}  // namespace

namespace detail {

Status query_device(DeviceCaps* caps) noexcept {
  cudaError_t err = cudaGetDevice(&caps->device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&caps->major, cudaDevAttrComputeCapabilityMajor, caps->device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&caps->minor, cudaDevAttrComputeCapabilityMinor, caps->device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&caps->num_sms, cudaDevAttrMultiProcessorCount, caps->device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&caps->max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, caps->device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&caps->smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, caps->device);
  }
  if (err != cudaSuccess) {
    return make_status(StatusCode::kCudaError, "could not query the current CUDA device: %s",
                       cudaGetErrorString(err));
  }
#if FLASH_HAS_SM90
  caps->tma_encoder = sm90::tma_encoder_available();
#endif
  if (caps->major < 8) {
    return make_status(StatusCode::kUnsupported, "flash needs an sm_80 or newer GPU; device %d is sm_%d%d",
                       caps->device, caps->major, caps->minor);
  }
  return Status{};
}

}  // namespace detail

const char* version() noexcept { return FLASH_VERSION_STRING; }

Status attention_forward(const AttentionParams& params, CUstream_st* stream) noexcept {
  Status status = validate(params);
  if (!status.ok() || params.batch == 0 || params.seqlen_q == 0) return status;
  const bool appends = detail::appends(params);
  // With new K/V rows, the plain call that attends after the append.
  // (Calls with seqused_k are never tuned, so the append is the kernel
  // right before the attention's on the stream.)
  const AttentionParams call = detail::attention_call(params);
  Plan plan;
  status = plan_call(call, &plan);
  if (!status.ok()) return status;
  // A tuned call's trial launches read the cache, so its append would have
  // to run first; otherwise the candidate is known before anything runs,
  // and where it is the decode kernel, that kernel does the append itself
  // (one launch fewer).
  if (appends && plan.tunable) {
    status = launch_status(detail::launch_append(params, stream), plan.caps);
    if (!status.ok()) return status;
  }
  detail::Selection selection;
  const cudaError_t tune_error = detail::select_candidate(call, plan, stream, /*may_tune=*/true, &selection);
  if (tune_error != cudaSuccess) {
    // select_candidate falls back to the heuristic for what it can recover
    // from (no memory for the scratch outputs, say); what reaches here left
    // the device unusable.
    return make_status(StatusCode::kCudaError, "autotuning failed: %s", cudaGetErrorString(tune_error));
  }
  const bool decode_appends =
      appends && !plan.tunable && detail::decode_does_append(plan, selection.candidate, params);
  if (appends && !plan.tunable && !decode_appends) {
    status = launch_status(detail::launch_append(params, stream), plan.caps);
    if (!status.ok()) return status;
  }
  return launch_status(detail::launch(plan, selection.candidate, call, stream, appends ? &params : nullptr,
                                      decode_appends),
                       plan.caps, plan.fp8_prefill);
}

Status query_kernel_choice(const AttentionParams& params, KernelChoice* choice) noexcept {
  if (choice == nullptr) return make_status(StatusCode::kInvalidArgument, "choice is null");
  Status status = validate(params);
  if (!status.ok()) return status;
  if (params.batch == 0 || params.seqlen_q == 0) {
    // attention_forward returns at once: nothing runs, whatever the device.
    *choice = KernelChoice{};
    std::snprintf(choice->name, sizeof(choice->name), "none (empty call)");
    return Status{};
  }
  const AttentionParams call = detail::attention_call(params);
  Plan plan;
  status = plan_call(call, &plan);
  if (!status.ok()) return status;
  detail::Selection selection;
  (void)detail::select_candidate(call, plan, nullptr, /*may_tune=*/false, &selection);
  *choice = KernelChoice{};
  detail::describe(plan, selection.candidate, call, choice);
  choice->source = selection.source;
  return Status{};
}

Status attention_workspace_size(const AttentionParams& params, size_t* bytes) noexcept {
  if (bytes == nullptr) return make_status(StatusCode::kInvalidArgument, "bytes is null");
  *bytes = 0;
  Status status = detail::validate_call(params, /*check_workspace=*/false);
  if (!status.ok() || params.batch == 0 || params.seqlen_q == 0) return status;
  // An append's lengths (and rotated Q) come first, the split partials after.
  const size_t append_bytes = detail::append_workspace_bytes(params);
  if (append_bytes == SIZE_MAX) {
    return make_status(StatusCode::kInvalidArgument, "the rotated Q of this append does not fit in size_t");
  }
  Plan plan;
  status = plan_call(detail::attention_call(params), &plan);
  if (!status.ok()) return status;
  if (plan.workspace_wanted == SIZE_MAX || plan.workspace_wanted > SIZE_MAX - append_bytes) {
    return make_status(StatusCode::kInvalidArgument,
                       "the split-KV workspace for %d splits does not fit in size_t; split less or not at all",
                       plan.splits_wanted);
  }
  *bytes = append_bytes + plan.workspace_wanted;
  return Status{};
}

}  // namespace flash
