// flash::merge_states: its argument checks (no GPU touched) and its launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

#include "flash/flash.hpp"
#include "head_dims.h"
#include "kernels/merge/merge.h"
#include "status.h"
#include "validate_checks.h"

namespace flash {
namespace {

using detail::invalid;
using detail::make_status;

// The grid has one CTA per row along x.
constexpr int64_t kMaxRows = INT32_MAX;
constexpr int64_t kMaxStates = 128;

// Largest element offset + 1 of a [batch, seq, heads, head_dim] tensor with
// these strides, or -1 when it overflows int64 (sizes are checked first).
int64_t span(const MergeParams& p, int64_t sb, int64_t ss, int64_t sh) noexcept {
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads == 0) return 0;
  int64_t total = p.head_dim;
  for (auto [size, stride] : {std::pair{p.batch, sb}, std::pair{p.seqlen_q, ss}, std::pair{p.heads, sh}}) {
    int64_t term = 0;
    if (__builtin_mul_overflow(size - 1, stride, &term) || __builtin_add_overflow(total, term, &total)) return -1;
  }
  return total > INT64_MAX / 16 ? -1 : total;
}

// Output rows must not overlap one another: sorted by stride, each
// dimension must step past what the smaller ones cover.
bool rows_distinct(const MergeParams& p, int64_t sb, int64_t ss, int64_t sh) noexcept {
  std::pair<int64_t, int64_t> dims[3] = {{sb, p.batch}, {ss, p.seqlen_q}, {sh, p.heads}};
  std::sort(dims, dims + 3);
  int64_t extent = p.head_dim;
  for (const auto& [stride, size] : dims) {
    if (size <= 1) continue;
    if (stride < extent) return false;
    extent = stride * (size - 1) + extent;
  }
  return true;
}

// Byte range [base + first, base + first + bytes) of `count` blocks `step`
// bytes apart, each `bytes` long: the whole range they cover, or -1.
int64_t blocks_bytes(int64_t count, int64_t step, int64_t bytes) noexcept {
  int64_t total = 0;
  if (__builtin_mul_overflow(count - 1, step, &total) || __builtin_add_overflow(total, bytes, &total)) return -1;
  return total;
}

}  // namespace

void MergeParams::set_contiguous() noexcept {
  o_head_stride = o_states_head_stride = head_dim;
  o_seq_stride = o_states_seq_stride = heads * head_dim;
  o_batch_stride = o_states_batch_stride = seqlen_q * heads * head_dim;
  o_state_stride = batch * seqlen_q * heads * head_dim;
  lse_state_stride = batch * heads * seqlen_q;
}

Status validate(const MergeParams& p) noexcept {
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return invalid("dtype is %lld; it must be DType::kFloat16 (0) or kBFloat16 (1)", static_cast<int64_t>(p.dtype));
  }
  if (p.num_states < 1 || p.num_states > kMaxStates) {
    return invalid("num_states is %lld; it must be 1 to %lld", p.num_states, kMaxStates);
  }
  if (!detail::head_dim_supported(p.head_dim)) {
    return invalid("head_dim is %lld; it must be " FLASH_HEAD_DIM_RULE, p.head_dim);
  }
  for (auto [name, v] : {std::pair{"batch", p.batch}, std::pair{"seqlen_q", p.seqlen_q}, std::pair{"heads", p.heads}}) {
    if (v < 0 || v > kMaxRows) {
      return make_status(StatusCode::kInvalidArgument, "%s is %lld; it must be 0 to 2^31 - 1", name,
                         static_cast<long long>(v));
    }
  }
  int64_t rows = 0;
  if (__builtin_mul_overflow(p.batch, p.seqlen_q, &rows) || __builtin_mul_overflow(rows, p.heads, &rows) ||
      rows > kMaxRows) {
    return invalid("batch * seqlen_q * heads is over 2^31 - 1 (%lld x %lld x heads); merge_states runs one "
                   "CTA per row",
                   p.batch, p.seqlen_q);
  }
  if (rows == 0) return Status{};  // nothing to read or write
  if (p.o_states == nullptr || p.lse_states == nullptr || p.o == nullptr) {
    return make_status(StatusCode::kInvalidArgument, "o_states, lse_states and o must be device pointers (one is "
                       "null)");
  }
  const int64_t strides[] = {p.o_state_stride,       p.o_states_batch_stride, p.o_states_seq_stride,
                             p.o_states_head_stride, p.lse_state_stride,      p.o_batch_stride,
                             p.o_seq_stride,         p.o_head_stride};
  for (int64_t s : strides) {
    if (s < 0) return invalid("a stride is %lld; strides must be >= 0", s);
  }
  if (reinterpret_cast<uintptr_t>(p.o_states) % 2 != 0 || reinterpret_cast<uintptr_t>(p.o) % 2 != 0 ||
      reinterpret_cast<uintptr_t>(p.lse_states) % 4 != 0 || reinterpret_cast<uintptr_t>(p.lse) % 4 != 0) {
    return make_status(StatusCode::kInvalidArgument,
                       "o_states and o must be 2-byte aligned, lse_states and lse 4-byte aligned");
  }
  const int64_t in_span =
      span(p, p.o_states_batch_stride, p.o_states_seq_stride, p.o_states_head_stride);
  const int64_t out_span = span(p, p.o_batch_stride, p.o_seq_stride, p.o_head_stride);
  if (in_span < 0 || out_span < 0) {
    return make_status(StatusCode::kInvalidArgument, "sizes and strides give element offsets that overflow int64");
  }
  if (!rows_distinct(p, p.o_batch_stride, p.o_seq_stride, p.o_head_stride)) {
    return make_status(StatusCode::kInvalidArgument, "o's strides make different output rows overlap");
  }
  // Byte ranges: every state's O, every state's LSE, the outputs.
  if (p.o_state_stride > INT64_MAX / 16 || p.lse_state_stride > INT64_MAX / 16) {
    return make_status(StatusCode::kInvalidArgument, "the states' strides give offsets that overflow int64");
  }
  const int64_t in_bytes = blocks_bytes(p.num_states, p.o_state_stride * 2, in_span * 2);
  const int64_t lse_in_bytes = blocks_bytes(p.num_states, p.lse_state_stride * 4, rows * 4);
  if (in_bytes < 0 || lse_in_bytes < 0) {
    return make_status(StatusCode::kInvalidArgument, "the states' strides give offsets that overflow int64");
  }
  const int64_t out_bytes = out_span * 2, lse_out_bytes = rows * 4;
  // In place: the output is state k itself (its address and strides), and the
  // states do not interleave, so output row r overlaps state k's row r only.
  auto in_place_state = [&](const void* base, const void* out, int64_t step_bytes, int64_t one_bytes) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(base), o = reinterpret_cast<uintptr_t>(out);
    if (o < b) return false;
    const uintptr_t offset = o - b;
    if (p.num_states == 1) return offset == 0;
    if (step_bytes < one_bytes) return false;  // the states interleave (or coincide)
    const uintptr_t step = static_cast<uintptr_t>(step_bytes);
    return offset % step == 0 && offset / step < static_cast<uintptr_t>(p.num_states);
  };
  const void* o_in = p.o_states;
  const void* o_out = p.o;
  if (detail::byte_ranges_overlap(p.o, out_bytes, p.o_states, in_bytes)) {
    const bool same_strides = p.o_batch_stride == p.o_states_batch_stride &&
                              p.o_seq_stride == p.o_states_seq_stride && p.o_head_stride == p.o_states_head_stride;
    if (!same_strides || !in_place_state(o_in, o_out, p.o_state_stride * 2, in_span * 2)) {
      return make_status(StatusCode::kInvalidArgument,
                         "o overlaps the states' O without being one of them (in place: o must be state k's "
                         "address with its strides, and the states must not interleave)");
    }
  }
  if (p.lse != nullptr && detail::byte_ranges_overlap(p.lse, lse_out_bytes, p.lse_states, lse_in_bytes) &&
      !in_place_state(p.lse_states, p.lse, p.lse_state_stride * 4, lse_out_bytes)) {
    return make_status(StatusCode::kInvalidArgument,
                       "lse overlaps the states' LSE without being one of them (in place: lse must be state k's, "
                       "and the states' LSEs must not interleave)");
  }
  if (detail::byte_ranges_overlap(p.o, out_bytes, p.lse_states, lse_in_bytes) ||
      (p.lse != nullptr && detail::byte_ranges_overlap(p.lse, lse_out_bytes, p.o_states, in_bytes)) ||
      (p.lse != nullptr && detail::byte_ranges_overlap(p.lse, lse_out_bytes, p.o, out_bytes))) {
    return make_status(StatusCode::kInvalidArgument, "an output O overlaps an LSE, or the output LSE an O");
  }
  return Status{};
}

Status merge_states(const MergeParams& p, CUstream_st* stream) noexcept {
  const Status valid = validate(p);
  if (!valid.ok()) return valid;
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads == 0) return Status{};
  merge::MergeArgs a{};
  a.o_states = p.o_states;
  a.lse_states = p.lse_states;
  a.o = p.o;
  a.lse = p.lse;
  a.o_state_stride = p.o_state_stride;
  a.lse_state_stride = p.lse_state_stride;
  a.in_batch_stride = p.o_states_batch_stride;
  a.in_seq_stride = p.o_states_seq_stride;
  a.in_head_stride = p.o_states_head_stride;
  a.out_batch_stride = p.o_batch_stride;
  a.out_seq_stride = p.o_seq_stride;
  a.out_head_stride = p.o_head_stride;
  a.num_states = static_cast<int>(p.num_states);
  a.head_dim = static_cast<int>(p.head_dim);
  a.batch = static_cast<int>(p.batch);
  a.seqlen_q = static_cast<int>(p.seqlen_q);
  a.heads = static_cast<int>(p.heads);
  const cudaError_t err = merge::launch_merge(a, p.dtype, stream);
  if (err != cudaSuccess) {
    return make_status(StatusCode::kCudaError, "merge_states: %s (%s)", cudaGetErrorName(err),
                       cudaGetErrorString(err));
  }
  return Status{};
}

}  // namespace flash
