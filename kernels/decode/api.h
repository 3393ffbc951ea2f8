// Host-side entry points of the split-KV decode kernel: plain C++
// declarations, defined by one .cu file per (dtype, head_dim) in
// instantiations/.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::decode {

// Launches the decode kernel for one dtype and head dim on `stream` and,
// when params.num_splits > 1, the combine kernel after it. The mask and
// softcap come from `params`. `variant` 1: the two-stage kernel
// (has_two_stage_variant; cudaErrorInvalidValue where there is none, and
// for a call that appends itself, AppendFusion::writes). Returns the
// first launch error.
template <DType kDType, int kHeadDim>
cudaError_t run_decode(const detail::FwdParams& params, int variant, cudaStream_t stream);
// The same with K and V e4m3 bytes (params.k_descale / v_descale); kHeadDim
// a multiple of 64.
template <DType kDType, int kHeadDim>
cudaError_t run_decode_fp8(const detail::FwdParams& params, int variant, cudaStream_t stream);

// Shared memory a block may have on sm_86 and sm_89 (RTX 30/40, A10, L4,
// L40), bytes.
inline constexpr int kSmallDeviceSmemBytes = 99 * 1024;

// MLA (head_dim 576, head_dim_v 512, V being K's rows) on the split-D
// mma.sync kernel (mla_kernel.cuh; sm_80 and newer), for GPUs without the
// Hopper MLA kernel. kMlaSmemBytes: its shared memory per CTA (the
// instantiations check); CTAs take kMlaBlockM rows, and splits count the
// variant's blocks (split_d_block_n: kMlaBlockN keys but for head dim
// 512's variant 1).
inline constexpr int kMlaSmemBytes = 137216;
inline constexpr int kMlaBlockM = 16;
inline constexpr int kMlaBlockN = 32;
// `variant` 1: the kernel for devices with 99 KiB a block (split_d_smem);
// cudaErrorInvalidValue for any other but 0.
template <DType kDType>
cudaError_t run_mla(const detail::FwdParams& params, int variant, cudaStream_t stream);

// Head dim 512 with V rows of its own (head_dim_v 512) on the same
// split-D kernel, a V tile beside each K tile (two stages).
inline constexpr int kWideHeadDim = 512;
inline constexpr int kWideSmemBytes = 155648;
template <DType kDType>
cudaError_t run_wide(const detail::FwdParams& params, int variant, cudaStream_t stream);

// The split-D kernel's variants (`wide`: head dim 512 with its own V, else
// MLA): 0, the default; 1, for devices with 99 KiB of shared memory a block
// (sm_86, sm_89), MLA on two stages of 32-key blocks (98 KiB against 134)
// and head dim 512 on two stages of 16-key blocks (84 KiB against 152).
// Keys a block (the split granularity), ring stages and shared memory.
constexpr int split_d_block_n(bool wide, int variant) { return wide && variant == 1 ? 16 : kMlaBlockN; }
constexpr int split_d_stages(bool wide, int variant) { return wide || variant == 1 ? 2 : 3; }
constexpr int split_d_smem(bool wide, int variant) {
  const int width = wide ? kWideHeadDim : 576;  // MLA: K rows of 576 columns
  const int block_n = split_d_block_n(wide, variant);
  const int q = kMlaBlockM * width * 2;
  const int stage = block_n * width * 2 * (wide ? 2 : 1);  // K, and V when separate
  const int exchange = 4 * (block_n / 8) * 32 * 16;        // four warps' partial S tiles
  return q + split_d_stages(wide, variant) * stage + exchange;
}
static_assert(split_d_smem(false, 0) == kMlaSmemBytes && split_d_smem(true, 0) == kWideSmemBytes &&
              split_d_smem(false, 1) <= kSmallDeviceSmemBytes && split_d_smem(true, 1) <= kSmallDeviceSmemBytes);

// Packed query rows per CTA, and keys per K/V block (the split
// granularity): 64, or 128 in the fp8 kernels up to head_dim 128 (the
// bytes of a bf16 block, twice the keys per warp).
inline constexpr int kBlockM = 16;
inline constexpr int kBlockN = 64;
constexpr int block_n(int64_t head_dim, bool fp8) { return fp8 && head_dim <= 128 ? 128 : kBlockN; }
// Pipeline depth for `head_dim` (`fp8`: an e4m3 K/V cache).
constexpr int stages(int64_t head_dim, bool fp8 = false) { return head_dim <= 128 || fp8 ? 3 : 2; }
// Dynamic shared memory of the decode kernel for `head_dim` with
// `num_stages` stages (0: stages()), bytes (the kernel's traits assert they
// agree).
constexpr int smem_bytes(int64_t head_dim, bool fp8 = false, int num_stages = 0) {
  const int64_t q = kBlockM * head_dim * 2;
  const int64_t depth = num_stages > 0 ? num_stages : stages(head_dim, fp8);
  const int64_t ring = depth * 2 * block_n(head_dim, fp8) * head_dim * (fp8 ? 1 : 2);
  const int64_t merge = 4 * kBlockM * head_dim * 4 + 2 * 4 * kBlockM * 4;
  const int64_t q_factors = fp8 ? kBlockM * 4 : 0;  // Q's per-row powers of two
  // A paged call's row addresses (PagedRows: 16 bytes a key of a block,
  // where a warp's lanes copy whole rows).
  const int64_t chunks_per_row = head_dim * (fp8 ? 1 : 2) / 16;
  const int64_t paged_rows = chunks_per_row > 0 && 32 % chunks_per_row == 0 ? block_n(head_dim, fp8) * 16 : 0;
  return static_cast<int>(q + (ring > merge ? ring : merge) + paged_rows + q_factors);
}

// Whether the kernel at `head_dim` (`fp8`: for an e4m3 cache) has a
// two-stage variant (candidate 1; the default is candidate 0): where three
// stages need more than kSmallDeviceSmemBytes and two do not (head dim 128:
// 101 KiB against 69, fp8 102 against 70; fp8 at 256: 105 against 73.5).
constexpr bool has_two_stage_variant(int64_t head_dim, bool fp8) {
  return stages(head_dim, fp8) > 2 && smem_bytes(head_dim, fp8) > kSmallDeviceSmemBytes &&
         smem_bytes(head_dim, fp8, 2) <= kSmallDeviceSmemBytes;
}
static_assert(has_two_stage_variant(128, true) && has_two_stage_variant(256, true) &&
              !has_two_stage_variant(64, true) && !has_two_stage_variant(192, true) &&
              has_two_stage_variant(128, false) && !has_two_stage_variant(96, false) &&
              !has_two_stage_variant(192, false) && !has_two_stage_variant(256, false));

}  // namespace flash::decode
