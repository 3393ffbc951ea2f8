// What the bulk tensor copy engine (TMA) can describe, as a pure host
// check: the plan (src/plan.cpp) decides with it whether the Hopper kernel
// can take a call, before anything is launched, and make_tensor_map()
// encodes exactly what it accepts.
#pragma once

#include <cstdint>
#include <climits>

#include "../params.h"

#if defined(__CUDACC__)
#define FLASH_TMA_LIMITS_FN __host__ __device__
#else
#define FLASH_TMA_LIMITS_FN
#endif

namespace flash::sm90 {

// A strided 4-d view (head_dim, rows, heads, batch) of 16-bit elements
// (one-byte ones with elem_bytes 1: the FP8 prefill); strides in elements.
struct TmaTensor {
  const void* base;
  int64_t head_dim, rows, heads, batch;
  int64_t seq_stride, head_stride, batch_stride;
  int64_t elem_bytes = 2;
};

// Tensor-map limits (cuTensorMapEncodeTiled): strides are multiples of 16
// bytes below 2^40, sizes at most 2^32, and box coordinates are signed
// 32-bit, so every row a box may start at stays below 2^31.
inline constexpr int64_t kTmaMaxStrideBytes = int64_t{1} << 40;
inline constexpr int64_t kTmaMaxRows = (int64_t{1} << 31) - 512;

// The byte stride TMA is given for one dimension: a size-1 dimension's
// stride is never used, so any legal value does (16 bytes).
inline int64_t tma_stride_bytes(int64_t size, int64_t stride, int64_t elem_bytes = 2) noexcept {
  return size == 1 ? 16 : stride * elem_bytes;
}

// Null when TMA can describe `t`, else why not (a static string).
inline const char* tma_problem(const TmaTensor& t) noexcept {
  if (reinterpret_cast<uintptr_t>(t.base) % 16 != 0) return "its base address is not 16-byte aligned";
  if (t.head_dim <= 0 || t.rows <= 0 || t.heads <= 0 || t.batch <= 0) return "it has an empty dimension";
  if (t.rows > kTmaMaxRows) return "it has more than 2^31 - 512 rows (TMA coordinates are 32-bit)";
  if (t.heads > (int64_t{1} << 32) || t.batch > (int64_t{1} << 32)) return "a dimension exceeds 2^32";
  const int64_t sizes[3] = {t.rows, t.heads, t.batch};
  const int64_t strides[3] = {t.seq_stride, t.head_stride, t.batch_stride};
  for (int d = 0; d < 3; ++d) {
    if (sizes[d] == 1) continue;
    if (strides[d] == 0) return "a dimension is broadcast (stride 0)";
    if (strides[d] < 0 || strides[d] >= kTmaMaxStrideBytes / t.elem_bytes) return "a stride is 2^40 bytes or more";
    if (strides[d] * t.elem_bytes % 16 != 0) return "a stride is not a multiple of 16 bytes";
  }
  return nullptr;
}

// Q, K, V and O of a call as the Hopper kernel's tensor maps see them:
// packed (varlen) tensors are one "batch" of total rows, and the kernel adds
// each sequence's first row to the row coordinate. A paged cache is a
// "batch" of num_pages pages of page_size rows, the page coming from the
// block table.
struct TmaTensors {
  TmaTensor q, k, v, o;
};
inline TmaTensors tma_tensors(const detail::FwdParams& p) noexcept {
  const bool varlen_q = p.cu_seqlens_q != nullptr;
  const bool varlen_k = p.cu_seqlens_k != nullptr;
  const bool paged = p.block_table != nullptr;
  const int64_t q_rows = varlen_q ? p.total_q : p.seqlen_q;
  const int64_t q_batch = varlen_q ? 1 : p.batch;
  const int64_t k_rows = paged ? p.page_size : varlen_k ? p.total_k : p.seqlen_k;
  const int64_t k_batch = paged ? p.num_pages : varlen_k ? 1 : p.batch;
  return TmaTensors{
      {p.q, p.head_dim, q_rows, p.heads_q, q_batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride},
      {p.k, p.head_dim, k_rows, p.heads_kv, k_batch, p.k_seq_stride, p.k_head_stride, p.k_batch_stride},
      {p.v, p.head_dim_v, k_rows, p.heads_kv, k_batch, p.v_seq_stride, p.v_head_stride, p.v_batch_stride},
      {p.o, p.head_dim_v, q_rows, p.heads_q, q_batch, p.o_seq_stride, p.o_head_stride, p.o_batch_stride}};
}

// Paged caches: the kernel loads a kBlockN-key block as boxes of
// paged_box_rows(page_size, kBlockN) rows, each inside one page. A box
// must start on an 8-row boundary of the 128-byte swizzle (1024 bytes) and
// its page coordinate is a signed 32-bit TMA coordinate. Pages of any other
// size, and pages making boxes of 8 or 16 rows at head dim 256, are
// gathered row by row with cp.async instead (gathers_pages).
inline constexpr int64_t kPagedRowMultiple = 8;
inline int paged_box_rows(int64_t page_size, int block_n) noexcept {
  int64_t a = page_size, b = block_n;
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return static_cast<int>(a);
}
// Whether the kernel of `head_dim` and `block_n`-key blocks gathers a
// paged cache's rows with cp.async instead of loading TMA boxes: for pages
// TMA cannot box, and at head dim 256 for boxes of fewer than 32 rows
// (16-key pages gather at 0.85 of the dense call, box at 0.78;
// docs/perf/sm90-kv-cache.md).
inline bool gathers_pages(int64_t page_size, int head_dim, int block_n) noexcept {
  if (page_size % kPagedRowMultiple != 0) return true;
  return head_dim == 256 && paged_box_rows(page_size, block_n) < 32;
}
// The tile of the calls on a paged bf16/fp16 cache that the kernel gathers
// (gathers_pages) where they have a kernel of their own (block_n 0: they
// share candidate 0's kernel with the other cache calls). That kernel
// (FwdTraits::kGatherKernel) compiles only the gathering producer, and the
// head dim's other cache kernel only the TMA one, each with the register
// split it needs (fwd_kernel; docs/perf/sm90-kv-cache.md):
// - head dim 64: 192 x 96, three stages, the producer 56 registers beside
//   three consumer warpgroups of 152;
// - head dim 256: candidate 0's tile, the producer 56 registers beside two
//   consumer warpgroups of 224, while the TMA kernel takes 40 and 232.
struct GatherTile {
  int block_m, block_n, stages;
};
FLASH_TMA_LIMITS_FN constexpr GatherTile gather_tile(int64_t head_dim) noexcept {
  return head_dim == 64 ? GatherTile{192, 96, 3} : head_dim == 256 ? GatherTile{128, 64, 2} : GatherTile{0, 0, 0};
}
// Null when the Hopper kernel can load a paged cache of these pages, else
// why not. Conservative: pages of a multiple of 8 keys are held to the TMA
// coordinate limit even at head dim 256, where some are gathered.
inline const char* paged_problem(int64_t page_size, int64_t num_pages) noexcept {
  if (page_size % kPagedRowMultiple == 0 && num_pages > INT32_MAX) {
    return "it has 2^31 pages or more (TMA coordinates are 32-bit)";
  }
  return nullptr;
}

}  // namespace flash::sm90

#undef FLASH_TMA_LIMITS_FN
