// Shared pieces of the argument checks (validate.cpp, validate_features.cpp):
// the limits they enforce and the checks of the inference-engine fields.
#pragma once

#include <cstdint>

#include "flash/flash.hpp"
#include "status.h"

namespace flash::detail {

// Head dims a call may have: every multiple of 8 from 8 to kMaxHeadDim (16-byte
// rows of fp16/bf16). Each runs on the smallest compiled kernel at least as
// wide (src/head_dims.h).
inline constexpr int64_t kMaxHeadDim = 256;
constexpr bool head_dim_supported(int64_t d) { return d >= 8 && d <= kMaxHeadDim && d % 8 == 0; }
#define FLASH_HEAD_DIM_RULE "a multiple of 8 from 8 to 256"
// Grid dimensions y (heads) and z (batch) are limited to 65535.
inline constexpr int64_t kMaxGridYZ = 65535;
// Row indices are 32-bit inside the kernels, with room for a block past the end.
inline constexpr int64_t kMaxSeqlen = int64_t{1} << 30;
// The kernels fold softmax_scale * log2(e) into one float and multiply raw
// scores by it. Scores of fp16 inputs are below 256 * 65504^2 < 2^40 in
// magnitude at head_dim <= 256, and below 2^41 apart; with the scale at most
// 1e24 (scale * log2(e) < 2^81) every such product, and the difference of
// two, stays below 2^123: finite in float32.
inline constexpr float kMaxSoftmaxScale = 1e24f;
// With a softcap the exp2 argument is tanh(...) * softcap * log2(e), |tanh| <= 1;
// up to 1e6 (softcap * log2(e) < 2^21) the float rounding of that product is
// below 2^-4 in exp2 units, so no probability leaves float (or fp16) range.
// A tiny cap would make softmax_scale / softcap overflow to inf (and a zero
// score NaN).
inline constexpr float kMinSoftcap = 1e-6f;
inline constexpr float kMaxSoftcap = 1e6f;
// The split-KV decode kernel packs seqlen_q * (heads_q / heads_kv) query rows
// per (batch, K/V head) with 32-bit row indices (room for one 16-row block
// past the last), in a grid of ceil(rows / 16) * splits CTAs along x.
inline constexpr int64_t kMaxDecodeRows = (int64_t{1} << 31) - 16;
inline constexpr int64_t kMaxGridX = INT32_MAX;

inline Status invalid(const char* format, int64_t a, int64_t b = 0) noexcept {
  return make_status(StatusCode::kInvalidArgument, format, static_cast<long long>(a), static_cast<long long>(b));
}

bool byte_ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) noexcept;
// The inference-engine fields: each alone, then how they combine.
Status validate_engine_features(const AttentionParams& p) noexcept;
// Sizes the split-KV decode kernel cannot launch (Backend::kDecode or num_splits > 1).
Status check_decode_grid(const AttentionParams& p) noexcept;
// Bytes of the workspace as the overlap checks measure it: workspace_bytes,
// capped so byte arithmetic stays in int64; 0 without a workspace.
inline int64_t workspace_extent(const AttentionParams& p) noexcept {
  if (p.workspace == nullptr) return 0;
  return static_cast<int64_t>(p.workspace_bytes < static_cast<size_t>(INT64_MAX / 2) ? p.workspace_bytes
                                                                                       : INT64_MAX / 2);
}
// Entries of the block table the kernels may read: (batch - 1) *
// block_table_batch_stride + max_pages_per_seq, saturated (0 without one).
// Sizes must be checked already.
int64_t block_table_entries(const AttentionParams& p) noexcept;
// The outputs must not overlap the int32 arrays the kernels read.
Status check_index_arrays(const AttentionParams& p, int64_t o_bytes, int64_t lse_bytes) noexcept;

}  // namespace flash::detail
