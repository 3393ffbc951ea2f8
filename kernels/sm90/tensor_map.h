// Building TMA tensor maps for 4-d (head_dim, seq, heads, batch) views of a
// strided tensor. The encoder is the driver's cuTensorMapEncodeTiled, looked
// up once through the runtime so nothing links against libcuda directly.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace flash::sm90 {

// Describes elements [batch][seq][heads][head_dim] at `base` (16-bit
// elements, strides in elements) with a (64, box_rows) box and 128-byte
// swizzle. Returns false when TMA cannot express it (stride or size limits,
// an empty dimension); the map is then unusable.
bool make_tensor_map(CUtensorMap* map, const void* base, bool is_bf16, int64_t head_dim, int64_t seqlen,
                     int64_t heads, int64_t batch, int64_t seq_stride, int64_t head_stride, int64_t batch_stride,
                     int box_rows);

}  // namespace flash::sm90
