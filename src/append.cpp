#include "append.h"

#include <cstdint>

#include "head_dims.h"
#include "kernels/append/append.h"

namespace flash::detail {
namespace {

constexpr uint64_t kAlign = 256;

uint64_t round_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool rotates(const AttentionParams& p) { return p.rotary_cos != nullptr; }

// Rows of the rotated Q: total_q packed, else batch * seqlen_q.
int64_t q_rows(const AttentionParams& p) { return p.cu_seqlens_q != nullptr ? p.total_q : p.batch * p.seqlen_q; }

uint64_t lengths_bytes(const AttentionParams& p) { return round_up(static_cast<uint64_t>(p.batch) * sizeof(int32_t)); }

}  // namespace

size_t append_workspace_bytes(const AttentionParams& p) noexcept {
  if (!appends(p)) return 0;
  uint64_t bytes = lengths_bytes(p);
  if (rotates(p)) {
    uint64_t q = 0;
    // Sizes are validated (rows < 2^46, heads_q <= 65535, head_dim <= 256).
    if (__builtin_mul_overflow(static_cast<uint64_t>(q_rows(p)), static_cast<uint64_t>(p.heads_q * p.head_dim * 2),
                               &q)) {
      return SIZE_MAX;
    }
    bytes += round_up(q);
  }
  return bytes > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(bytes);
}

AttentionParams attention_call(const AttentionParams& p) noexcept {
  if (!appends(p)) return p;
  AttentionParams a = p;
  a.k_new = a.v_new = nullptr;
  a.seqlen_new = 0;
  a.cu_seqlens_k_new = nullptr;
  a.k_new_batch_stride = a.k_new_seq_stride = a.k_new_head_stride = 0;
  a.v_new_batch_stride = a.v_new_seq_stride = a.v_new_head_stride = 0;
  a.rotary_cos = a.rotary_sin = nullptr;
  a.rotary_dim = a.rotary_positions = 0;
  a.rotary_interleaved = false;
  if (rotates(p)) {
    a.q_head_stride = p.head_dim;
    a.q_seq_stride = p.heads_q * p.head_dim;
    a.q_batch_stride = p.cu_seqlens_q != nullptr ? 0 : p.seqlen_q * a.q_seq_stride;
  }
  const size_t ours = append_workspace_bytes(p);
  if (p.workspace == nullptr || p.workspace_bytes < ours) {
    a.workspace = nullptr;
    a.workspace_bytes = 0;
    return a;
  }
  char* ws = static_cast<char*>(p.workspace);
  a.seqused_k = reinterpret_cast<const int32_t*>(ws);
  if (rotates(p)) a.q = ws + lengths_bytes(p);
  a.workspace = p.workspace_bytes > ours ? ws + ours : nullptr;
  a.workspace_bytes = p.workspace_bytes - ours;
  return a;
}

cudaError_t launch_append(const AttentionParams& p, cudaStream_t stream) noexcept {
  const bool paged = p.block_table != nullptr;
  append::AppendArgs a{};
  a.k = const_cast<void*>(p.k);
  a.v = const_cast<void*>(p.v);
  a.fp8_cache = p.kv_dtype == KvDType::kFloat8E4M3;
  a.k_descale = p.k_descale;
  a.v_descale = p.v_descale;
  a.descale_head_stride = p.descale_head_stride;
  a.k_batch_stride = p.k_batch_stride, a.k_seq_stride = p.k_seq_stride, a.k_head_stride = p.k_head_stride;
  a.v_batch_stride = p.v_batch_stride, a.v_seq_stride = p.v_seq_stride, a.v_head_stride = p.v_head_stride;
  a.block_table = p.block_table;
  a.block_table_batch_stride = p.block_table_batch_stride;
  a.page_size = paged ? static_cast<int>(p.page_size) : 1;
  a.alloc = static_cast<int>(paged ? p.max_pages_per_seq * p.page_size : p.seqlen_k);
  a.seqused_k = p.seqused_k;
  a.lengths = static_cast<int32_t*>(p.workspace);
  a.k_new = p.k_new;
  a.v_new = p.v_new;
  a.k_new_batch_stride = p.k_new_batch_stride, a.k_new_seq_stride = p.k_new_seq_stride;
  a.k_new_head_stride = p.k_new_head_stride;
  a.v_new_batch_stride = p.v_new_batch_stride, a.v_new_seq_stride = p.v_new_seq_stride;
  a.v_new_head_stride = p.v_new_head_stride;
  a.cu_seqlens_new = p.cu_seqlens_k_new;
  a.seqlen_new = static_cast<int>(p.seqlen_new);
  a.q = p.q;
  a.q_batch_stride = p.q_batch_stride, a.q_seq_stride = p.q_seq_stride, a.q_head_stride = p.q_head_stride;
  a.cu_seqlens_q = p.cu_seqlens_q;
  a.seqlen_q = static_cast<int>(p.seqlen_q);
  a.q_out = rotates(p) ? static_cast<char*>(p.workspace) + lengths_bytes(p) : nullptr;
  a.rotary_cos = p.rotary_cos;
  a.rotary_sin = p.rotary_sin;
  a.rotary_dim = static_cast<int>(p.rotary_dim);
  a.rotary_positions = static_cast<int>(p.rotary_positions);
  a.rotary_interleaved = p.rotary_interleaved;
  a.batch = static_cast<int>(p.batch);
  a.heads_q = static_cast<int>(p.heads_q);
  a.heads_kv = static_cast<int>(p.heads_kv);
  a.head_dim = static_cast<int>(p.head_dim);
  a.head_dim_v = static_cast<int>(value_head_dim(p.head_dim, p.head_dim_v));
  return append::launch_append(a, p.dtype, stream);
}

}  // namespace flash::detail
