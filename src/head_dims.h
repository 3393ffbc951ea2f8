// The head dims compiled into this build (FLASH_HEAD_DIMS), which kernel
// serves a call's head dim, and the one switch from a runtime head dim to a
// template argument.
#pragma once

#include <cstdint>
#include <type_traits>

namespace flash::detail {

// Calls f(std::integral_constant<int, head_dim>{}) when head_dim is
// compiled into this build, else returns `otherwise`.
template <typename R, typename F>
R with_head_dim(int64_t head_dim, R otherwise, F&& f) {
  switch (head_dim) {
#if FLASH_HAS_HEAD_DIM_32
    case 32: return f(std::integral_constant<int, 32>{});
#endif
#if FLASH_HAS_HEAD_DIM_64
    case 64: return f(std::integral_constant<int, 64>{});
#endif
#if FLASH_HAS_HEAD_DIM_96
    case 96: return f(std::integral_constant<int, 96>{});
#endif
#if FLASH_HAS_HEAD_DIM_128
    case 128: return f(std::integral_constant<int, 128>{});
#endif
#if FLASH_HAS_HEAD_DIM_192
    case 192: return f(std::integral_constant<int, 192>{});
#endif
#if FLASH_HAS_HEAD_DIM_256
    case 256: return f(std::integral_constant<int, 256>{});
#endif
    default: return otherwise;
  }
}

inline bool head_dim_compiled(int64_t head_dim) {
  return with_head_dim(head_dim, false, [](auto) { return true; });
}

// The head dims kernels can be compiled for, narrowest first. The sm90
// (Hopper) kernel has 96 and the multiples of 64 among them; the fp8 (e4m3)
// cache kernels (decode and sm90) the multiples of 64.
inline constexpr int kKernelHeadDims[] = {32, 64, 96, 128, 192, 256};
constexpr bool sm90_head_dim(int d) { return d % 64 == 0 || d == 96; }
constexpr bool fp8_head_dim(int d) { return d % 64 == 0; }

// Which kernels run a call: the sm80 and decode kernels (every compiled
// head dim), the sm90 kernel, or an fp8 cache's kernels.
enum class KernelSet { kAny, kSm90, kFp8 };

// The compiled head dim whose kernels run a call of head dim `d`: the
// smallest compiled one at least d that `set` has. 0 when none is compiled.
inline int kernel_head_dim(int64_t d, KernelSet set = KernelSet::kAny) {
  for (const int k : kKernelHeadDims) {
    const bool in_set = set == KernelSet::kAny || (set == KernelSet::kSm90 ? sm90_head_dim(k) : fp8_head_dim(k));
    if (k >= d && head_dim_compiled(k) && in_set) return k;
  }
  return 0;
}

// V and O's width: head_dim_v, or head_dim when head_dim_v is 0.
constexpr int64_t value_head_dim(int64_t head_dim, int64_t head_dim_v) {
  return head_dim_v != 0 ? head_dim_v : head_dim;
}
// The width a call's kernels run at: the wider of Q K^T's and V's.
constexpr int64_t call_head_dim(int64_t head_dim, int64_t head_dim_v) {
  return value_head_dim(head_dim, head_dim_v) > head_dim ? value_head_dim(head_dim, head_dim_v) : head_dim;
}

// MLA's absorbed form (DeepSeek-V2/V3): Q K^T over 576 columns, V and O
// the first 512 columns of the same cache rows (v == k). The one shape
// past 256 flash takes: the Hopper MLA kernel (kernels/sm90/mla_kernel.cuh)
// or the split-D decode kernel (kernels/decode/mla_kernel.cuh).
inline constexpr int64_t kMlaHeadDim = 576;
inline constexpr int64_t kMlaHeadDimV = 512;
constexpr bool mla_shape(int64_t head_dim, int64_t head_dim_v) {
  return head_dim == kMlaHeadDim && head_dim_v == kMlaHeadDimV;
}

// Head dim 512 with its own V (head_dim_v 0 or 512): the split-D decode
// kernel with a V tile (kernels/decode/mla_kernel.cuh, kSeparateV).
inline constexpr int64_t kWideHeadDim = 512;
constexpr bool wide_shape(int64_t head_dim, int64_t head_dim_v) {
  return head_dim == kWideHeadDim && (head_dim_v == 0 || head_dim_v == kWideHeadDim);
}

// Columns of a split-KV partial row in the workspace: as wide as every
// kernel that may run the call writes its rows (each writes rows of its
// compiled head dim): `wider`, the set of the other kernel that may run
// (KernelSet::kSm90 when the Hopper kernel may, kFp8 for an fp8 cache), or
// kAny for the sm80 and decode kernels alone.
inline int workspace_head_dim(int64_t d, KernelSet wider) {
  const int a = kernel_head_dim(d), b = kernel_head_dim(d, wider);
  return a > b ? a : b;
}

}  // namespace flash::detail
