// Rounding a float to the tests' 16-bit element types on the device, shared
// by the random fill and the reference's kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace flash::ref {

template <typename T>
__device__ __forceinline__ T to_element(float x);
template <>
__device__ __forceinline__ __half to_element<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_element<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace flash::ref
