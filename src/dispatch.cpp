#include "dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "kernels/decode/api.h"
#include "kernels/sm80/api.h"
#include "src/status.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/api.h"
#endif

namespace flash::detail {
namespace {

// The window as the kernels see it: sides beyond any sequence length
// (validate() caps lengths at 2^30) are unbounded (-1); causal is
// window_right = 0.
constexpr int64_t kUnboundedWindow = int64_t{1} << 30;
int kernel_window_left(const AttentionParams& p) {
  return p.window_left < 0 || p.window_left >= kUnboundedWindow ? -1 : static_cast<int>(p.window_left);
}
int kernel_window_right(const AttentionParams& p) {
  if (p.causal) return 0;
  return p.window_right < 0 || p.window_right >= kUnboundedWindow ? -1 : static_cast<int>(p.window_right);
}

// Calls f(std::integral_constant<int, head_dim>{}) when head_dim is
// compiled into this build (FLASH_HEAD_DIMS), else returns `otherwise`: the
// one switch from a runtime head dim to the template argument of every
// kernel family's instantiations.
template <typename R, typename F>
R with_head_dim(int64_t head_dim, R otherwise, F&& f) {
  switch (head_dim) {
#if FLASH_HAS_HEAD_DIM_32
    case 32: return f(std::integral_constant<int, 32>{});
#endif
#if FLASH_HAS_HEAD_DIM_64
    case 64: return f(std::integral_constant<int, 64>{});
#endif
#if FLASH_HAS_HEAD_DIM_96
    case 96: return f(std::integral_constant<int, 96>{});
#endif
#if FLASH_HAS_HEAD_DIM_128
    case 128: return f(std::integral_constant<int, 128>{});
#endif
#if FLASH_HAS_HEAD_DIM_256
    case 256: return f(std::integral_constant<int, 256>{});
#endif
    default: return otherwise;
  }
}

bool head_dim_compiled(int64_t head_dim) {
  return with_head_dim(head_dim, false, [](auto) { return true; });
}

template <int kHeadDim>
cudaError_t launch_sm80(DType dtype, const FwdParams& f, int index, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm80::run_fwd<DType::kFloat16, kHeadDim>(f, index, stream)
                                  : sm80::run_fwd<DType::kBFloat16, kHeadDim>(f, index, stream);
}

template <int kHeadDim>
cudaError_t launch_decode(DType dtype, const FwdParams& f, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? decode::run_decode<DType::kFloat16, kHeadDim>(f, stream)
                                  : decode::run_decode<DType::kBFloat16, kHeadDim>(f, stream);
}

#if FLASH_HAS_SM90
template <int kHeadDim>
cudaError_t launch_sm90(DType dtype, const FwdParams& f, int index, cudaStream_t stream) {
  // The window as the kernels see it (FwdParams: causal is (-1, 0), bounds
  // past 2^30 are -1).
  const sm90::Mask mask = f.softcap > 0.f       ? sm90::Mask::kSoftcap
                          : f.window_left >= 0  ? sm90::Mask::kWindow
                          : f.window_right >= 0 ? sm90::Mask::kCausal
                                                : sm90::Mask::kTail;
  return dtype == DType::kFloat16 ? sm90::run_fwd<DType::kFloat16, kHeadDim>(f, mask, index, stream)
                                  : sm90::run_fwd<DType::kBFloat16, kHeadDim>(f, mask, index, stream);
}

// The sm90 heuristic's pick is candidate 0 of the head dim and mask
// (kernel_traits.cuh, CandidateTile: the tile each was tuned for on an
// H200, bench/NOTES.md); the others follow it as the autotuner's
// runners-up. Head_dim 128 used to take 128 x 160 for non-causal calls
// above 1k keys and 128 x 176 for long ones; since every hd128 tile runs
// the lazy max, 128 x 128 leads at every length (runs 114 and 125).
// Sliding windows and softcap calls take candidate 0 of the masked
// configurations (not tuned); causal spelled as the window (-1, 0) is causal.

// A causal or sliding-window mask, or a softcap: the sm90 kernel's masked
// configurations.
bool sm90_masked(const AttentionParams& p) {
  return kernel_window_left(p) >= 0 || kernel_window_right(p) >= 0 || p.softcap > 0.f;
}
#endif

}  // namespace

bool sm80_available(const AttentionParams& p) { return head_dim_compiled(p.head_dim); }

bool sm90_supports_features(const AttentionParams& p) {
  // Not seqused_k: the K/V tensor maps cover the allocation, so the last
  // block would load cache rows past the used length, and a masked zero
  // times a NaN there (uninitialised cache memory) is NaN in P V.
  return p.block_table == nullptr && p.seqused_k == nullptr && p.num_splits <= 1 && (p.cu_seqlens_q == nullptr || p.total_q > 0) &&
         (p.cu_seqlens_k == nullptr || p.total_k > 0);
}

bool uses_engine_features(const AttentionParams& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr ||
         p.block_table != nullptr || p.window_left >= 0 || (p.window_right >= 0 && !p.causal) ||
         p.softcap > 0.f || p.num_splits > 1;
}

bool decode_available(const AttentionParams& p, const DeviceCaps& caps) {
  return head_dim_compiled(p.head_dim) && (caps.max_smem == 0 || decode::smem_bytes(p.head_dim) <= caps.max_smem);
}

int decode_smem_bytes(const AttentionParams& p) { return decode::smem_bytes(p.head_dim); }

namespace {
constexpr int kMaxSplits = 128;
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

// How many ways decode splits the keys when the caller leaves it to flash:
// at least two K/V blocks (128 keys) per split, at most 128 splits, none
// when the (batch, K/V head, row block) CTAs alone fill the GPU.
//
// Dense caches: about one CTA per SM, i.e. the fewest splits giving 0.9 x
// num_sms CTAs. Measured on an H200 (bench/NOTES.md, runs 45-46: heads
// 32/8, head dims 64/128/256, batch 1/8/32, 4k and 32k keys): the fastest
// counts gave 64-256 CTAs, and filling every shared-memory slot (the rule
// below) was 10-18% slower at head_dim 64 and up to 9% at 128.
//
// Paged caches: every CTA slot of the GPU (2-4 per SM, by shared memory).
// Among the split counts it takes the smallest whose waves are within 5% as
// full as the best one's (a partly filled last wave costs as much as a full
// one). Paged reads (a block-table lookup per page, scattered pages) want
// the extra CTAs: one per SM made them 26-46% slower at batch 1 and 8 (run
// 46).
int decode_splits_wanted(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.num_splits >= 1) return static_cast<int>(std::min<int64_t>(p.num_splits, kMaxSplits));
  const int64_t g = p.heads_q / p.heads_kv;
  const int64_t m_blocks = ceil_div(std::max<int64_t>(p.seqlen_q, 1) * g, decode::kBlockM);
  const int64_t units = p.batch * p.heads_kv * m_blocks;
  // batch 0 reaches here from query_kernel_choice (the launch paths return
  // before planning); nothing to split.
  if (units <= 0) return 1;
  int64_t keys = p.seqlen_k;
  if (p.block_table != nullptr && p.seqused_k != nullptr) keys = std::max(keys, p.max_pages_per_seq * p.page_size);
  // A left window bounds the keys any row sees.
  if (p.window_left >= 0) {
    keys = std::min(keys, p.window_left + p.seqlen_q + std::max<int64_t>(p.window_right, 0) + decode::kBlockN);
  }
  const int64_t max_splits = std::min<int64_t>(ceil_div(keys, decode::kBlockN) / 2, kMaxSplits);
  const int64_t num_sms = std::max(caps.num_sms, 1);
  if (p.block_table == nullptr) {
    const int64_t target = ceil_div(9 * num_sms, 10);
    if (units >= target || max_splits <= 1) return 1;
    return static_cast<int>(std::min(ceil_div(target, units), max_splits));
  }
  const int smem = decode::smem_bytes(p.head_dim) + 1024;  // + the per-block reservation
  const int per_sm = caps.smem_per_sm > 0 ? std::max(1, caps.smem_per_sm / smem) : 1;
  const int64_t slots = num_sms * per_sm;
  if (units * 5 >= slots * 4 || max_splits <= 1) return 1;
  auto efficiency = [&](int64_t s) {
    const double waves = static_cast<double>(units * s) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int64_t s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  for (int64_t s = 1; s <= max_splits; ++s) {
    if (efficiency(s) >= 0.95 * best) return static_cast<int>(s);
  }
  return 1;
}

size_t decode_workspace_bytes(const AttentionParams& p, int num_splits) {
  if (num_splits <= 1) return 0;
  const auto slots = static_cast<size_t>(num_splits) * static_cast<size_t>(p.batch) *
                     static_cast<size_t>(p.heads_q) * static_cast<size_t>(p.seqlen_q);
  const size_t o_bytes = slots * static_cast<size_t>(p.head_dim) * sizeof(float);
  return o_bytes + slots * sizeof(float);
}

Status plan_decode(const AttentionParams& p, const DeviceCaps& caps, DecodePlan* plan) {
  int splits = decode_splits_wanted(p, caps);
  // The combine kernel's grid has one CTA per (batch, head, query) row.
  if (p.batch * p.heads_q * p.seqlen_q > INT32_MAX) {
    if (p.num_splits > 1) {
      return make_status(StatusCode::kUnsupported,
                         "num_splits %d: batch * heads_q * seqlen_q must be < 2^31 to split the keys",
                         static_cast<int>(p.num_splits));
    }
    splits = 1;
  }
  if (splits > 1 && p.workspace == nullptr && p.num_splits == 0) splits = 1;
  plan->num_splits = splits;
  plan->workspace_bytes = decode_workspace_bytes(p, splits);
  if (splits > 1 && (p.workspace == nullptr || p.workspace_bytes < plan->workspace_bytes)) {
    return make_status(StatusCode::kInvalidArgument,
                       "workspace: %d splits need %zu bytes (attention_workspace_size()); workspace is %s with "
                       "workspace_bytes %zu",
                       splits, plan->workspace_bytes, p.workspace == nullptr ? "null" : "set", p.workspace_bytes);
  }
  return Status{};
}

void set_split(const AttentionParams& p, const DecodePlan& plan, FwdParams* f) {
  f->num_splits = plan.num_splits;
  if (plan.num_splits > 1) {
    const size_t slots = static_cast<size_t>(plan.num_splits) * static_cast<size_t>(p.batch) *
                         static_cast<size_t>(p.heads_q) * static_cast<size_t>(p.seqlen_q);
    f->o_partial = static_cast<float*>(p.workspace);
    f->lse_partial = f->o_partial + slots * static_cast<size_t>(p.head_dim);
  }
}

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
  return caps.major == 9 && head_dim_compiled(p.head_dim) && sm90::num_candidates(p.head_dim, sm90_masked(p)) > 0;
#else
  (void)p, (void)caps;
  return false;
#endif
}

int list_candidates(const AttentionParams& p, const DeviceCaps& caps, Candidate* out, int capacity) {
  int n = 0;
  const bool want_decode = p.backend == Backend::kDecode ||
                           (p.backend == Backend::kAuto && (p.seqlen_q <= 16 || p.num_splits > 1));
  const bool want_sm90 = (p.backend == Backend::kSm90 || p.backend == Backend::kAuto) && sm90_supports_features(p);
  const bool want_sm80 = (p.backend == Backend::kSm80 || p.backend == Backend::kAuto) && p.num_splits <= 1;
  // Short queries: the decode kernel (GQA rows packed, keys split) goes first.
  if (want_decode && decode_available(p, caps) && n < capacity) out[n++] = Candidate{Backend::kDecode, 0};
#if FLASH_HAS_SM90
  if (want_sm90 && sm90_available(p, caps)) {
    // Candidate 0, the heuristic's pick, goes first.
    for (int i = 0; i < sm90::num_candidates(p.head_dim, sm90_masked(p)) && n < capacity; ++i) {
      out[n++] = Candidate{Backend::kSm90, i};
    }
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
  if (c.backend == Backend::kDecode) {
    choice->backend = Backend::kDecode;
    choice->block_m = decode::kBlockM;
    choice->block_n = decode::kBlockN;
    choice->warps = 4;
    choice->stages = decode::stages(p.head_dim);
    std::snprintf(choice->name, sizeof(choice->name), "decode %dx%d 4w %dst", decode::kBlockM, decode::kBlockN,
                  choice->stages);
    return true;
  }
#if FLASH_HAS_SM90
  if (c.backend == Backend::kSm90) return sm90::describe_candidate(p.head_dim, sm90_masked(p), c.index, choice);
#endif
  return false;
}

// The switch from runtime (backend, head_dim) to compiled instantiations.
// Head dims pruned from the build (FLASH_HEAD_DIMS) give cudaErrorInvalidValue.
cudaError_t launch(const Candidate& c, const AttentionParams& p, const FwdParams& f, cudaStream_t stream) {
  return with_head_dim(p.head_dim, cudaErrorInvalidValue, [&](auto head_dim) -> cudaError_t {
    constexpr int kHeadDim = decltype(head_dim)::value;
    if (c.backend == Backend::kSm80) return launch_sm80<kHeadDim>(p.dtype, f, c.index, stream);
    if (c.backend == Backend::kDecode) return launch_decode<kHeadDim>(p.dtype, f, stream);
#if FLASH_HAS_SM90
    if constexpr (kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256) {
      if (c.backend == Backend::kSm90) return launch_sm90<kHeadDim>(p.dtype, f, c.index, stream);
    }
#endif
    return cudaErrorInvalidValue;
  });
}

FwdParams make_fwd_params(const AttentionParams& p, const DeviceCaps& caps) {
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
  f.num_sms = caps.num_sms;
  f.cc_major = caps.major;
  constexpr float kLog2e = 1.4426950408889634f;
  f.softmax_scale = p.softmax_scale != 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  f.softmax_scale_log2 = f.softmax_scale * kLog2e;

  f.cu_seqlens_q = p.cu_seqlens_q;
  f.cu_seqlens_k = p.cu_seqlens_k;
  f.seqused_k = p.seqused_k;
  f.total_q = p.total_q;
  f.total_k = p.total_k;
  f.block_table = p.block_table;
  f.block_table_batch_stride = p.block_table_batch_stride;
  f.page_size = static_cast<int>(p.page_size);
  f.page_shift = -1;
  for (int shift = 4; shift < 31; ++shift) {
    if (p.page_size == (int64_t{1} << shift)) f.page_shift = shift;
  }
  // What the K/V allocation holds per sequence: seqused_k is clamped to it.
  f.max_seqlen_k_alloc = p.block_table != nullptr && p.seqused_k != nullptr
                             ? static_cast<int>(p.max_pages_per_seq * p.page_size)
                             : static_cast<int>(p.seqlen_k);
  f.window_left = kernel_window_left(p);
  f.window_right = kernel_window_right(p);
  f.softcap = p.softcap;
  if (p.softcap > 0.f) {
    // tanh(s * scale / cap) goes through the softmax with scale cap.
    f.softcap_prescale = f.softmax_scale / p.softcap;
    f.softmax_scale = p.softcap;
    f.softmax_scale_log2 = p.softcap * kLog2e;
  }
  f.num_splits = 1;
  return f;
}

}  // namespace flash::detail
