// Random fills, poison and host dtype conversion for tests and benchmarks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

#include "device_tensor.h"
#include "element.cuh"

namespace flash::ref {
namespace {

// splitmix64 finaliser: a counter-based generator, so element i of a fill
// depends only on (seed, i) and any grid shape gives the same tensor.
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* dst, size_t count, uint64_t seed, float scale, float offset) {
  // The top 24 bits of the hash give k in [0, 2^24); (2k + 1 - 2^24) / 2^24
  // is uniform in (-1, 1), symmetric, and never zero: the numerator is an
  // odd integer of magnitude below 2^24, so exact in float.
  constexpr float kInv2p24 = 1.0f / 16777216.0f;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint64_t h = splitmix64(seed ^ splitmix64(i));
    const int32_t numerator = 2 * static_cast<int32_t>(h >> 40) + 1 - (1 << 24);
    dst[i] = to_element<T>(static_cast<float>(numerator) * kInv2p24 * scale + offset);
  }
}

}  // namespace

cudaError_t fill_uniform(void* dst, DType dtype, size_t count, uint64_t seed, float scale, cudaStream_t stream) {
  return fill_uniform_offset(dst, dtype, count, seed, scale, 0.f, stream);
}

cudaError_t fill_uniform_offset(void* dst, DType dtype, size_t count, uint64_t seed, float scale, float offset,
                                cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  constexpr size_t kMaxBlocks = 4096;  // grid-stride beyond this
  const size_t blocks_needed = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
  if (dtype == DType::kFloat16) {
    fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(dst), count, seed, scale, offset);
  } else if (dtype == DType::kBFloat16) {
    fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed, scale, offset);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t poison(void* dst, size_t bytes, cudaStream_t stream) { return cudaMemsetAsync(dst, 0xFF, bytes, stream); }

cudaError_t upload_sync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  return err == cudaSuccess ? cudaStreamSynchronize(stream) : err;
}

float e4m3_to_float(uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 7;
  const float sign = bits & 0x80 ? -1.f : 1.f;
  if (exponent == 0xf && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
}

uint8_t e4m3_from_float(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float magnitude = std::fabs(value);
  // The finite magnitudes are codes 0 .. 0x7e in increasing order: take the
  // nearest, the even code on a tie; beyond 448 (0x7e), 448.
  uint8_t best = 0;
  for (int code = 1; code <= 0x7e; ++code) {
    const float here = e4m3_to_float(static_cast<uint8_t>(code)), there = e4m3_to_float(best);
    const float d_here = std::fabs(here - magnitude), d_best = std::fabs(there - magnitude);
    if (d_here < d_best || (d_here == d_best && code % 2 == 0)) best = static_cast<uint8_t>(code);
  }
  return static_cast<uint8_t>(sign | best);
}

float to_float(uint16_t bits, DType dtype) {
  if (dtype == DType::kFloat16) {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
  // bf16 is the top half of a float32.
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t from_float(float value, DType dtype) {
  if (dtype == DType::kFloat16) {
    const __half_raw raw = __float2half_rn(value);
    return raw.x;
  }
  const __nv_bfloat16_raw raw = __float2bfloat16_rn(value);
  return raw.x;
}

}  // namespace flash::ref
