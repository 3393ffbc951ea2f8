// Argument checks of flash::attention_forward. They touch no GPU, so they run
// (and are tested) on machines without one. The first failing check wins and
// its message names the field and what would be accepted.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <utility>

#include "flash/flash.hpp"
#include "dispatch.h"
#include "append.h"
#include "head_dims.h"
#include "status.h"
#include "validate_checks.h"

namespace flash {
namespace {

using detail::make_status;

using detail::invalid;
using detail::kMaxGridYZ;
using detail::kMaxSeqlen;
using detail::kMaxSoftmaxScale;
using detail::kMinSoftcap;
using detail::kMaxSoftcap;
using detail::head_dim_supported;
using detail::byte_ranges_overlap;


// One strided 4-d tensor as the checks see it: sizes, strides, base address.
struct TensorView {
  const char* name;
  const void* ptr;
  int64_t size[3];    // batch, seq, heads
  int64_t stride[3];  // batch, seq, heads (elements)
  int64_t head_dim;
  int64_t elem_bytes;

  // Largest element offset + 1, or -1 if it does not fit in int64.
  int64_t span_elements() const noexcept {
    int64_t span = head_dim;
    for (int d = 0; d < 3; ++d) {
      if (size[d] == 0) return 0;
      int64_t term = 0;
      if (__builtin_mul_overflow(size[d] - 1, stride[d], &term) || __builtin_add_overflow(span, term, &span)) {
        return -1;
      }
    }
    // Leave room to turn element counts into byte counts (and 16-byte rows) safely.
    return span > INT64_MAX / 16 ? -1 : span;
  }
  // span_elements() in bytes (-1 as there).
  int64_t span_bytes() const noexcept {
    const int64_t span = span_elements();
    return span < 0 ? -1 : span * elem_bytes;
  }
};

Status check_strides(const TensorView& t) noexcept {
  static const char* const kDims[3] = {"batch", "seq", "head"};
  for (int d = 0; d < 3; ++d) {
    if (t.stride[d] < 0) {
      return make_status(StatusCode::kInvalidArgument, "%s_%s_stride is %lld; strides must be >= 0", t.name,
                         kDims[d], static_cast<long long>(t.stride[d]));
    }
    if (t.stride[d] % (16 / t.elem_bytes) != 0) {
      return make_status(StatusCode::kInvalidArgument,
                         "%s_%s_stride is %lld; strides must be multiples of %lld elements so every row starts "
                         "16-byte aligned",
                         t.name, kDims[d], static_cast<long long>(t.stride[d]),
                         static_cast<long long>(16 / t.elem_bytes));
    }
  }
  if (t.span_elements() < 0) {
    return make_status(StatusCode::kInvalidArgument,
                       "%s: sizes and strides give element offsets that overflow int64", t.name);
  }
  return Status{};
}

// Written rows must not alias one another: sorted by stride, each dimension
// must step past everything the smaller ones cover. `rows`: what the rows
// are, for the message.
Status check_no_self_alias(const TensorView& t, const char* rows) noexcept {
  int order[3] = {0, 1, 2};
  std::sort(order, order + 3, [&](int a, int b) { return t.stride[a] < t.stride[b]; });
  int64_t extent = t.head_dim;
  for (int i = 0; i < 3; ++i) {
    const int d = order[i];
    if (t.size[d] <= 1) continue;
    if (t.stride[d] < extent) {
      return make_status(StatusCode::kInvalidArgument,
                         "%s strides make different %s overlap (a stride of %lld is smaller than the %lld "
                         "elements the smaller dimensions cover)",
                         t.name, rows, static_cast<long long>(t.stride[d]), static_cast<long long>(extent));
    }
    extent = t.stride[d] * (t.size[d] - 1) + extent;
  }
  return Status{};
}

// Whether some value m_0 s_0 + ... + m_{n-1} s_{n-1}, |m_x| <= reach[x],
// lies strictly between lo and hi; s sorted largest first, all > 0, and
// tail[x] = the most the terms after x add up to. Searches at most `budget`
// values of each m (false in *decided when that is not enough).
bool some_sum_between(const __int128* s, const int64_t* reach, const __int128* tail, int n, __int128 lo,
                      __int128 hi, int budget, bool* decided) noexcept {
  if (n == 0) return lo < 0 && 0 < hi;
  // m s must lie in (lo - tail, hi + tail) for the rest to close the gap.
  const __int128 from = lo - tail[0], to = hi + tail[0];
  __int128 m0 = from / s[0] - 1, m1 = to / s[0] + 1;
  if (m0 < -reach[0]) m0 = -reach[0];
  if (m1 > reach[0]) m1 = reach[0];
  if (m1 - m0 + 1 > budget) {
    *decided = false;
    return true;
  }
  for (__int128 m = m0; m <= m1; ++m) {
    if (some_sum_between(s + 1, reach + 1, tail + 1, n - 1, lo - m * s[0], hi - m * s[0], budget, decided)) {
      return true;
    }
  }
  return false;
}

// Whether the rows of `a` and `b` (each free of self-aliasing, same element
// size) share a byte. Disjoint spans share none. Views with the same sizes
// and strides (K and V interleaved in one allocation) are decided exactly:
// b's row i is a's row i moved by d bytes, so they share a byte when a
// difference of two of a's row offsets lies strictly between d - a's row
// bytes and d + b's. Other views whose spans meet count as overlapping.
bool rows_overlap(const TensorView& a, const TensorView& b) noexcept {
  if (!byte_ranges_overlap(a.ptr, a.span_bytes(), b.ptr, b.span_bytes())) return false;
  __int128 s[3];
  int64_t reach[3];
  int n = 0;
  for (int x = 0; x < 3; ++x) {
    if (a.size[x] != b.size[x]) return true;
    if (a.size[x] <= 1) continue;
    if (a.stride[x] != b.stride[x] || a.stride[x] <= 0) return true;
    s[n] = static_cast<__int128>(a.stride[x]) * a.elem_bytes;
    reach[n] = a.size[x] - 1;
    ++n;
  }
  for (int i = 0; i < n; ++i) {  // largest stride first
    for (int j = i + 1; j < n; ++j) {
      if (s[j] > s[i]) {
        std::swap(s[i], s[j]);
        std::swap(reach[i], reach[j]);
      }
    }
  }
  __int128 tail[3] = {0, 0, 0};
  for (int x = n - 2; x >= 0; --x) tail[x] = tail[x + 1] + s[x + 1] * reach[x + 1];
  const __int128 d = static_cast<__int128>(reinterpret_cast<uintptr_t>(b.ptr)) -
                     static_cast<__int128>(reinterpret_cast<uintptr_t>(a.ptr));
  bool decided = true;
  const bool hit = some_sum_between(s, reach, tail, n, d - a.head_dim * a.elem_bytes,
                                    d + b.head_dim * b.elem_bytes, 64, &decided);
  return hit || !decided;
}

// Append and attend (AttentionParams::k_new) and rotary: each field alone,
// then what the append writes (the cache K and V) against what it reads,
// and the call's outputs against what the append reads (on sm_90 the decode
// kernel starts beside the append and may write O and the LSE while the
// append still reads). `k`, `v`, `o`: the views the call's checks built;
// `o_bytes`, `lse_bytes`: their extents (0 where not known).
Status check_append(const AttentionParams& p, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& o, int64_t dv, int64_t o_bytes, int64_t lse_bytes) noexcept {
  const bool rotary = p.rotary_cos != nullptr || p.rotary_sin != nullptr;
  if (p.k_new == nullptr && p.v_new == nullptr) {
    if (rotary || p.rotary_dim != 0) {
      return make_status(StatusCode::kInvalidArgument,
                         "rotary_cos / rotary_sin / rotary_dim need k_new and v_new: the rotary embedding rotates "
                         "the appended keys and Q");
    }
    if (p.cu_seqlens_k_new != nullptr || p.seqlen_new != 0) {
      return make_status(StatusCode::kInvalidArgument, "seqlen_new and cu_seqlens_k_new need k_new and v_new");
    }
    return Status{};
  }
  if (p.k_new == nullptr || p.v_new == nullptr) {
    return make_status(StatusCode::kInvalidArgument, "k_new and v_new must both be set (or both null)");
  }
  if (p.seqused_k == nullptr) {
    return make_status(StatusCode::kInvalidArgument,
                       "k_new needs seqused_k: the cache lengths before the append, where the new rows go");
  }
  if (p.cu_seqlens_k != nullptr) {
    return make_status(StatusCode::kInvalidArgument,
                       "k_new appends to a dense or paged cache; cu_seqlens_k is not allowed with it");
  }
  if (p.seqlen_new < 0 || p.seqlen_new > kMaxSeqlen) {
    return invalid("seqlen_new is %lld; it must be in [0, 2^30]", p.seqlen_new);
  }
  const bool varlen_new = p.cu_seqlens_k_new != nullptr;
  if (reinterpret_cast<uintptr_t>(p.cu_seqlens_k_new) % alignof(int32_t) != 0) {
    return make_status(StatusCode::kInvalidArgument, "cu_seqlens_k_new (%p) is not 4-byte aligned",
                       static_cast<const void*>(p.cu_seqlens_k_new));
  }
  const int64_t new_batches = varlen_new ? 1 : p.batch;
  const TensorView k_new{"k_new", p.k_new, {new_batches, p.seqlen_new, p.heads_kv},
                         {varlen_new ? 0 : p.k_new_batch_stride, p.k_new_seq_stride, p.k_new_head_stride},
                         p.head_dim, 2};
  const TensorView v_new{"v_new", p.v_new, {new_batches, p.seqlen_new, p.heads_kv},
                         {varlen_new ? 0 : p.v_new_batch_stride, p.v_new_seq_stride, p.v_new_head_stride}, dv, 2};
  for (const TensorView* t : {&k_new, &v_new}) {
    if (reinterpret_cast<uintptr_t>(t->ptr) % 16 != 0) {
      return make_status(StatusCode::kInvalidArgument, "%s (%p) is not 16-byte aligned; all tensors must be",
                         t->name, t->ptr);
    }
    const Status s = check_strides(*t);
    if (!s.ok()) return s;
    // Distinct new rows must not be one row read again (a stride left at 0).
    static const char* const kDims[3] = {"batch", "seq", "head"};
    const bool rows = p.seqlen_new > 0 || varlen_new;
    const bool several[3] = {!varlen_new && p.batch > 1 && rows, p.seqlen_new > 1 || (varlen_new && p.batch > 1),
                             p.heads_kv > 1 && rows};
    for (int dim = 0; dim < 3; ++dim) {
      if (several[dim] && t->stride[dim] == 0) {
        return make_status(StatusCode::kInvalidArgument,
                           "%s_%s_stride is 0; distinct new rows must not alias (set_contiguous_bnhd() fills "
                           "k_new's and v_new's strides from seqlen_new)",
                           t->name, kDims[dim]);
      }
    }
  }
  int64_t table_bytes = 0;
  if (rotary) {
    if (p.rotary_cos == nullptr || p.rotary_sin == nullptr) {
      return make_status(StatusCode::kInvalidArgument, "rotary_cos and rotary_sin must both be set (or both null)");
    }
    if (p.rotary_dim < 2 || p.rotary_dim > p.head_dim || p.rotary_dim % 2 != 0) {
      return invalid("rotary_dim is %lld; it must be even, from 2 to head_dim (%lld)", p.rotary_dim, p.head_dim);
    }
    if (p.rotary_positions < 1 || p.rotary_positions > kMaxSeqlen) {
      return invalid("rotary_positions is %lld; it must be in [1, 2^30] (the rows of rotary_cos and rotary_sin)",
                     p.rotary_positions);
    }
    for (const void* t : {static_cast<const void*>(p.rotary_cos), static_cast<const void*>(p.rotary_sin)}) {
      if (reinterpret_cast<uintptr_t>(t) % alignof(float) != 0) {
        return make_status(StatusCode::kInvalidArgument, "rotary_cos and rotary_sin must be 4-byte aligned");
      }
    }
    if (p.cu_seqlens_q != nullptr && p.total_q <= 0) {
      return make_status(StatusCode::kInvalidArgument,
                         "rotary with cu_seqlens_q needs total_q: the rows of the rotated Q in the workspace");
    }
    table_bytes = p.rotary_positions * (p.rotary_dim / 2) * static_cast<int64_t>(sizeof(float));
  } else if (p.rotary_dim != 0) {
    return make_status(StatusCode::kInvalidArgument, "rotary_dim is set but rotary_cos and rotary_sin are null");
  }
  // The append writes K, V and the workspace: nothing it or the attention
  // reads may lie there, and the output must not. (Packed new rows: the
  // extent of seqlen_new rows, a lower bound.)
  constexpr int64_t kInt32 = static_cast<int64_t>(sizeof(int32_t));
  const int64_t rows_bytes = p.batch * kInt32;
  const int64_t table_entries = detail::block_table_entries(p);
  const int64_t per_head = p.heads_q * static_cast<int64_t>(sizeof(float));
  const bool fp8_cache = p.kv_dtype == KvDType::kFloat8E4M3;
  const int64_t descale_bytes = (p.descale_head_stride == 1 ? p.heads_kv : 1) * static_cast<int64_t>(sizeof(float));
  const struct {
    const char* name;
    const void* ptr;
    int64_t bytes;
  } read[] = {{"k_new", p.k_new, k_new.span_bytes()},
              {"v_new", p.v_new, v_new.span_bytes()},
              {"q", p.q, q.span_bytes()},
              {"seqused_k", p.seqused_k, rows_bytes},
              {"cu_seqlens_k_new", p.cu_seqlens_k_new, rows_bytes + kInt32},
              {"cu_seqlens_q", p.cu_seqlens_q, rows_bytes + kInt32},
              {"block_table", p.block_table, table_entries * kInt32},
              {"sinks", p.sinks, per_head},
              {"alibi_slopes", p.alibi_slopes, per_head},
              {"rotary_cos", p.rotary_cos, table_bytes},
              {"rotary_sin", p.rotary_sin, table_bytes},
              {"k_descale", fp8_cache ? p.k_descale : nullptr, descale_bytes},
              {"v_descale", fp8_cache ? p.v_descale : nullptr, descale_bytes}};
  const int64_t ws_bytes = detail::workspace_extent(p);
  const struct {
    const char* name;
    const void* ptr;
    int64_t bytes;
  } written[] = {{"k", k.ptr, k.span_bytes()}, {"v", v.ptr, v.span_bytes()},
                 {"workspace", p.workspace, ws_bytes}};
  for (const auto& w : written) {
    for (const auto& r : read) {
      if (w.ptr != nullptr && r.ptr != nullptr && r.bytes > 0 && byte_ranges_overlap(w.ptr, w.bytes, r.ptr, r.bytes)) {
        return make_status(StatusCode::kInvalidArgument,
                           "%s overlaps %s, which the append writes; it must be memory of its own", r.name, w.name);
      }
    }
  }
  // Each new row goes into K and into V: no two rows written may share a
  // byte, in one cache or across the two (K and V interleaved in one
  // allocation with the same strides are fine).
  for (const TensorView* t : {&k, &v}) {
    const Status s = check_no_self_alias(*t, "cache rows, which the append writes,");
    if (!s.ok()) return s;
  }
  if (rows_overlap(k, v)) {
    return make_status(StatusCode::kInvalidArgument,
                       "k's and v's rows may share memory; the append writes each new row into both, so they must "
                       "be memory of their own, or interleave in one allocation with the same strides without "
                       "meeting");
  }
  // What only the append reads (Q, the index arrays and the rest are
  // checked against the outputs for every call).
  constexpr int kAppendReads[] = {0, 1, 4, 9, 10};  // k_new, v_new, cu_seqlens_k_new, the rotary tables
  const struct {
    const char* name;
    const void* ptr;
    int64_t bytes;
  } outputs[] = {{"o", o.ptr, o_bytes > 0 ? o_bytes : o.span_bytes()}, {"lse", p.lse, lse_bytes}};
  for (const auto& out : outputs) {
    for (const int i : kAppendReads) {
      const auto& r = read[i];
      if (out.ptr != nullptr && r.ptr != nullptr && r.bytes > 0 &&
          byte_ranges_overlap(out.ptr, out.bytes, r.ptr, r.bytes)) {
        return make_status(StatusCode::kInvalidArgument,
                           "%s overlaps %s, which the append reads; outputs must not alias an input", out.name,
                           r.name);
      }
    }
  }
  return Status{};
}

// a * b, or the int64 limit of the product's sign when it does not fit.
int64_t saturating_mul(int64_t a, int64_t b) noexcept {
  int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

// MLA's shape reads V as the first 512 columns of K's rows: V's strides are K's.
void use_k_strides_for_v(AttentionParams& p) noexcept {
  p.v_head_stride = p.k_head_stride;
  p.v_seq_stride = p.k_seq_stride;
  p.v_batch_stride = p.k_batch_stride;
}

}  // namespace

// Out-of-range sizes saturate the strides (no overflow); validate() rejects
// such sizes before it looks at a stride.
void AttentionParams::set_contiguous_bnhd() noexcept {
  const int64_t dv = detail::value_head_dim(head_dim, head_dim_v);
  q_head_stride = head_dim;
  q_seq_stride = saturating_mul(heads_q, head_dim);
  q_batch_stride = saturating_mul(seqlen_q, q_seq_stride);
  o_head_stride = dv;
  o_seq_stride = saturating_mul(heads_q, dv);
  o_batch_stride = saturating_mul(seqlen_q, o_seq_stride);
  k_head_stride = head_dim;
  k_seq_stride = saturating_mul(heads_kv, head_dim);
  k_batch_stride = saturating_mul(seqlen_k, k_seq_stride);
  v_head_stride = dv;
  v_seq_stride = saturating_mul(heads_kv, dv);
  v_batch_stride = saturating_mul(seqlen_k, v_seq_stride);
  k_new_head_stride = head_dim;
  k_new_seq_stride = saturating_mul(heads_kv, head_dim);
  k_new_batch_stride = saturating_mul(seqlen_new, k_new_seq_stride);
  v_new_head_stride = dv;
  v_new_seq_stride = saturating_mul(heads_kv, dv);
  v_new_batch_stride = saturating_mul(seqlen_new, v_new_seq_stride);
  q_dim_stride = k_dim_stride = v_dim_stride = o_dim_stride = 1;
  if (detail::mla_shape(head_dim, head_dim_v)) use_k_strides_for_v(*this);
}

void AttentionParams::set_contiguous_bhnd() noexcept {
  const int64_t dv = detail::value_head_dim(head_dim, head_dim_v);
  q_seq_stride = head_dim;
  q_head_stride = saturating_mul(seqlen_q, head_dim);
  q_batch_stride = saturating_mul(heads_q, q_head_stride);
  o_seq_stride = dv;
  o_head_stride = saturating_mul(seqlen_q, dv);
  o_batch_stride = saturating_mul(heads_q, o_head_stride);
  k_seq_stride = head_dim;
  k_head_stride = saturating_mul(seqlen_k, head_dim);
  k_batch_stride = saturating_mul(heads_kv, k_head_stride);
  v_seq_stride = dv;
  v_head_stride = saturating_mul(seqlen_k, dv);
  v_batch_stride = saturating_mul(heads_kv, v_head_stride);
  k_new_seq_stride = head_dim;
  k_new_head_stride = saturating_mul(seqlen_new, head_dim);
  k_new_batch_stride = saturating_mul(heads_kv, k_new_head_stride);
  v_new_seq_stride = dv;
  v_new_head_stride = saturating_mul(seqlen_new, dv);
  v_new_batch_stride = saturating_mul(heads_kv, v_new_head_stride);
  q_dim_stride = k_dim_stride = v_dim_stride = o_dim_stride = 1;
  if (detail::mla_shape(head_dim, head_dim_v)) use_k_strides_for_v(*this);
}

namespace {

// MLA's form (head_dim 576, head_dim_v 512): V is the first 512 columns of
// K's rows; the MLA kernels (Hopper's, or the split-D decode kernel).
Status check_mla(const AttentionParams& p) noexcept {
  if (p.kv_dtype == KvDType::kFloat8E4M3) {
    return make_status(StatusCode::kUnsupported,
                       "MLA (head_dim 576, head_dim_v 512) runs on bf16 and fp16 caches; an fp8 cache (kv_dtype) is "
                       "not supported at these head dims");
  }
  if (p.backend == Backend::kSm80) {
    return make_status(StatusCode::kUnsupported,
                       "MLA (head_dim 576, head_dim_v 512) runs on the Hopper MLA kernel (Backend::kSm90) and the "
                       "split-D decode kernel (Backend::kDecode), not on the sm80 kernel; use Backend::kAuto");
  }
  if (p.k_new != nullptr || p.v_new != nullptr) {
    return make_status(StatusCode::kUnsupported,
                       "k_new with MLA (head_dim 576, head_dim_v 512): the append is not supported at these head "
                       "dims; write the new rows into the cache yourself and pass the lengths in seqused_k");
  }
  if (p.v != p.k || p.v_batch_stride != p.k_batch_stride || p.v_seq_stride != p.k_seq_stride ||
      p.v_head_stride != p.k_head_stride) {
    return make_status(StatusCode::kInvalidArgument,
                       "MLA (head_dim 576, head_dim_v 512) reads V as the first 512 columns of K's rows: v must be "
                       "k, with v's strides equal to k's");
  }
  if (p.softmax_scale == 0.f) {
    return make_status(StatusCode::kInvalidArgument,
                       "MLA (head_dim 576, head_dim_v 512) needs softmax_scale: the default, 1/sqrt(head_dim), is not "
                       "the absorbed form's (DeepSeek-V2/V3: 1/sqrt(192), times the YaRN factor where used)");
  }
  return Status{};
}

// Head dim 512 (V as wide, rows of its own): the split-D decode kernel.
Status check_wide(const AttentionParams& p) noexcept {
  if (p.kv_dtype == KvDType::kFloat8E4M3) {
    return make_status(StatusCode::kUnsupported,
                       "head_dim 512 runs on bf16 and fp16 caches; an fp8 cache (kv_dtype) is not supported at this "
                       "head dim");
  }
  if (p.backend == Backend::kSm80 || p.backend == Backend::kSm90) {
    return make_status(StatusCode::kUnsupported,
                       "head_dim 512 runs on the split-D decode kernel (Backend::kDecode), not on the sm80 or "
                       "Hopper kernels; use Backend::kAuto or kDecode");
  }
  if (p.k_new != nullptr || p.v_new != nullptr) {
    return make_status(StatusCode::kUnsupported,
                       "k_new with head_dim 512: the append is not supported at this head dim; write the new rows "
                       "into the cache yourself and pass the lengths in seqused_k");
  }
  return Status{};
}

// The fp8 KV cache's fields (AttentionParams::kv_dtype), before the
// tensors' checks (which take K and V's element size from kv_dtype).
Status check_fp8_cache(const AttentionParams& p) noexcept {
  if (p.kv_dtype == KvDType::kSame) {
    if (p.k_descale != nullptr || p.v_descale != nullptr || p.descale_head_stride != 0) {
      return make_status(StatusCode::kInvalidArgument,
                         "k_descale / v_descale / descale_head_stride need an fp8 cache (kv_dtype "
                         "KvDType::kFloat8E4M3); with kv_dtype kSame they must be null / 0");
    }
    return Status{};
  }
  if (p.kv_dtype != KvDType::kFloat8E4M3) {
    return make_status(StatusCode::kInvalidArgument,
                       "kv_dtype %lld is not valid; use KvDType::kSame (0) or kFloat8E4M3 (1)",
                       static_cast<long long>(p.kv_dtype));
  }
  const int64_t dv = detail::value_head_dim(p.head_dim, p.head_dim_v);
  if (p.head_dim % 16 != 0 || dv % 16 != 0) {
    return make_status(StatusCode::kInvalidArgument,
                       "an fp8 cache needs head_dim (%lld) and head_dim_v (%lld) to be multiples of 16 (rows of "
                       "whole 16-byte chunks)",
                       static_cast<long long>(p.head_dim), static_cast<long long>(dv));
  }
  if (p.descale_head_stride != 0 && p.descale_head_stride != 1) {
    return make_status(StatusCode::kInvalidArgument,
                       "descale_head_stride is %lld; it must be 0 (one factor for all K/V heads) or 1 (one per "
                       "K/V head)",
                       static_cast<long long>(p.descale_head_stride));
  }
  for (const float* f : {p.k_descale, p.v_descale}) {
    if (reinterpret_cast<uintptr_t>(f) % alignof(float) != 0) {
      return make_status(StatusCode::kInvalidArgument, "k_descale and v_descale must be 4-byte aligned");
    }
  }
  if (p.backend == Backend::kSm80 && p.q_dtype == KvDType::kSame) {
    return make_status(StatusCode::kUnsupported,
                       "an fp8 cache runs on the decode kernel and on the Hopper kernel, not on the sm80 kernel; use "
                       "Backend::kAuto, kDecode or kSm90");
  }
  return Status{};
}

// FP8 prefill (AttentionParams::q_dtype), after check_fp8_cache.
Status check_fp8_prefill(const AttentionParams& p) noexcept {
  if (p.q_dtype == KvDType::kSame) {
    if (p.q_descale != nullptr) {
      return make_status(StatusCode::kInvalidArgument,
                         "q_descale needs an fp8 Q (q_dtype KvDType::kFloat8E4M3); with q_dtype kSame it must be null");
    }
    return Status{};
  }
  if (p.q_dtype != KvDType::kFloat8E4M3) {
    return make_status(StatusCode::kInvalidArgument,
                       "q_dtype %lld is not valid; use KvDType::kSame (0) or kFloat8E4M3 (1)",
                       static_cast<long long>(p.q_dtype));
  }
  if (p.kv_dtype != KvDType::kFloat8E4M3) {
    return make_status(StatusCode::kInvalidArgument,
                       "q_dtype kFloat8E4M3 (FP8 prefill) needs K and V in e4m3 too: set kv_dtype kFloat8E4M3");
  }
  const int64_t dv = detail::value_head_dim(p.head_dim, p.head_dim_v);
  if ((p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) || dv != p.head_dim) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill runs head_dim 64, 128 or 256 with head_dim_v 0 or the same; got %lld / %lld",
                       static_cast<long long>(p.head_dim), static_cast<long long>(p.head_dim_v));
  }
  if (p.backend != Backend::kAuto && p.backend != Backend::kSm90) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill (q_dtype kFloat8E4M3) runs on the Hopper kernel only: use Backend::kAuto or "
                       "kSm90");
  }
  const char* what = p.k_new != nullptr                  ? "k_new (an append)"
                     : p.seqused_k != nullptr            ? "seqused_k"
                     : p.block_table != nullptr          ? "a paged cache (block_table)"
                     : p.softcap > 0.f                   ? "softcap"
                     : p.alibi_slopes != nullptr         ? "alibi_slopes"
                     : p.num_splits > 1                  ? "num_splits > 1"
                                                         : nullptr;
  if (what != nullptr) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill (q_dtype kFloat8E4M3) does not support %s; it takes dense or varlen tensors, "
                       "no mask, causal or a sliding window, lse and sinks",
                       what);
  }
  if ((p.cu_seqlens_q != nullptr && p.total_q == 0) || (p.cu_seqlens_k != nullptr && p.total_k == 0)) {
    return make_status(StatusCode::kInvalidArgument,
                       "the FP8 prefill with cu_seqlens needs total_q and total_k (the packed tensors' rows)");
  }
  if (reinterpret_cast<uintptr_t>(p.q_descale) % alignof(float) != 0) {
    return make_status(StatusCode::kInvalidArgument, "q_descale must be 4-byte aligned");
  }
  return Status{};
}

}  // namespace

Status validate(const AttentionParams& p) noexcept { return detail::validate_call(p, /*check_workspace=*/true); }

namespace detail {

Status validate_call(const AttentionParams& p, bool check_workspace) noexcept {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return invalid("dtype %lld is not supported; supported: DType::kFloat16 (0), DType::kBFloat16 (1)",
                   static_cast<int64_t>(p.dtype));
  }
  if (p.backend != Backend::kAuto && p.backend != Backend::kSm80 && p.backend != Backend::kSm90 &&
      p.backend != Backend::kDecode) {
    return invalid("backend %lld is not valid; use Backend::kAuto (0), kSm80 (1), kSm90 (2) or kDecode (3)",
                   static_cast<int64_t>(p.backend));
  }
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"batch", p.batch},     {"seqlen_q", p.seqlen_q}, {"seqlen_k", p.seqlen_k},
               {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"head_dim", p.head_dim},
               {"head_dim_v", p.head_dim_v}};
  for (const auto& s : sizes) {
    if (s.value < 0) {
      return make_status(StatusCode::kInvalidArgument, "%s is %lld; sizes must be >= 0", s.name,
                         static_cast<long long>(s.value));
    }
  }
  if (mla_shape(p.head_dim, p.head_dim_v)) {
    const Status s = check_mla(p);
    if (!s.ok()) return s;
  } else if (wide_shape(p.head_dim, p.head_dim_v)) {
    const Status s = check_wide(p);
    if (!s.ok()) return s;
  } else {
    if (!head_dim_supported(p.head_dim)) {
      return invalid("head_dim %lld is not supported; it must be " FLASH_HEAD_DIM_RULE
                     ", or 512 with head_dim_v 0 or 512, or 576 with head_dim_v 512 (MLA)",
                     p.head_dim);
    }
    if (p.head_dim_v != 0 && !head_dim_supported(p.head_dim_v)) {
      return invalid("head_dim_v %lld is not supported; it must be 0 (head_dim) or " FLASH_HEAD_DIM_RULE
                     ", or 512 with head_dim 512 or 576 (MLA)",
                     p.head_dim_v);
    }
  }
  {
    Status s = check_fp8_cache(p);
    if (s.ok()) s = check_fp8_prefill(p);
    if (!s.ok()) return s;
  }
  if (p.heads_q < 1 || p.heads_kv < 1) {
    return invalid("heads_q (%lld) and heads_kv (%lld) must be >= 1", p.heads_q, p.heads_kv);
  }
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("heads_q (%lld) must be a multiple of heads_kv (%lld)", p.heads_q, p.heads_kv);
  }
  if (p.q_dim_stride != 1 || p.k_dim_stride != 1 || p.v_dim_stride != 1 || p.o_dim_stride != 1) {
    return make_status(StatusCode::kInvalidArgument,
                       "the last dimension must be contiguous: q/k/v/o_dim_stride are %lld/%lld/%lld/%lld, "
                       "all must be 1",
                       static_cast<long long>(p.q_dim_stride), static_cast<long long>(p.k_dim_stride),
                       static_cast<long long>(p.v_dim_stride), static_cast<long long>(p.o_dim_stride));
  }
  // The online softmax tracks the running max of raw scores, which is the
  // max of the scaled ones only for a positive scale.
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f || p.softmax_scale > kMaxSoftmaxScale) {
    return make_status(StatusCode::kInvalidArgument,
                       "softmax_scale is %g; it must be in [0, 1e24] (0 selects 1/sqrt(head_dim); a larger scale "
                       "overflows the kernels' float32 softmax)",
                       static_cast<double>(p.softmax_scale));
  }
  if (p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen) {
    return make_status(StatusCode::kUnsupported, "seqlen_q (%lld) and seqlen_k (%lld) must be <= %lld",
                       static_cast<long long>(p.seqlen_q), static_cast<long long>(p.seqlen_k),
                       static_cast<long long>(kMaxSeqlen));
  }
  if (p.batch > kMaxGridYZ || p.heads_q > kMaxGridYZ) {
    return make_status(StatusCode::kUnsupported, "batch (%lld) and heads_q (%lld) must be <= %lld",
                       static_cast<long long>(p.batch), static_cast<long long>(p.heads_q),
                       static_cast<long long>(kMaxGridYZ));
  }
  {
    const Status s = validate_engine_features(p);
    if (!s.ok()) return s;
  }
  {
    const Status s = check_decode_grid(p);
    if (!s.ok()) return s;
  }

  // An append runs with the attention after it, so it needs query rows.
  if (p.batch > 0 && p.seqlen_q == 0 && (p.k_new != nullptr || p.v_new != nullptr)) {
    return make_status(StatusCode::kInvalidArgument,
                       "k_new with seqlen_q 0: the append runs with the attention it precedes; give at least one "
                       "query row");
  }
  // Empty work touches no memory: a successful no-op, whatever the pointers.
  if (p.batch == 0 || p.seqlen_q == 0) return Status{};

  // Packed (varlen) tensors are seen as one sequence of total_q / total_k rows
  // when given, else of the longest length (then only their strides are
  // checked: their full extent is not known here).
  const bool varlen_q = p.cu_seqlens_q != nullptr;
  const bool varlen_k = p.cu_seqlens_k != nullptr;
  const bool paged = p.block_table != nullptr;
  const int64_t q_batches = varlen_q ? 1 : p.batch;
  const int64_t kv_batches = varlen_k ? 1 : (paged ? p.num_pages : p.batch);
  // With total_q / total_k given, a packed tensor's full extent is known.
  const int64_t q_rows = varlen_q && p.total_q > 0 ? p.total_q : p.seqlen_q;
  const int64_t k_rows_varlen = p.total_k > 0 ? p.total_k : p.seqlen_k;
  const int64_t kv_rows = paged ? p.page_size : (varlen_k ? k_rows_varlen : p.seqlen_k);
  const int64_t dv = value_head_dim(p.head_dim, p.head_dim_v);
  const TensorView q{"q", p.q, {q_batches, q_rows, p.heads_q},
                     {varlen_q ? 0 : p.q_batch_stride, p.q_seq_stride, p.q_head_stride}, p.head_dim,
                     p.q_dtype == KvDType::kSame ? 2 : 1};
  const int64_t kv_bytes = p.kv_dtype == KvDType::kSame ? 2 : 1;
  const TensorView k{"k", p.k, {kv_batches, kv_rows, p.heads_kv},
                     {varlen_k ? 0 : p.k_batch_stride, p.k_seq_stride, p.k_head_stride}, p.head_dim, kv_bytes};
  const TensorView v{"v", p.v, {kv_batches, kv_rows, p.heads_kv},
                     {varlen_k ? 0 : p.v_batch_stride, p.v_seq_stride, p.v_head_stride}, dv, kv_bytes};
  const TensorView o{"o", p.o, {q_batches, q_rows, p.heads_q},
                     {varlen_q ? 0 : p.o_batch_stride, p.o_seq_stride, p.o_head_stride}, dv, 2};
  for (const TensorView* t : {&q, &k, &v, &o}) {
    if (t->ptr == nullptr) {
      return make_status(StatusCode::kInvalidArgument, "%s is null; Q, K, V and O must point to device memory",
                         t->name);
    }
    if (reinterpret_cast<uintptr_t>(t->ptr) % 16 != 0) {
      return make_status(StatusCode::kInvalidArgument, "%s (%p) is not 16-byte aligned; all tensors must be",
                         t->name, t->ptr);
    }
    const Status s = check_strides(*t);
    if (!s.ok()) return s;
  }
  if (reinterpret_cast<uintptr_t>(p.lse) % alignof(float) != 0) {
    return make_status(StatusCode::kInvalidArgument, "lse (%p) is not 4-byte aligned", static_cast<void*>(p.lse));
  }
  {
    const Status s = check_no_self_alias(o, "output rows");
    if (!s.ok()) return s;
  }
  int64_t lse_elems = 0;
  if (__builtin_mul_overflow(p.batch * p.heads_q, p.seqlen_q, &lse_elems)) {
    return make_status(StatusCode::kInvalidArgument, "lse: batch * heads_q * seqlen_q overflows int64");
  }
  // A packed O without total_q has an extent not known here (0: not checked).
  const int64_t o_bytes = varlen_q && p.total_q == 0 ? 0 : o.span_bytes();
  for (const TensorView* t : {&q, &k, &v}) {
    if (byte_ranges_overlap(p.o, o.span_bytes(), t->ptr, t->span_bytes())) {
      return make_status(StatusCode::kInvalidArgument, "o overlaps %s; the output must not alias an input",
                         t->name);
    }
  }
  if (varlen_q && p.total_q > 0) {
    // [heads_q, total_q]
    if (__builtin_mul_overflow(p.heads_q, p.total_q, &lse_elems)) {
      return make_status(StatusCode::kInvalidArgument, "lse: heads_q * total_q overflows int64");
    }
  }
  const bool lse_bytes_known = p.lse != nullptr && (!varlen_q || p.total_q > 0);
  if (lse_bytes_known) {
    const int64_t lse_bytes = lse_elems * static_cast<int64_t>(sizeof(float));
    for (const TensorView* t : {&q, &k, &v, &o}) {
      if (byte_ranges_overlap(p.lse, lse_bytes, t->ptr, t->span_bytes())) {
        return make_status(StatusCode::kInvalidArgument, "lse overlaps %s; outputs must not alias other tensors",
                           t->name);
      }
    }
  }
  if (check_workspace && appends(p)) {
    // The lengths after the append (and the rotated Q) live in the
    // workspace, ahead of any split partials.
    const size_t ours = append_workspace_bytes(p);
    const size_t split = p.num_splits > 1 ? decode_workspace_bytes(p, p.num_splits) : 0;
    const size_t needed = ours == SIZE_MAX || split == SIZE_MAX || split > SIZE_MAX - ours ? SIZE_MAX : ours + split;
    if (p.workspace == nullptr || p.workspace_bytes < needed) {
      return make_status(StatusCode::kInvalidArgument,
                         "k_new needs a workspace of %zu bytes (attention_workspace_size(): the lengths after the "
                         "append%s%s); workspace is %s with workspace_bytes %zu",
                         needed, p.rotary_cos != nullptr ? ", the rotated Q" : "",
                         p.num_splits > 1 ? ", the split partials" : "", p.workspace == nullptr ? "null" : "set",
                         p.workspace_bytes);
    }
  } else if (check_workspace && p.q_dtype != KvDType::kSame) {
    const size_t needed = fp8_prefill_workspace_bytes(p);
    if (p.workspace == nullptr || p.workspace_bytes < needed) {
      return make_status(StatusCode::kInvalidArgument,
                         "the FP8 prefill needs a workspace of %zu bytes (attention_workspace_size(): V transposed); "
                         "workspace is %s with workspace_bytes %zu",
                         needed, p.workspace == nullptr ? "null" : "set", p.workspace_bytes);
    }
  } else if (check_workspace && p.num_splits > 1) {
    // The split count is the caller's here, so the workspace it needs is
    // known without the device (attention_workspace_size gives the same).
    const size_t needed = detail::decode_workspace_bytes(p, p.num_splits);
    if (p.workspace == nullptr || p.workspace_bytes < needed) {
      return make_status(StatusCode::kInvalidArgument,
                         "num_splits %d needs a workspace of %zu bytes (attention_workspace_size()); workspace is "
                         "%s with workspace_bytes %zu",
                         static_cast<int>(p.num_splits), needed, p.workspace == nullptr ? "null" : "set",
                         p.workspace_bytes);
    }
  }
  if (p.workspace != nullptr && p.workspace_bytes > 0) {
    const int64_t ws_bytes = workspace_extent(p);
    for (const TensorView* t : {&q, &k, &v, &o}) {
      if (byte_ranges_overlap(p.workspace, ws_bytes, t->ptr, t->span_bytes())) {
        return make_status(StatusCode::kInvalidArgument, "workspace overlaps %s; it must be memory of its own",
                           t->name);
      }
    }
    if (p.lse != nullptr && (!varlen_q || p.total_q > 0) &&
        byte_ranges_overlap(p.workspace, ws_bytes, p.lse, lse_elems * static_cast<int64_t>(sizeof(float)))) {
      return make_status(StatusCode::kInvalidArgument, "workspace overlaps lse; it must be memory of its own");
    }
  }
  {
    const Status st = check_append(p, q, k, v, o, dv, o_bytes,
                                   lse_bytes_known ? lse_elems * static_cast<int64_t>(sizeof(float)) : 0);
    if (!st.ok()) return st;
  }
  return check_index_arrays(p, o_bytes, lse_bytes_known ? lse_elems * static_cast<int64_t>(sizeof(float)) : 0);
}

}  // namespace detail
}  // namespace flash
