// The C++ API: flash::attention_forward and flash::query_kernel_choice.
// Checks, empty-work shortcuts, the device query, then dispatch.h picks and
// launches a compiled configuration (autotune/ may choose among several).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "autotune/autotuner.h"
#include "dispatch.h"
#include "flash/flash.hpp"
#include "flash/version.h"
#include "status.h"

namespace flash {
namespace {

using detail::Candidate;
using detail::DeviceCaps;
using detail::make_status;

constexpr int kMaxCandidates = 8;

Status query_device(DeviceCaps* caps) {
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
  if (caps->major < 8) {
    return make_status(StatusCode::kUnsupported, "flash needs an sm_80 or newer GPU; device %d is sm_%d%d",
                       caps->device, caps->major, caps->minor);
  }
  return Status{};
}

// The configurations that may run `p` here, or why there are none.
Status candidates_for(const AttentionParams& p, const DeviceCaps& caps, Candidate* out, int* n) {
  *n = detail::list_candidates(p, caps, out, kMaxCandidates);
  if (*n > 0) return Status{};
  if (!detail::sm80_available(p)) {
    return make_status(StatusCode::kUnsupported,
                       "head_dim %lld was not compiled into this build; rebuild with it in FLASH_HEAD_DIMS "
                       "(this build has: %s)",
                       static_cast<long long>(p.head_dim), FLASH_HEAD_DIMS_STRING);
  }
  if (p.backend == Backend::kSm90 && !detail::sm90_supports_features(p)) {
    return make_status(StatusCode::kUnsupported,
                       "Backend::kSm90 has no seqused_k, paged KV or split-KV, and runs varlen calls "
                       "only with total_q / total_k given; use Backend::kAuto, kSm80 or kDecode");
  }
  if (p.backend == Backend::kSm80 && p.num_splits > 1) {
    return make_status(StatusCode::kUnsupported,
                       "Backend::kSm80 does not split the keys (num_splits %d); use Backend::kAuto or kDecode",
                       static_cast<int>(p.num_splits));
  }
  if (p.backend == Backend::kDecode || p.num_splits > 1) {
    return make_status(StatusCode::kUnsupported,
                       "the split-KV decode kernel (Backend::kDecode, or num_splits > 1) for head_dim %lld needs "
                       "%d KiB of shared memory per block; device %d allows %d KiB",
                       static_cast<long long>(p.head_dim), detail::decode_smem_bytes(p) / 1024, caps.device,
                       caps.max_smem / 1024);
  }
  if (p.backend == Backend::kSm90) {
    if (caps.major != 9) {
      return make_status(StatusCode::kUnsupported, "Backend::kSm90 needs an sm_90 GPU; device %d is sm_%d%d",
                         caps.device, caps.major, caps.minor);
    }
    return make_status(StatusCode::kUnsupported,
                       "Backend::kSm90 does not cover head_dim %lld in this build (it has 64, 128, 256 when they "
                       "are in FLASH_HEAD_DIMS and 90a is in CMAKE_CUDA_ARCHITECTURES)",
                       static_cast<long long>(p.head_dim));
  }
  return make_status(StatusCode::kUnsupported,
                     "head_dim %lld needs %d KiB of shared memory per block; device %d (sm_%d%d) allows %d KiB",
                     static_cast<long long>(p.head_dim), detail::sm80_min_smem(p) / 1024, caps.device, caps.major,
                     caps.minor, caps.max_smem / 1024);
}

// The device and the configurations that may run `p` on it.
Status prepare(const AttentionParams& p, DeviceCaps* caps, Candidate* cands, int* n) {
  const Status status = query_device(caps);
  return status.ok() ? candidates_for(p, *caps, cands, n) : status;
}

// The tuner's shape classes and scratch outputs cover dense calls only; the
// decode kernel and engine features run the heuristic's choice (cands[0]).
bool tunable(const AttentionParams& p, const Candidate& first) {
  return first.backend != Backend::kDecode && !detail::uses_engine_features(p);
}

Status launch_status(cudaError_t launch_error, const DeviceCaps& caps) {
  if (launch_error == cudaErrorNoKernelImageForDevice || launch_error == cudaErrorInvalidDeviceFunction) {
    return make_status(StatusCode::kUnsupported,
                       "this build has no kernel image for sm_%d%d (%s); add it to CMAKE_CUDA_ARCHITECTURES",
                       caps.major, caps.minor, cudaGetErrorString(launch_error));
  }
  if (launch_error != cudaSuccess) {
    return make_status(StatusCode::kCudaError, "kernel launch failed: %s", cudaGetErrorString(launch_error));
  }
  return Status{};
}

}  // namespace

const char* version() noexcept { return FLASH_VERSION_STRING; }

Status attention_forward(const AttentionParams& params, CUstream_st* stream) noexcept {
  Status status = validate(params);
  if (!status.ok() || params.batch == 0 || params.seqlen_q == 0) return status;
  DeviceCaps caps;
  Candidate cands[kMaxCandidates];
  int n = 0;
  status = prepare(params, &caps, cands, &n);
  if (!status.ok()) return status;

  detail::Selection selection;
  detail::DecodePlan plan;
  if (cands[0].backend == Backend::kDecode) {
    status = detail::plan_decode(params, caps, &plan);
    if (!status.ok()) return status;
  }
  selection.candidate = cands[0];
  const cudaError_t tune_error =
      tunable(params, cands[0])
          ? detail::select_candidate(params, caps, cands, n, stream, /*may_tune=*/true, &selection)
          : cudaSuccess;
  if (tune_error != cudaSuccess) {
    // select_candidate falls back to the heuristic for what it can recover
    // from (no memory for the scratch outputs, say); what reaches here left
    // the device unusable.
    return make_status(StatusCode::kCudaError, "autotuning failed: %s", cudaGetErrorString(tune_error));
  }
  detail::FwdParams f = detail::make_fwd_params(params, caps);
  if (selection.candidate.backend == Backend::kDecode) detail::set_split(params, plan, &f);
  cudaError_t err = detail::launch(selection.candidate, params, f, stream);
  if (err == cudaErrorNotSupported && selection.candidate.backend == Backend::kSm90) {
    // TMA cannot describe these tensors (a zero stride, or seqlen_k == 0).
    if (params.backend == Backend::kSm90) {
      return make_status(StatusCode::kUnsupported,
                         "Backend::kSm90 cannot describe these tensors to TMA (a zero stride, or seqlen_k == 0); "
                         "use Backend::kAuto or kSm80");
    }
    err = detail::launch(Candidate{Backend::kSm80, 0}, params, f, stream);
  }
  return launch_status(err, caps);
}

Status query_kernel_choice(const AttentionParams& params, KernelChoice* choice) noexcept {
  if (choice == nullptr) return make_status(StatusCode::kInvalidArgument, "choice is null");
  Status status = validate(params);
  if (!status.ok()) return status;
  DeviceCaps caps;
  Candidate cands[kMaxCandidates];
  int n = 0;
  status = prepare(params, &caps, cands, &n);
  if (!status.ok()) return status;
  detail::Selection selection;
  selection.candidate = cands[0];
  if (tunable(params, cands[0])) {
    (void)detail::select_candidate(params, caps, cands, n, nullptr, /*may_tune=*/false, &selection);
  }
  *choice = KernelChoice{};
  detail::describe(selection.candidate, params, choice);
  choice->source = selection.source;
  if (selection.candidate.backend == Backend::kDecode) {
    detail::DecodePlan plan;
    status = detail::plan_decode(params, caps, &plan);
    if (!status.ok()) return status;
    const size_t len = std::strlen(choice->name);
    std::snprintf(choice->name + len, sizeof(choice->name) - len, " %d split%s", plan.num_splits,
                  plan.num_splits == 1 ? "" : "s");
  }
  return Status{};
}

Status attention_workspace_size(const AttentionParams& params, size_t* bytes) noexcept {
  if (bytes == nullptr) return make_status(StatusCode::kInvalidArgument, "bytes is null");
  *bytes = 0;
  Status status = detail::validate_call(params, /*check_workspace=*/false);
  if (!status.ok() || params.batch == 0 || params.seqlen_q == 0) return status;
  DeviceCaps caps;
  Candidate cands[kMaxCandidates];
  int n = 0;
  status = prepare(params, &caps, cands, &n);
  if (!status.ok()) return status;
  if (cands[0].backend == Backend::kDecode) {
    *bytes = detail::decode_workspace_bytes(params, detail::decode_splits_wanted(params, caps));
  }
  return Status{};
}

}  // namespace flash
