// Building TMA tensor maps for 4-d (head_dim, seq, heads, batch) views of a
// strided tensor. The encoder is the driver's cuTensorMapEncodeTiled, looked
// up once through the runtime so nothing links against libcuda directly.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tma_limits.h"

namespace flash::sm90 {

// Describes `t` with a (64, box_rows) box and 128-byte swizzle. Returns
// false when tma_problem(t) names a problem or the driver's encoder is
// missing or refuses; the map is then unusable.
bool make_tensor_map(CUtensorMap* map, const TmaTensor& t, bool is_bf16, int box_rows);
// The same for any element type with a (box_cols, box_rows) box and a
// swizzle of `swizzle_bytes` (128, 64 or 32); box_cols times the element
// size at most swizzle_bytes.
bool make_tensor_map(CUtensorMap* map, const TmaTensor& t, CUtensorMapDataType type, int box_cols, int box_rows,
                     int swizzle_bytes = 128);

// Whether the driver offers the tensor-map encoder (looked up once).
bool tma_encoder_available();

}  // namespace flash::sm90
