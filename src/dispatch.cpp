#include "dispatch.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "head_dims.h"
#include "kernels/decode/api.h"
#include "kernels/sm80/api.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/api.h"
#include "kernels/sm90/fp8_vt.h"
#include "kernels/sm90/tma_limits.h"
#endif

namespace flash::detail {
namespace {

constexpr int64_t kUnboundedWindow = int64_t{1} << 30;

thread_local LaunchRecord t_last_launch;

// Appends printf-style text to a kernel choice's name (truncated to fit).
__attribute__((format(printf, 2, 3))) void append_to_name(KernelChoice* choice, const char* format, ...) {
  const size_t len = std::strlen(choice->name);
  va_list args;
  va_start(args, format);
  std::vsnprintf(choice->name + len, sizeof(choice->name) - len, format, args);
  va_end(args);
}

template <int kHeadDim>
cudaError_t launch_sm80(DType dtype, const FwdParams& f, int index, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? sm80::run_fwd<DType::kFloat16, kHeadDim>(f, index, stream)
                                  : sm80::run_fwd<DType::kBFloat16, kHeadDim>(f, index, stream);
}

// `index`: the decode kernel's candidate (1: the two-stage variant).
template <int kHeadDim>
cudaError_t launch_decode(DType dtype, bool fp8, const FwdParams& f, int index, cudaStream_t stream) {
  if (fp8) {
    // fp8 K/V tiles exist for the multiples of 64 (the plan picks one).
    if constexpr (fp8_head_dim(kHeadDim)) {
      return dtype == DType::kFloat16 ? decode::run_decode_fp8<DType::kFloat16, kHeadDim>(f, index, stream)
                                      : decode::run_decode_fp8<DType::kBFloat16, kHeadDim>(f, index, stream);
    }
    return cudaErrorInvalidValue;
  }
  return dtype == DType::kFloat16 ? decode::run_decode<DType::kFloat16, kHeadDim>(f, index, stream)
                                  : decode::run_decode<DType::kBFloat16, kHeadDim>(f, index, stream);
}

#if FLASH_HAS_SM90
template <int kHeadDim>
cudaError_t launch_sm90(DType dtype, bool fp8, const FwdParams& f, MaskVariant mask, int index, cudaStream_t stream) {
  // KV-cache calls have one configuration, sm90::cache_candidate's (the
  // plan offers only that one).
  if (fp8) {
    if (index != sm90::cache_candidate(kHeadDim, true)) return cudaErrorInvalidValue;
    if constexpr (fp8_head_dim(kHeadDim)) {
      return dtype == DType::kFloat16 ? sm90::run_fwd_cache_fp8<DType::kFloat16, kHeadDim>(f, mask, stream)
                                      : sm90::run_fwd_cache_fp8<DType::kBFloat16, kHeadDim>(f, mask, stream);
    }
    return cudaErrorInvalidValue;
  }
  if (f.seqused_k != nullptr || f.block_table != nullptr) {
    if (index != sm90::cache_candidate(kHeadDim, false)) return cudaErrorInvalidValue;
    return dtype == DType::kFloat16 ? sm90::run_fwd_cache<DType::kFloat16, kHeadDim>(f, mask, stream)
                                    : sm90::run_fwd_cache<DType::kBFloat16, kHeadDim>(f, mask, stream);
  }
  return dtype == DType::kFloat16 ? sm90::run_fwd<DType::kFloat16, kHeadDim>(f, mask, index, stream)
                                  : sm90::run_fwd<DType::kBFloat16, kHeadDim>(f, mask, index, stream);
}
#endif

}  // namespace

int kernel_window_left(const AttentionParams& p) noexcept {
  return p.window_left < 0 || p.window_left >= kUnboundedWindow ? -1 : static_cast<int>(p.window_left);
}

int kernel_window_right(const AttentionParams& p) noexcept {
  if (p.causal) return 0;
  return p.window_right < 0 || p.window_right >= kUnboundedWindow ? -1 : static_cast<int>(p.window_right);
}

bool describe(const Plan& plan, const Candidate& c, const AttentionParams& p, KernelChoice* choice) {
  if (c.backend == Backend::kSm80) {
    if (!sm80::describe_candidate(kernel_head_dim(call_head_dim(p.head_dim, p.head_dim_v)), c.index, choice)) return false;
    if (plan.num_splits > 1) append_to_name(choice, " %d splits", plan.num_splits);
    return true;
  }
  const bool wide = wide_shape(p.head_dim, p.head_dim_v);
  if (c.backend == Backend::kDecode && (mla_shape(p.head_dim, p.head_dim_v) || wide)) {
    // Candidate 1: the variant for devices with 99 KiB a block (plan_split_d).
    if (c.index != 0 && c.index != 1) return false;
    choice->backend = Backend::kDecode;
    choice->block_m = decode::kMlaBlockM;
    choice->block_n = decode::split_d_block_n(wide, c.index);
    choice->warps = 4;
    choice->stages = decode::split_d_stages(wide, c.index);
    std::snprintf(choice->name, sizeof(choice->name), "decode %s %dx%d 4w %dst %d split%s", wide ? "hd512" : "mla",
                  decode::kMlaBlockM, choice->block_n, choice->stages, plan.num_splits,
                  plan.num_splits == 1 ? "" : "s");
    return true;
  }
  if (c.backend == Backend::kDecode) {
    const bool fp8 = p.kv_dtype != KvDType::kSame;
    const int kernel = kernel_head_dim(call_head_dim(p.head_dim, p.head_dim_v),
                                       fp8 ? KernelSet::kFp8 : KernelSet::kAny);
    // Candidate 1: the two-stage variant, where there is one (launch_decode).
    if (c.index != 0 && !(c.index == 1 && decode::has_two_stage_variant(kernel, fp8))) return false;
    choice->backend = Backend::kDecode;
    choice->block_m = decode::kBlockM;
    choice->block_n = decode::block_n(kernel, fp8);
    choice->warps = 4;
    choice->stages = c.index == 1 ? 2 : decode::stages(kernel, fp8);
    std::snprintf(choice->name, sizeof(choice->name), "decode%s %dx%d 4w %dst %d split%s", fp8 ? " fp8" : "",
                  decode::kBlockM, choice->block_n, choice->stages, plan.num_splits, plan.num_splits == 1 ? "" : "s");
    return true;
  }
#if FLASH_HAS_SM90
  if (plan.fp8_prefill) {
    return c.backend == Backend::kSm90 && c.index == 0 &&
           sm90::describe_fp8(p.head_dim, plan.mask != MaskVariant::kTail, choice);
  }
  if (c.backend == Backend::kSm90 && mla_shape(p.head_dim, p.head_dim_v)) {
    if (c.index != 0) return false;
    choice->backend = Backend::kSm90;
    choice->block_m = 64;
    choice->block_n = 64;
    choice->warps = 2;
    choice->stages = 2;
    std::snprintf(choice->name, sizeof(choice->name), "sm90 mla 64x64 2wg 2st");
    if (plan.num_splits > 1) append_to_name(choice, " %d splits", plan.num_splits);
    return true;
  }
  if (c.backend == Backend::kSm90) {
    const int kernel = kernel_head_dim(call_head_dim(p.head_dim, p.head_dim_v),
                                       p.kv_dtype != KvDType::kSame ? KernelSet::kFp8 : KernelSet::kSm90);
    const bool masked = plan.mask != MaskVariant::kTail;
    if (p.kv_dtype != KvDType::kSame ? c.index != sm90::cache_candidate(kernel, true) ||
                                           !sm90::describe_fp8_cache(kernel, masked, p.dtype, choice)
                                     : !sm90::describe_candidate(kernel, masked, c.index, choice)) {
      return false;
    }
    // A paged cache the kernel copies row by row (GatherProducer) rather
    // than in TMA boxes, on its own tile where gather_tile names one (as
    // run_cache_kernel decides).
    const int gather_n = sm90::gather_tile(kernel).block_n;
    const bool own_tile = p.kv_dtype == KvDType::kSame && p.block_table != nullptr && gather_n != 0 &&
                          sm90::gathers_pages(p.page_size, kernel, gather_n) && sm90::describe_gather(kernel, choice);
    if (plan.num_splits > 1) append_to_name(choice, " %d splits", plan.num_splits);
    if (p.kv_dtype != KvDType::kSame) {
      // An fp8 cache, widened in shared memory (ConvertProducer).
      append_to_name(choice, " fp8");
    } else if (own_tile || (p.block_table != nullptr && sm90::gathers_pages(p.page_size, kernel, choice->block_n))) {
      append_to_name(choice, " gather");
    }
    return true;
  }
#endif
  return false;
}

LaunchRecord last_launch() noexcept { return t_last_launch; }

bool decode_does_append(const Plan& plan, const Candidate& c, const AttentionParams& appended) noexcept {
  return c.backend == Backend::kDecode && c.index == 0 && !plan.fp8_prefill && plan.caps.major >= 9 &&
         appended.kv_dtype == KvDType::kSame && !wide_shape(appended.head_dim, appended.head_dim_v) &&
         !mla_shape(appended.head_dim, appended.head_dim_v);
}

cudaError_t launch(const Plan& plan, const Candidate& c, const AttentionParams& p, cudaStream_t stream,
                   const AttentionParams* appended, bool decode_appends) {
  t_last_launch = LaunchRecord{c, plan.num_splits};
  FwdParams f = make_fwd_params(p, plan.caps);
  if (appended != nullptr) {
    f.follows_append = !decode_appends;
    FwdParams::AppendFusion& a = f.append;
    a.writes = decode_appends;
    a.k_new = appended->k_new;
    a.v_new = appended->v_new;
    a.k_new_batch_stride = appended->k_new_batch_stride;
    a.k_new_seq_stride = appended->k_new_seq_stride;
    a.k_new_head_stride = appended->k_new_head_stride;
    a.v_new_batch_stride = appended->v_new_batch_stride;
    a.v_new_seq_stride = appended->v_new_seq_stride;
    a.v_new_head_stride = appended->v_new_head_stride;
    a.q = appended->q;
    a.q_batch_stride = appended->q_batch_stride;
    a.q_seq_stride = appended->q_seq_stride;
    a.q_head_stride = appended->q_head_stride;
    a.seqused_k = appended->seqused_k;
    a.cu_seqlens_new = appended->cu_seqlens_k_new;
    a.seqlen_new = static_cast<int>(appended->seqlen_new);
    a.rotary_cos = appended->rotary_cos;
    a.rotary_sin = appended->rotary_sin;
    a.rotary_dim = static_cast<int>(appended->rotary_dim);
    a.rotary_positions = static_cast<int>(appended->rotary_positions);
    a.rotary_interleaved = appended->rotary_interleaved;
  }
  const bool fp8 = p.kv_dtype != KvDType::kSame;  // the decode or sm90 kernel, at a multiple of 64
  const int d = kernel_head_dim(call_head_dim(p.head_dim, p.head_dim_v),
                                fp8 ? KernelSet::kFp8 : c.backend == Backend::kSm90 ? KernelSet::kSm90 : KernelSet::kAny);
  if (plan.num_splits > 1) {
    f.num_splits = plan.num_splits;
    const size_t rows = static_cast<size_t>(plan.num_splits) * static_cast<size_t>(p.batch) *
                        static_cast<size_t>(p.heads_q) * static_cast<size_t>(p.seqlen_q);
    f.o_partial = static_cast<float*>(p.workspace);
    f.lse_partial = f.o_partial + rows * static_cast<size_t>(split_row_width(p));
  }
#if FLASH_HAS_SM90
  if (plan.fp8_prefill) {
    if (c.index != 0 || c.backend != Backend::kSm90) return cudaErrorInvalidValue;
    f.fp8_vt = p.workspace;
    f.fp8_vt_cols = sm90::fp8_vt_cols(p.cu_seqlens_k != nullptr ? p.total_k : p.batch * p.seqlen_k, p.batch);
    return with_head_dim(p.head_dim, cudaErrorInvalidValue, [&](auto head_dim) -> cudaError_t {
      constexpr int kHeadDim = decltype(head_dim)::value;
      if constexpr (kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256) {
        return p.dtype == DType::kFloat16 ? sm90::run_fwd_fp8<DType::kFloat16, kHeadDim>(f, plan.mask, stream)
                                          : sm90::run_fwd_fp8<DType::kBFloat16, kHeadDim>(f, plan.mask, stream);
      }
      return cudaErrorInvalidValue;
    });
  }
#endif
  if (wide_shape(p.head_dim, p.head_dim_v)) {
    if (c.backend != Backend::kDecode) return cudaErrorInvalidValue;
    return p.dtype == DType::kFloat16 ? decode::run_wide<DType::kFloat16>(f, c.index, stream)
                                      : decode::run_wide<DType::kBFloat16>(f, c.index, stream);
  }
  if (mla_shape(p.head_dim, p.head_dim_v)) {
    if (c.backend == Backend::kDecode) {
      return p.dtype == DType::kFloat16 ? decode::run_mla<DType::kFloat16>(f, c.index, stream)
                                        : decode::run_mla<DType::kBFloat16>(f, c.index, stream);
    }
#if FLASH_HAS_SM90
    if (c.backend == Backend::kSm90 && c.index == 0) {
      return p.dtype == DType::kFloat16 ? sm90::run_mla<DType::kFloat16>(f, stream)
                                        : sm90::run_mla<DType::kBFloat16>(f, stream);
    }
#endif
    return cudaErrorInvalidValue;
  }
  return with_head_dim(d, cudaErrorInvalidValue, [&](auto head_dim) -> cudaError_t {
    constexpr int kHeadDim = decltype(head_dim)::value;
    if (c.backend == Backend::kSm80) return launch_sm80<kHeadDim>(p.dtype, f, c.index, stream);
    if (c.backend == Backend::kDecode) return launch_decode<kHeadDim>(p.dtype, fp8, f, c.index, stream);
#if FLASH_HAS_SM90
    if constexpr (sm90_head_dim(kHeadDim)) {
      if (c.backend == Backend::kSm90) return launch_sm90<kHeadDim>(p.dtype, fp8, f, plan.mask, c.index, stream);
    }
#endif
    return cudaErrorInvalidValue;
  });
}

FwdParams make_fwd_params(const AttentionParams& p, const DeviceCaps& caps) noexcept {
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
  f.head_dim = static_cast<int>(p.head_dim);
  f.head_dim_v = static_cast<int>(value_head_dim(p.head_dim, p.head_dim_v));
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
  f.num_pages = p.num_pages;
  f.page_size = static_cast<int>(p.page_size);
  f.page_shift = -1;
  for (int shift = 0; shift < 31; ++shift) {
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
  f.sinks = p.sinks;
  f.k_descale = p.k_descale;
  f.v_descale = p.v_descale;
  f.descale_head_stride = p.descale_head_stride;
  f.q_descale = p.q_descale;
  f.alibi_slopes = p.alibi_slopes;
  f.alibi_scale = 1.f / f.softmax_scale;  // the scale the kernels apply, after the softcap's folding
  f.num_splits = 1;
  return f;
}

}  // namespace flash::detail
