// Append and rotate: writes each sequence's new K/V rows into the cache
// (rotating the keys' first rotary_dim columns by their positions; into an
// fp8 cache divided by the descale and rounded to e4m3), rotates Q into a
// dense copy, and records each sequence's key count after the append. One
// warp per (row, head); lanes stride over the row's elements. The rotation
// is computed in float32 without contraction and rounded once, so a host
// doing the same operations in float32 gets the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../common/ptx.cuh"
#include "../common/launch.cuh"
#include "../common/rotary.cuh"
#include "append.h"

namespace flash::append {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// A cache element from a float: the element type itself, or (C = uint8_t,
// an fp8 cache) e4m3 of x / descale, rounded to nearest, saturated.
template <typename T, typename C>
__device__ __forceinline__ C to_cache(float x, float descale) {
  if constexpr (std::is_same_v<C, uint8_t>) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, descale), __NV_SATFINITE, __NV_E4M3));
  } else {
    return ptx::from_float<T>(x);
  }
}

// Copies one row of `width` elements from `src` to `dst`, rotating its first
// rotary_dim columns by table row `pos` (rotary_cos null or rotate false:
// a plain copy); C = uint8_t stores e4m3 of each value / descale. Called by
// a whole warp.
template <typename T, typename C = T>
__device__ void rotate_row(const AppendArgs& a, const T* src, C* dst, int width, int pos, bool rotate,
                           float descale = 1.f) {
  const int lane = threadIdx.x % 32;
  const int rd = rotate && a.rotary_cos != nullptr ? a.rotary_dim : 0;
  const int half = rd / 2;
  const float* cos_row = rd > 0 ? a.rotary_cos + static_cast<int64_t>(pos) * half : nullptr;
  const float* sin_row = rd > 0 ? a.rotary_sin + static_cast<int64_t>(pos) * half : nullptr;
  for (int e = lane; e < width; e += 32) {
    if (e >= rd) {
      if constexpr (std::is_same_v<C, T>) {
        dst[e] = src[e];
      } else {
        dst[e] = to_cache<T, C>(rotary::to_f32(src[e]), descale);
      }
      continue;
    }
    const float out = rotary::rotated_element(src, e, half, a.rotary_interleaved, cos_row, sin_row);
    dst[e] = to_cache<T, C>(out, descale);
  }
}

// grid (x, batch, 2): z = 0 appends sequence blockIdx.y's new rows, z = 1
// rotates its query rows.
template <typename T, typename C>
__global__ void __launch_bounds__(kThreads) append_kernel(const __grid_constant__ AppendArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The decode kernel after it may launch now; it waits for this grid to
  // finish before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int b = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int old_len = min(max(__ldg(a.seqused_k + b), 0), a.alloc);
  const int first_new = a.cu_seqlens_new != nullptr ? __ldg(a.cu_seqlens_new + b) : 0;
  const int n_new = a.cu_seqlens_new != nullptr ? __ldg(a.cu_seqlens_new + b + 1) - first_new : a.seqlen_new;
  const int len = old_len + min(max(n_new, 0), a.alloc - old_len);  // no int overflow: old_len <= alloc

  if (blockIdx.z == 0) {
    if (blockIdx.x == 0 && threadIdx.x == 0) a.lengths[b] = len;
    const int rows = len - old_len;  // those that fit the allocation
    const int64_t tasks = static_cast<int64_t>(rows) * a.heads_kv;
    for (int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + warp; task < tasks;
         task += static_cast<int64_t>(gridDim.x) * kWarps) {
      const int t = static_cast<int>(task / a.heads_kv), h = static_cast<int>(task % a.heads_kv);
      const int pos = old_len + t;
      const int64_t src_row = a.cu_seqlens_new != nullptr ? first_new + t : t;
      const int64_t src_batch = a.cu_seqlens_new != nullptr ? 0 : b;
      const T* k_src = static_cast<const T*>(a.k_new) + src_batch * a.k_new_batch_stride +
                       src_row * a.k_new_seq_stride + h * a.k_new_head_stride;
      const T* v_src = static_cast<const T*>(a.v_new) + src_batch * a.v_new_batch_stride +
                       src_row * a.v_new_seq_stride + h * a.v_new_head_stride;
      int64_t page = b, row = pos;
      if (a.block_table != nullptr) {
        page = __ldg(a.block_table + b * a.block_table_batch_stride + pos / a.page_size);
        row = pos % a.page_size;
      }
      C* k_dst = static_cast<C*>(a.k) + page * a.k_batch_stride + row * a.k_seq_stride + h * a.k_head_stride;
      C* v_dst = static_cast<C*>(a.v) + page * a.v_batch_stride + row * a.v_seq_stride + h * a.v_head_stride;
      float k_descale = 1.f, v_descale = 1.f;
      if constexpr (std::is_same_v<C, uint8_t>) {
        if (a.k_descale != nullptr) k_descale = __ldg(a.k_descale + h * a.descale_head_stride);
        if (a.v_descale != nullptr) v_descale = __ldg(a.v_descale + h * a.descale_head_stride);
      }
      rotate_row(a, k_src, k_dst, a.head_dim, rotary::table_row(pos, a.rotary_positions), true, k_descale);
      rotate_row(a, v_src, v_dst, a.head_dim_v, 0, false, v_descale);
    }
    return;
  }
  // Query rows: bottom-right aligned to the keys after the append.
  if (a.rotary_cos == nullptr) return;
  const int first_q = a.cu_seqlens_q != nullptr ? __ldg(a.cu_seqlens_q + b) : 0;
  const int len_q = a.cu_seqlens_q != nullptr ? __ldg(a.cu_seqlens_q + b + 1) - first_q : a.seqlen_q;
  const int64_t tasks = static_cast<int64_t>(len_q) * a.heads_q;
  for (int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + warp; task < tasks;
       task += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int i = static_cast<int>(task / a.heads_q), h = static_cast<int>(task % a.heads_q);
    const int64_t row = a.cu_seqlens_q != nullptr ? static_cast<int64_t>(first_q) + i : static_cast<int64_t>(b) * a.seqlen_q + i;
    const int64_t src_batch = a.cu_seqlens_q != nullptr ? 0 : b;
    const int64_t src_row = a.cu_seqlens_q != nullptr ? row : i;
    const T* src = static_cast<const T*>(a.q) + src_batch * a.q_batch_stride + src_row * a.q_seq_stride +
                   h * a.q_head_stride;
    T* dst = static_cast<T*>(a.q_out) + (row * a.heads_q + h) * a.head_dim;
    const int pos = rotary::table_row(len - len_q + i, a.rotary_positions);
    rotate_row(a, src, dst, a.head_dim, pos, true);
  }
}

template <typename T, typename C>
cudaError_t launch(const AppendArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  // Enough CTAs for the longest sequence's rows, at most 1024 per sequence
  // and part (the warps loop over the rest).
  const int64_t rows = std::max<int64_t>(static_cast<int64_t>(a.seqlen_new) * a.heads_kv,
                                         a.rotary_cos != nullptr ? static_cast<int64_t>(a.seqlen_q) * a.heads_q : 0);
  const int64_t blocks = std::min<int64_t>(std::max<int64_t>((rows + kWarps - 1) / kWarps, 1), 1024);
  return launch_kernel(append_kernel<T, C>, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(a.batch), 2),
                       dim3(kThreads), 0, stream, a);
}

}  // namespace

cudaError_t launch_append(const AppendArgs& args, DType dtype, cudaStream_t stream) {
  if (args.fp8_cache) {
    return dtype == DType::kFloat16 ? launch<__half, uint8_t>(args, stream)
                                    : launch<__nv_bfloat16, uint8_t>(args, stream);
  }
  return dtype == DType::kFloat16 ? launch<__half, __half>(args, stream)
                                  : launch<__nv_bfloat16, __nv_bfloat16>(args, stream);
}

}  // namespace flash::append
