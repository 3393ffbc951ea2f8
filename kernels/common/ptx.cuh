// Thin wrappers over the sm_80 PTX this project uses: cp.async, ldmatrix,
// mma.sync m16n8k16 and ex2. Each wrapper is one instruction; the kernels
// decide the order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace flash::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Zero, as a value the compiler cannot see through: an address built on it
// is built again where it is used, not held in registers from one use to
// the next (for values cheaper to rebuild than to keep).
__device__ __forceinline__ uint32_t opaque_zero() {
  uint32_t z;
  asm volatile("mov.u32 %0, 0;\n" : "=r"(z));
  return z;
}

// 16-byte global->shared copy. When `valid` is false nothing is read and the
// 16 destination bytes are zero-filled (src-size 0), so ragged tails of K and
// V hold zeros rather than stale data: a stale NaN times a zero probability
// would still be NaN.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// As cp_async_16 above, at dst + kDst and src + kSrc: compile-time offsets
// ride in the instruction, so a loop's copies share one address register
// each side instead of holding one per copy.
template <int kDst, int kSrc>
__device__ __forceinline__ void cp_async_16_at(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%4], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes),
               "n"(kDst), "n"(kSrc)
               : "memory");
}

// 16-byte global->shared copy of bytes that are all there to read.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D += A * B for one m16n8k16 tile, float32 accumulators.
template <typename Element>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<Element, __half>, "Element must be __half or __nv_bfloat16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats rounded to one packed pair of Element (lo in the low half).
template <typename Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Four floats rounded to e4m3 (round to nearest even, saturating at +-448),
// byte i from x_i: x0 in the lowest byte. The cvt puts its first source in
// the upper byte of each pair. sm_89 and newer.
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
#else
  (void)x0, (void)x1, (void)x2, (void)x3;
  __trap();
  return 0;
#endif
}

// One float rounded to Element.
template <typename Element>
__device__ __forceinline__ Element from_float(float x) {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}

// 2^x in one MUFU op; ex2.approx(-inf) is +0, which the masked softmax relies on.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 1/x to about 1 ulp (MUFU.RCP).
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// log2(x) in one MUFU op (lg2.approx: about 2^-22 absolute on [0.5, 2],
// about 2^-22 relative beyond; the PTX ISA states the bound).
__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// A row's 1/l and log-sum-exp from its sum l (about 1 or more: the term at
// the row's running max is exp2 of about 0, so l is never near the
// denormal range that ftz flushes) and its max times the softmax scale.
// Approximate MUFU forms:
// the precise division and logf are 30-40 instructions a row with their
// range branches, run once a tile at its end, where each instruction is
// fetched cold; these are four.
__device__ __forceinline__ void finalize_row(float l, float m_scaled, float& inv_l, float& lse) {
  inv_l = rcp_approx(l);
  lse = fmaf(log2_approx(l), 0.6931471805599453f, m_scaled);
}

// tanh(x) as 1 - 2 / (exp(2x) + 1): two MUFU ops and an absolute error of a
// few 1e-7 (tanh.approx.f32 is off by up to ~5e-4, which a softcap of 30
// would turn into a score error of 0.015).
__device__ __forceinline__ float tanh_fast(float x) {
  const float e = exp2_approx(x * 2.8853900817779268f);  // 2 * log2(e)
  return fmaf(-2.f, rcp_approx(e + 1.f), 1.f);
}

}  // namespace flash::ptx
