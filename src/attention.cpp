// flash::attention_forward: checks, empty-work shortcuts, device query, and
// the one dispatch switch from runtime (dtype, head_dim) to a compiled kernel.
#include <cuda_runtime_api.h>

#include <cmath>

#include "flash/flash.hpp"
#include "flash/version.h"
#include "kernels/params.h"
#include "kernels/sm80/api.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/api.h"
#endif
#include "status.h"

namespace flash {
namespace {

using detail::make_status;

detail::FwdParams make_fwd_params(const AttentionParams& p) {
  detail::FwdParams f{};
  f.q = p.q;
  f.k = p.k;
  f.v = p.v;
  f.o = p.o;
  f.lse = p.lse;
  f.q_batch_stride = p.q_batch_stride;
  f.q_seq_stride = p.q_seq_stride;
  f.q_head_stride = p.q_head_stride;
  f.k_batch_stride = p.k_batch_stride;
  f.k_seq_stride = p.k_seq_stride;
  f.k_head_stride = p.k_head_stride;
  f.v_batch_stride = p.v_batch_stride;
  f.v_seq_stride = p.v_seq_stride;
  f.v_head_stride = p.v_head_stride;
  f.o_batch_stride = p.o_batch_stride;
  f.o_seq_stride = p.o_seq_stride;
  f.o_head_stride = p.o_head_stride;
  f.batch = static_cast<int>(p.batch);
  f.seqlen_q = static_cast<int>(p.seqlen_q);
  f.seqlen_k = static_cast<int>(p.seqlen_k);
  f.heads_q = static_cast<int>(p.heads_q);
  f.heads_kv = static_cast<int>(p.heads_kv);
  f.q_per_kv = static_cast<int>(p.heads_q / p.heads_kv);
  constexpr float kLog2e = 1.4426950408889634f;
  f.softmax_scale = p.softmax_scale != 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  f.softmax_scale_log2 = f.softmax_scale * kLog2e;
  return f;
}

template <int kHeadDim>
cudaError_t run_sm80_head_dim(DType dtype, const detail::FwdParams& f, bool causal, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm80::run_fwd<DType::kFloat16, kHeadDim>(f, causal, stream)
                                  : sm80::run_fwd<DType::kBFloat16, kHeadDim>(f, causal, stream);
}

// The dispatch layer: runtime head_dim -> compiled instantiation. Head dims
// pruned from the build (FLASH_HEAD_DIMS) fall through to the error default.
Status dispatch_sm80(const AttentionParams& p, const detail::FwdParams& f, cudaStream_t stream,
                     cudaError_t* launch_error) {
  switch (p.head_dim) {
#if FLASH_HAS_HEAD_DIM_32
    case 32: *launch_error = run_sm80_head_dim<32>(p.dtype, f, p.causal, stream); return Status{};
#endif
#if FLASH_HAS_HEAD_DIM_64
    case 64: *launch_error = run_sm80_head_dim<64>(p.dtype, f, p.causal, stream); return Status{};
#endif
#if FLASH_HAS_HEAD_DIM_96
    case 96: *launch_error = run_sm80_head_dim<96>(p.dtype, f, p.causal, stream); return Status{};
#endif
#if FLASH_HAS_HEAD_DIM_128
    case 128: *launch_error = run_sm80_head_dim<128>(p.dtype, f, p.causal, stream); return Status{};
#endif
#if FLASH_HAS_HEAD_DIM_256
    case 256: *launch_error = run_sm80_head_dim<256>(p.dtype, f, p.causal, stream); return Status{};
#endif
    default:
      return make_status(StatusCode::kUnsupported,
                         "head_dim %lld was not compiled into this build; rebuild with it in FLASH_HEAD_DIMS "
                         "(this build has: %s)",
                         static_cast<long long>(p.head_dim), FLASH_HEAD_DIMS_STRING);
  }
}

#if FLASH_HAS_SM90
template <int kHeadDim>
cudaError_t run_sm90_head_dim(DType dtype, const detail::FwdParams& f, bool causal, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm90::run_fwd<DType::kFloat16, kHeadDim>(f, causal, stream)
                                  : sm90::run_fwd<DType::kBFloat16, kHeadDim>(f, causal, stream);
}
#endif

// The Hopper kernel's dispatch. Returns false when it does not cover this
// head dim in this build; otherwise *launch_error is the result (with
// cudaErrorNotSupported meaning TMA could not describe the tensors).
bool dispatch_sm90(const AttentionParams& p, const detail::FwdParams& f, cudaStream_t stream,
                   cudaError_t* launch_error) {
#if FLASH_HAS_SM90
  switch (p.head_dim) {
#if FLASH_HAS_HEAD_DIM_64
    case 64: *launch_error = run_sm90_head_dim<64>(p.dtype, f, p.causal, stream); return true;
#endif
#if FLASH_HAS_HEAD_DIM_128
    case 128: *launch_error = run_sm90_head_dim<128>(p.dtype, f, p.causal, stream); return true;
#endif
#if FLASH_HAS_HEAD_DIM_256
    case 256: *launch_error = run_sm90_head_dim<256>(p.dtype, f, p.causal, stream); return true;
#endif
    default: return false;
  }
#else
  (void)p, (void)f, (void)stream, (void)launch_error;
  return false;
#endif
}

Status launch_status(cudaError_t launch_error, int major, int minor) {
  if (launch_error == cudaErrorNoKernelImageForDevice || launch_error == cudaErrorInvalidDeviceFunction) {
    return make_status(StatusCode::kUnsupported,
                       "this build has no kernel image for sm_%d%d (%s); add it to CMAKE_CUDA_ARCHITECTURES", major,
                       minor, cudaGetErrorString(launch_error));
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
  if (!status.ok()) return status;
  if (params.batch == 0 || params.seqlen_q == 0) return status;

  int device = 0;
  int major = 0;
  int minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  int num_sms = 0;
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) {
    return make_status(StatusCode::kCudaError, "could not query the current CUDA device: %s",
                       cudaGetErrorString(err));
  }
  if (major < 8) {
    return make_status(StatusCode::kUnsupported, "flash needs an sm_80 or newer GPU; device %d is sm_%d%d", device,
                       major, minor);
  }

  detail::FwdParams f = make_fwd_params(params);
  f.num_sms = num_sms;
  cudaError_t launch_error = cudaSuccess;
  if (params.backend == Backend::kSm90 || (params.backend == Backend::kAuto && major == 9)) {
    if (params.backend == Backend::kSm90 && major != 9) {
      return make_status(StatusCode::kUnsupported, "Backend::kSm90 needs an sm_90 GPU; device %d is sm_%d%d", device,
                         major, minor);
    }
    if (dispatch_sm90(params, f, stream, &launch_error)) {
      if (launch_error != cudaErrorNotSupported) return launch_status(launch_error, major, minor);
      if (params.backend == Backend::kSm90) {
        return make_status(StatusCode::kUnsupported,
                           "Backend::kSm90 cannot describe these tensors to TMA (a zero stride, or seqlen_k == 0); "
                           "use Backend::kAuto or kSm80");
      }
    } else if (params.backend == Backend::kSm90) {
      return make_status(StatusCode::kUnsupported,
                         "Backend::kSm90 does not cover head_dim %lld in this build (it has 64, 128, 256 when they "
                         "are in FLASH_HEAD_DIMS and 90a is in CMAKE_CUDA_ARCHITECTURES)",
                         static_cast<long long>(params.head_dim));
    }
  }
  status = dispatch_sm80(params, f, stream, &launch_error);
  if (!status.ok()) return status;
  return launch_status(launch_error, major, minor);
}

}  // namespace flash
