// Small helpers shared by tests, benchmark and examples' checks: device
// buffers, random fills, dtype conversion on the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flash/flash.hpp"

namespace flash::ref {

// Fills `count` elements of `dtype` at `dst` with uniform values in
// [-scale, scale) drawn from a counter-based hash of (seed, index): fresh
// data for every seed, never zeros. Asynchronous on `stream`.
cudaError_t fill_uniform(void* dst, DType dtype, size_t count, uint64_t seed, float scale, cudaStream_t stream);
// The same values shifted: offset + uniform in [-scale, scale), rounded to dtype.
cudaError_t fill_uniform_offset(void* dst, DType dtype, size_t count, uint64_t seed, float scale, float offset,
                                cudaStream_t stream);

// Sets `bytes` bytes at `dst` to 0xFF: a NaN pattern in fp16 and bf16, so an
// unwritten output element is caught.
cudaError_t poison(void* dst, size_t bytes, cudaStream_t stream);

// Copies `bytes` from host memory at `src` to `dst` on `stream` and waits
// for the copy. For data that kernels on a non-blocking stream will read: a
// plain cudaMemcpy from pageable memory runs on the legacy default stream,
// which such a stream does not wait for, and may return before its DMA
// lands, so a kernel launched right after could read stale bytes (a
// reference computed from them can come out infinite).
cudaError_t upload_sync(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// Host conversions of one element.
float to_float(uint16_t bits, DType dtype);
uint16_t from_float(float value, DType dtype);
// An e4m3 byte's value (OCP e4m3fn: bias 7, subnormals, 0x7f / 0xff NaN).
float e4m3_to_float(uint8_t bits);
// The e4m3 byte nearest `value` (ties to the even code), saturated to
// +-448; NaN in, NaN (0x7f) out. What cvt.rn.satfinite.e4m3x2.f32 gives.
uint8_t e4m3_from_float(float value);

}  // namespace flash::ref
