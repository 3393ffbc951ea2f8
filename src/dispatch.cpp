#include "dispatch.h"

#include <cmath>
#include <utility>

#include "kernels/sm80/api.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/api.h"
#endif

namespace flash::detail {
namespace {

bool head_dim_compiled(int64_t head_dim) {
  switch (head_dim) {
#if FLASH_HAS_HEAD_DIM_32
    case 32:
#endif
#if FLASH_HAS_HEAD_DIM_64
    case 64:
#endif
#if FLASH_HAS_HEAD_DIM_96
    case 96:
#endif
#if FLASH_HAS_HEAD_DIM_128
    case 128:
#endif
#if FLASH_HAS_HEAD_DIM_256
    case 256:
#endif
      return true;
    default:
      return false;
  }
}

template <int kHeadDim>
cudaError_t launch_sm80(DType dtype, const FwdParams& f, bool causal, int index, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm80::run_fwd<DType::kFloat16, kHeadDim>(f, causal, index, stream)
                                  : sm80::run_fwd<DType::kBFloat16, kHeadDim>(f, causal, index, stream);
}

#if FLASH_HAS_SM90
template <int kHeadDim>
cudaError_t launch_sm90(DType dtype, const FwdParams& f, bool causal, int index, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm90::run_fwd<DType::kFloat16, kHeadDim>(f, causal, index, stream)
                                  : sm90::run_fwd<DType::kBFloat16, kHeadDim>(f, causal, index, stream);
}
#endif

// The sm90 heuristic's pick among the compiled candidates: candidate 0 (the
// tile each head dim and mask was tuned for at long sequences) except where
// the H200 sweep of flash_bench --autotune (bench/NOTES.md, run 15) showed
// candidate 1 (128 x 128) ahead by 10% or more in both dtypes: short causal
// sequences at head_dim 64 (+10% to +37% up to N = 2048) and short
// non-causal ones at head_dim 128 (+12% to +22% up to N = 1024).
int sm90_heuristic_index(const AttentionParams& p) {
  if (p.head_dim == 64 && p.causal && p.seqlen_q <= 2048) return 1;
  if (p.head_dim == 128 && !p.causal && p.seqlen_k <= 1024) return 1;
  return 0;
}

}  // namespace

bool sm80_available(const AttentionParams& p) { return head_dim_compiled(p.head_dim); }

int sm80_min_smem(const AttentionParams& p) {
  int least = 0;
  for (int i = 0; i < sm80::num_candidates(p.head_dim); ++i) {
    const int bytes = sm80::candidate_smem_bytes(p.head_dim, i);
    if (least == 0 || bytes < least) least = bytes;
  }
  return least;
}

bool sm90_available(const AttentionParams& p, const DeviceCaps& caps) {
#if FLASH_HAS_SM90
  return caps.major == 9 && head_dim_compiled(p.head_dim) && sm90::num_candidates(p.head_dim, p.causal) > 0;
#else
  (void)p, (void)caps;
  return false;
#endif
}

int list_candidates(const AttentionParams& p, const DeviceCaps& caps, Candidate* out, int capacity) {
  int n = 0;
  const bool want_sm90 = p.backend == Backend::kSm90 || p.backend == Backend::kAuto;
  const bool want_sm80 = p.backend == Backend::kSm80 || p.backend == Backend::kAuto;
#if FLASH_HAS_SM90
  if (want_sm90 && sm90_available(p, caps)) {
    const int first = n;
    for (int i = 0; i < sm90::num_candidates(p.head_dim, p.causal) && n < capacity; ++i) {
      out[n++] = Candidate{Backend::kSm90, i};
    }
    // The heuristic's pick goes first.
    const int pick = sm90_heuristic_index(p);
    if (pick > 0 && first + pick < n) std::swap(out[first], out[first + pick]);
  }
#else
  (void)want_sm90, (void)caps;
#endif
  if (want_sm80 && sm80_available(p)) {
    bool any = false;
    for (int i = 0; i < sm80::num_candidates(p.head_dim) && n < capacity; ++i) {
      if (caps.max_smem > 0 && sm80::candidate_smem_bytes(p.head_dim, i) > caps.max_smem) continue;
      if (any && sm80::candidate_is_fallback(p.head_dim, i)) continue;
      out[n++] = Candidate{Backend::kSm80, i};
      any = true;
    }
  }
  return n;
}

bool describe(const Candidate& c, const AttentionParams& p, KernelChoice* choice) {
  if (c.backend == Backend::kSm80) return sm80::describe_candidate(p.head_dim, c.index, choice);
#if FLASH_HAS_SM90
  if (c.backend == Backend::kSm90) return sm90::describe_candidate(p.head_dim, p.causal, c.index, choice);
#endif
  return false;
}

// The switch from runtime (backend, head_dim) to compiled instantiations.
// Head dims pruned from the build (FLASH_HEAD_DIMS) fall to the default.
cudaError_t launch(const Candidate& c, const AttentionParams& p, const FwdParams& f, cudaStream_t stream) {
  if (c.backend == Backend::kSm80) {
    switch (p.head_dim) {
#if FLASH_HAS_HEAD_DIM_32
      case 32: return launch_sm80<32>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_64
      case 64: return launch_sm80<64>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_96
      case 96: return launch_sm80<96>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_128
      case 128: return launch_sm80<128>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_256
      case 256: return launch_sm80<256>(p.dtype, f, p.causal, c.index, stream);
#endif
      default: return cudaErrorInvalidValue;
    }
  }
#if FLASH_HAS_SM90
  if (c.backend == Backend::kSm90) {
    switch (p.head_dim) {
#if FLASH_HAS_HEAD_DIM_64
      case 64: return launch_sm90<64>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_128
      case 128: return launch_sm90<128>(p.dtype, f, p.causal, c.index, stream);
#endif
#if FLASH_HAS_HEAD_DIM_256
      case 256: return launch_sm90<256>(p.dtype, f, p.causal, c.index, stream);
#endif
      default: return cudaErrorInvalidValue;
    }
  }
#endif
  return cudaErrorInvalidValue;
}

FwdParams make_fwd_params(const AttentionParams& p, int num_sms) {
  FwdParams f{};
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
  f.num_sms = num_sms;
  constexpr float kLog2e = 1.4426950408889634f;
  f.softmax_scale = p.softmax_scale != 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  f.softmax_scale_log2 = f.softmax_scale * kLog2e;
  return f;
}

}  // namespace flash::detail
