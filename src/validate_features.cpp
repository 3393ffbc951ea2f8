// Checks of the inference-engine fields of AttentionParams (varlen, paged
// KV, windows, softcap, split-KV), and of the index arrays the kernels read.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "flash/flash.hpp"
#include "kernels/decode/api.h"
#include "status.h"
#include "validate_checks.h"

namespace flash::detail {

bool byte_ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) noexcept {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  const auto a0 = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(a));
  const auto b0 = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(b));
  return a0 < b0 + static_cast<unsigned __int128>(b_bytes) && b0 < a0 + static_cast<unsigned __int128>(a_bytes);
}

// The inference-engine fields: each alone, then how they combine.
Status validate_engine_features(const AttentionParams& p) noexcept {
  if (p.total_q < 0 || p.total_k < 0) {
    return invalid("total_q (%lld) and total_k (%lld) must be >= 0 (0: not given)", p.total_q, p.total_k);
  }
  if (p.window_left < -1 || p.window_right < -1) {
    return invalid("window_left (%lld) and window_right (%lld) must be >= -1 (-1: unbounded)", p.window_left,
                   p.window_right);
  }
  if (p.causal && p.window_right > 0) {
    return invalid("causal is window_right = 0, but window_right is %lld; use causal = false with a window, or "
                   "window_right -1 or 0",
                   p.window_right);
  }
  if (!std::isfinite(p.softcap) || p.softcap < 0.f ||
      (p.softcap > 0.f && (p.softcap < kMinSoftcap || p.softcap > kMaxSoftcap))) {
    return make_status(StatusCode::kInvalidArgument,
                       "softcap is %g; it must be 0 (off) or in [1e-6, 1e6] (larger caps overflow the "
                       "kernels' float32 softmax)",
                       static_cast<double>(p.softcap));
  }
  // ALiBi's bias is scaled by 1 / softmax_scale in the kernels (the softcap
  // folds its cap, at least 1e-6, into that scale): it must stay finite.
  if (p.alibi_slopes != nullptr && p.softcap == 0.f && p.softmax_scale != 0.f && p.softmax_scale < 1e-30f) {
    return make_status(StatusCode::kInvalidArgument,
                       "softmax_scale is %g; with alibi_slopes it must be 0 (default) or at least 1e-30",
                       static_cast<double>(p.softmax_scale));
  }
  if (p.num_splits < 0 || p.num_splits > 128) {
    return invalid("num_splits is %lld; it must be 0 (automatic), 1 (no split) or up to 128", p.num_splits);
  }
  if (reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0) {
    return make_status(StatusCode::kInvalidArgument, "workspace (%p) must be 256-byte aligned", p.workspace);
  }
  for (const auto& ptr : {std::pair<const char*, const int32_t*>{"cu_seqlens_q", p.cu_seqlens_q},
                          {"cu_seqlens_k", p.cu_seqlens_k},
                          {"seqused_k", p.seqused_k},
                          {"block_table", p.block_table}}) {
    if (reinterpret_cast<uintptr_t>(ptr.second) % alignof(int32_t) != 0) {
      return make_status(StatusCode::kInvalidArgument, "%s (%p) is not 4-byte aligned", ptr.first,
                         static_cast<const void*>(ptr.second));
    }
  }
  for (const auto& ptr : {std::pair<const char*, const float*>{"sinks", p.sinks}, {"alibi_slopes", p.alibi_slopes}}) {
    if (reinterpret_cast<uintptr_t>(ptr.second) % alignof(float) != 0) {
      return make_status(StatusCode::kInvalidArgument, "%s (%p) is not 4-byte aligned", ptr.first,
                         static_cast<const void*>(ptr.second));
    }
  }
  if (p.block_table == nullptr) return Status{};
  if (p.cu_seqlens_k != nullptr) {
    return make_status(StatusCode::kInvalidArgument,
                       "cu_seqlens_k and block_table are exclusive: a paged cache gives each sequence's length "
                       "in seqused_k");
  }
  if (p.page_size <= 0) {
    return invalid("page_size is %lld; a paged cache needs at least one key per page", p.page_size);
  }
  if (p.num_pages <= 0) return invalid("num_pages is %lld; a paged cache needs at least one page", p.num_pages);
  if (p.max_pages_per_seq <= 0) {
    return invalid("max_pages_per_seq is %lld; a block table needs at least one entry per sequence",
                   p.max_pages_per_seq);
  }
  if (p.batch > 1 && p.block_table_batch_stride < p.max_pages_per_seq) {
    return invalid("block_table_batch_stride (%lld) must be >= max_pages_per_seq (%lld)",
                   p.block_table_batch_stride, p.max_pages_per_seq);
  }
  int64_t capacity = 0;
  if (__builtin_mul_overflow(p.max_pages_per_seq, p.page_size, &capacity) || capacity > kMaxSeqlen) {
    return invalid("max_pages_per_seq * page_size (%lld * %lld) exceeds 2^30 keys", p.max_pages_per_seq,
                   p.page_size);
  }
  if (p.seqused_k == nullptr && p.seqlen_k > capacity) {
    return invalid("seqlen_k (%lld) exceeds what a block-table row addresses (max_pages_per_seq * page_size = "
                   "%lld); pass seqused_k or a larger table",
                   p.seqlen_k, capacity);
  }
  return Status{};
}

// Sizes the split-KV decode kernel cannot launch. It runs every call with
// Backend::kDecode or num_splits > 1; kAuto takes it for seqlen_q <= 16, far
// inside these limits, and for fp8-cache calls the Hopper kernel does not
// take, which make_plan checks with this. The limits are the grid's, not the
// device's.
Status check_decode_grid(const AttentionParams& p) noexcept {
  if (p.backend != Backend::kDecode && p.num_splits <= 1) return Status{};
  // Sizes are checked by now: seqlen_q <= 2^30, heads_q <= 65535, so no product here overflows.
  const int64_t rows = p.seqlen_q * (p.heads_q / p.heads_kv);
  if (rows > kMaxDecodeRows) {
    return make_status(StatusCode::kUnsupported,
                       "the split-KV decode kernel (Backend::kDecode, num_splits > 1, or an fp8 cache off the "
                       "Hopper kernel) packs seqlen_q * heads_q / heads_kv = %lld query rows per K/V head; it takes "
                       "at most 2^31 - 16",
                       static_cast<long long>(rows));
  }
  const int64_t ctas = (rows + decode::kBlockM - 1) / decode::kBlockM * std::max<int64_t>(p.num_splits, 1);
  if (ctas > kMaxGridX) {
    return make_status(StatusCode::kUnsupported,
                       "the split-KV decode kernel would launch %lld CTAs along x (%lld query rows in blocks of "
                       "16, times %d splits); at most 2^31 - 1: use fewer splits",
                       static_cast<long long>(ctas), static_cast<long long>(rows), static_cast<int>(p.num_splits));
  }
  // The combine kernel runs one CTA per (batch, head, query) row.
  if (p.num_splits > 1 && p.batch * p.heads_q * p.seqlen_q > kMaxGridX) {
    return make_status(StatusCode::kUnsupported,
                       "num_splits %d: batch * heads_q * seqlen_q must be < 2^31 to split the keys",
                       static_cast<int>(p.num_splits));
  }
  return Status{};
}

// The outputs (O over o_bytes, the LSE over lse_bytes, the workspace) must
// not overlap the arrays the kernels read (int32): cu_seqlens_q/k (batch + 1
// entries), seqused_k (batch) and block_table ((batch - 1) *
// block_table_batch_stride + max_pages_per_seq), the float sinks and
// ALiBi slopes (heads_q each) and the fp8 descales (1 or heads_kv each).
// A zero extent is not checked.
int64_t block_table_entries(const AttentionParams& p) noexcept {
  // Sizes are checked by now (batch <= 65535, with a block table 1 <=
  // max_pages_per_seq <= 2^30 and the stride >= it when batch > 1); the
  // stride has no upper bound, so the table's extent saturates.
  if (p.block_table == nullptr) return 0;
  if (p.batch <= 1) return p.max_pages_per_seq;
  return static_cast<int64_t>(std::min<__int128>(
      static_cast<__int128>(p.batch - 1) * p.block_table_batch_stride + p.max_pages_per_seq, INT64_MAX / 8));
}

Status check_index_arrays(const AttentionParams& p, int64_t o_bytes, int64_t lse_bytes) noexcept {
  constexpr int64_t kInt32 = static_cast<int64_t>(sizeof(int32_t));
  const int64_t table_entries = block_table_entries(p);
  // fp8 descales: one float, or one per K/V head (validate checked the stride).
  const int64_t descale_bytes = (p.descale_head_stride == 1 ? p.heads_kv : 1) * static_cast<int64_t>(sizeof(float));
  const struct {
    const char* name;
    const void* ptr;
    int64_t bytes;
  } arrays[] = {{"cu_seqlens_q", p.cu_seqlens_q, (p.batch + 1) * kInt32},
                {"cu_seqlens_k", p.cu_seqlens_k, (p.batch + 1) * kInt32},
                {"seqused_k", p.seqused_k, p.batch * kInt32},
                {"block_table", p.block_table, table_entries * kInt32},
                {"sinks", p.sinks, p.heads_q * static_cast<int64_t>(sizeof(float))},
                {"alibi_slopes", p.alibi_slopes, p.heads_q * static_cast<int64_t>(sizeof(float))},
                {"k_descale", p.k_descale, descale_bytes},
                {"v_descale", p.v_descale, descale_bytes},
                {"q_descale", p.q_descale, descale_bytes}};
  const int64_t ws_bytes = workspace_extent(p);
  const struct {
    const char* name;
    const void* ptr;
    int64_t bytes;
  } outputs[] = {{"o", p.o, o_bytes}, {"lse", p.lse, lse_bytes}, {"workspace", p.workspace, ws_bytes}};
  for (const auto& out : outputs) {
    if (out.ptr == nullptr) continue;
    for (const auto& a : arrays) {
      if (a.ptr != nullptr && byte_ranges_overlap(out.ptr, out.bytes, a.ptr, a.bytes)) {
        return make_status(StatusCode::kInvalidArgument,
                           "%s overlaps %s (%lld bytes at %p); outputs must not overlap the index, sink and descale "
                           "arrays the kernels read",
                           out.name, a.name, static_cast<long long>(a.bytes), a.ptr);
      }
    }
  }
  return Status{};
}

}  // namespace flash::detail
