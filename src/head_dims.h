// The head dims compiled into this build (FLASH_HEAD_DIMS), and the one
// switch from a runtime head dim to a template argument.
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
#if FLASH_HAS_HEAD_DIM_256
    case 256: return f(std::integral_constant<int, 256>{});
#endif
    default: return otherwise;
  }
}

inline bool head_dim_compiled(int64_t head_dim) {
  return with_head_dim(head_dim, false, [](auto) { return true; });
}

}  // namespace flash::detail
