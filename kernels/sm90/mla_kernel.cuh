// MLA decode on Hopper: Q K^T over 576 columns, V and O over 512, V being
// the first 512 columns of the same cache rows as K (DeepSeek-V2/V3's
// absorbed form: one K/V head shared by every query head). wgmma, sm_90a.
//
// One CTA owns 64 packed query rows (GQA packing as in the decode kernel:
// row r is token r / g, head r % g) of one (batch, K/V head) and one split
// of the keys, and walks the keys in 64-key blocks with two consumer
// warpgroups and no producer:
//
//   - S: warpgroup w computes the scores of the block's keys [32 w, 32 w +
//     32) for all 64 rows (m64n32, Q and K from shared memory), so no
//     product is computed twice.
//   - The softmax: each warpgroup's block row maxima meet in shared
//     memory; both take max(m, max_0, max_1), so both hold the same running
//     max and rescale by the same factor. Each keeps the row sums of its
//     own keys; the two meet once, at the end.
//   - P: each warpgroup writes its 64 x 32 probabilities into one 64 x 64
//     tile in shared memory (the 128-byte swizzle wgmma reads), and both
//     then accumulate O's columns [256 w, 256 w + 256) += P V over all 64
//     keys (m64n256, P and V from shared memory; V is the K tile's first
//     eight column blocks, read N-major).
//
// Shared memory: Q 72 KiB, two K stages of 72 KiB, P 8 KiB and the row
// maxima: 226 KiB, one CTA an SM. Every thread copies its share of the
// next K block with cp.async while the current one is used (dense, varlen
// or paged rows, any page size; each thread looks up its row's page a
// block ahead). With several splits
// each CTA writes its normalised float32 partial O and LSE to the
// workspace (rows 576 wide) for combine_kernel<576>.
#pragma once

#include <cstdint>

#include "../common/mask.cuh"
#include "../common/launch.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../common/softmax.cuh"
#include "../decode/combine_kernel.cuh"
#include "../params.h"
#include "ptx_sm90.cuh"
#include "wgmma_ops.cuh"

namespace flash::sm90 {

template <typename Element_>
struct MlaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = 576;   // Q K^T's width (K rows)
  static constexpr int kHeadDimV = 512;  // V's and O's: K's first 512 columns
  static constexpr int kWarpgroups = 2;
  static constexpr int kThreads = kWarpgroups * 128;
  static constexpr int kBlockM = 64;                     // packed query rows per CTA
  static constexpr int kBlockN = 64;                     // keys per block
  static constexpr int kKeysPerWg = kBlockN / kWarpgroups;  // S columns per warpgroup
  static constexpr int kOCols = kHeadDimV / kWarpgroups;    // O columns per warpgroup
  static constexpr int kStages = 2;
  static constexpr int kColBlocks = kHeadDim / 64;  // 128-byte column blocks of a row
  static constexpr int kChunksPerRow = kHeadDim / 8;
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKBytes = kBlockN * kHeadDim * 2;
  static constexpr int kPBytes = kBlockM * kBlockN * 2;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kPOffset = kKOffset + kStages * kKBytes;
  static constexpr int kRowMaxOffset = kPOffset + kPBytes;  // float [2][kBlockM]
  // +1024: the dynamic shared memory base is rounded up to the swizzle atom.
  static constexpr int kSmemBytes = kRowMaxOffset + kWarpgroups * kBlockM * 4 + 1024;
  // Batches of at most this many sequences run longest first (their key
  // counts and the pick fit the P tile before its first use).
  static constexpr int kRankedBatches = 256;

  static_assert(kBlockN == 64, "P is one 128-byte column block");
  static_assert(kOCols % 64 == 0 && kOCols <= 256, "a warpgroup's O columns are whole column blocks, one wgmma wide");
  static_assert(kSmemBytes <= 227 * 1024, "must fit an H100's shared memory");
  static_assert((kRankedBatches + 1) * 4 <= kPBytes, "the ranking's key counts fit the P tile");
};

template <typename Traits, bool kMasked, bool kScoreMod>
__global__ void __launch_bounds__(Traits::kThreads, 1) mla_kernel(const __grid_constant__ detail::FwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kCPR = Traits::kChunksPerRow;
  constexpr int kThreads = Traits::kThreads;
  constexpr int kSTiles = Traits::kKeysPerWg / 8;  // n8 tiles of a warpgroup's S
  constexpr int kOTiles = Traits::kOCols / 8;

  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = ptx::smem_addr(smem_raw);
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  unsigned char* const smem = smem_raw + (base - raw_addr);
  const uint32_t smem_q = base + Traits::kQOffset;
  const uint32_t smem_k = base + Traits::kKOffset;
  const uint32_t smem_p = base + Traits::kPOffset;
  float* const row_max = reinterpret_cast<float*>(smem + Traits::kRowMaxOffset);

  const int tid = threadIdx.x;
  const int wg = tid / 128;
  const int warp_in_wg = (tid / 32) % 4;
  const int lane = tid % 32;

  const int split = blockIdx.x % p.num_splits;
  const int m_block = blockIdx.x / p.num_splits;
  const int head_kv = blockIdx.y;
  const int g = p.q_per_kv;
  // Longest sequences first: blockIdx.z counts sequences by descending key
  // count (ties by index), so that where the CTAs take more than one wave
  // the longest start first and the short ones fill in behind them. The
  // counts are the call's own (seqused_k, cu_seqlens_k), read by each CTA
  // into the P tile, which nothing touches before the main loop's first
  // barrier; a batch of host-known lengths, or of more than
  // kRankedBatches, keeps its order, and equal lengths keep theirs.
  int batch = blockIdx.z;
  if (p.batch > 1 && p.batch <= Traits::kRankedBatches && (p.seqused_k != nullptr || p.cu_seqlens_k != nullptr)) {
    int* keys = reinterpret_cast<int*>(smem + Traits::kPOffset);
    for (int b = tid; b < p.batch; b += kThreads) {
      int len = p.cu_seqlens_k != nullptr ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.max_seqlen_k_alloc;
      if (p.seqused_k != nullptr) len = min(len, p.seqused_k[b]);
      keys[b] = max(len, 0);
    }
    __syncthreads();
    for (int b = tid; b < p.batch; b += kThreads) {
      const int mine = keys[b];
      int rank = 0;
#pragma unroll 8
      for (int u = 0; u < p.batch; ++u) {
        const int other = keys[u];
        rank += (other > mine || (other == mine && u < b)) ? 1 : 0;
      }
      if (rank == static_cast<int>(blockIdx.z)) keys[Traits::kRankedBatches] = b;
    }
    __syncthreads();
    batch = keys[Traits::kRankedBatches];
  }

  const SeqInfo seq(p, batch);
  const int rows = min(seq.len_q, p.seqlen_q) * g;
  const int row_begin = m_block * kBlockM;
  if (row_begin >= rows) return;
  const int row_end = min(row_begin + kBlockM, rows);

  const WindowMask<kMasked> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
  const ScoreMod<kScoreMod> mods(p);
  // This thread's two accumulator rows (tile rows, the same in both warpgroups).
  int tile_row[2];
  float alibi_neg[2] = {0.f, 0.f};
  int alibi_diag[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    tile_row[hi] = warp_in_wg * 16 + lane / 4 + hi * 8;
    const int r = row_begin + tile_row[hi];
    alibi_diag[hi] = r / g + seq.len_k - seq.len_q;
    if (kScoreMod && p.alibi_slopes != nullptr) alibi_neg[hi] = mods.neg_slope(head_kv * g + r % g);
  }
  int n_begin, n_end, u_begin, u_end;
  mask.template visible_blocks<kBlockN>(row_begin / g, (row_end - 1) / g, &n_begin, &n_end);
  mask.template unmasked_blocks<kBlockN>(row_begin / g, (row_end - 1) / g, &u_begin, &u_end);
  const int per_split = (n_end - n_begin + p.num_splits - 1) / p.num_splits;
  const int s_begin = min(n_end, n_begin + split * per_split);
  const int s_end = min(n_end, s_begin + per_split);

  const Element* k = static_cast<const Element*>(p.k) + seq.k_offset + head_kv * p.k_head_stride;
  const int* table = p.block_table != nullptr ? p.block_table + batch * p.block_table_batch_stride : nullptr;
  const int chunks = p.head_dim / 8;  // 16-byte chunks of a K row the call has

  // Copies: thread t owns row t / 4 of every tile it copies and that row's
  // 16-byte chunks t % 4, t % 4 + 4, ...: one row address a tile, and each
  // chunk's source and destination are immediate offsets from it (the
  // swizzle of chunk c depends on c % 8, so on two values a thread).
  const int ld_row = tid / 4;
  const int ld_col = tid % 4;
  const uint32_t ld_swizzle[2] = {static_cast<uint32_t>((ld_col ^ (ld_row % 8)) * 16),
                                  static_cast<uint32_t>(((ld_col + 4) ^ (ld_row % 8)) * 16)};
  static_assert(kBlockM * 4 == kThreads && kBlockN * 4 == kThreads, "four threads a tile row");
  static_assert(kCPR % 8 == 0, "whole column blocks");
  // This thread's key row of block n: its page (page -1 past the keys;
  // page 0 without a block table) and its row in that page (the key, without
  // one). The table read is made a block ahead of the copy, and the offset is
  // formed only at the copy, so that no arithmetic waits for the read.
  struct RowRef {
    int page, row;
  };
  auto lookup = [&](int n_block) -> RowRef {
    const int key = n_block * kBlockN + ld_row;
    if (key >= seq.len_k) return RowRef{-1, 0};
    if (table == nullptr) return RowRef{0, key};
    const int index = page_of_key(key, p.page_size, p.page_shift);
    return RowRef{__ldg(table + index), key - index * p.page_size};
  };
  // Copies one tile row's chunks (zero past the call's head_dim, or all
  // zero for row_valid false) to `dst_row`, the row's byte address.
  auto copy_row = [&](uint32_t dst_row, const Element* src_row, bool row_valid, int tile_rows) {
#pragma unroll
    for (int i = 0; i < kCPR / 4; ++i) {
      const bool valid = row_valid && ld_col + 4 * i < chunks;
      ptx::cp_async_16(dst_row + (i / 2) * tile_rows * 128 + ld_swizzle[i % 2], src_row + 32 * i, valid);
    }
  };
  auto load_k = [&](RowRef r, int stage) {
    const int64_t offset = r.page < 0 ? 0
                                      : static_cast<int64_t>(r.page) * p.k_batch_stride +
                                            static_cast<int64_t>(r.row) * p.k_seq_stride;
    copy_row(smem_k + stage * Traits::kKBytes + ld_row * 128, k + offset + ld_col * 8, r.page >= 0, kBlockN);
  };

  // Q: 64 packed rows, each its own (token, head) address; columns past
  // head_dim and rows past the CTA's zero-filled.
  {
    const int r = row_begin + ld_row;
    const bool valid = r < row_end;
    const Element* src = static_cast<const Element*>(p.q) + ld_col * 8;
    if (valid) {
      src += seq.q_offset + static_cast<int64_t>(r / g) * p.q_seq_stride +
             static_cast<int64_t>(head_kv * g + r % g) * p.q_head_stride;
    }
    copy_row(smem_q + ld_row * 128, src, valid, kBlockM);
  }
  // The next block's row is looked up a block ahead of its copy.
  RowRef next_row = s_begin < s_end ? lookup(s_begin) : RowRef{-1, 0};
  if (s_begin < s_end) load_k(next_row, 0);
  ptx::cp_async_commit();
  if (s_begin + 1 < s_end) next_row = lookup(s_begin + 1);

  float o[Traits::kOCols / 2];
#pragma unroll
  for (int i = 0; i < Traits::kOCols / 2; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};  // this thread's partial sums over its warpgroup's keys

  const uint64_t desc_q = smem_descriptor(smem_q, 0);
  const uint64_t desc_p = smem_descriptor(smem_p, 0);
  const float scale_log2 = p.softmax_scale_log2;

  int iter = 0;
  for (int n_block = s_begin; n_block < s_end; ++n_block, ++iter) {
    const int stage = iter % Traits::kStages;
    // Block n has landed for every thread, and every warpgroup is done with
    // block n - 1 (its P V waited): its stage, P and the maxima are free.
    ptx::cp_async_wait<0>();
    fence_proxy_async_smem();
    __syncthreads();

    // S = Q K^T over this warpgroup's 32 keys. The next block's copies are
    // issued while these GEMMs run: the copies' issue (18 a thread, held up
    // by the load/store queue) costs as long as the GEMMs.
    const uint32_t sk = smem_k + stage * Traits::kKBytes;
    const uint64_t desc_k = smem_descriptor(sk + wg * Traits::kKeysPerWg * 128, 0);
    float s[Traits::kKeysPerWg / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
      wgmma_ss<Traits::kKeysPerWg, 0, Element>(s, smem_descriptor_at(desc_q, (kk / 4) * kBlockM * 128 + (kk % 4) * 32),
                                               smem_descriptor_at(desc_k, (kk / 4) * kBlockN * 128 + (kk % 4) * 32),
                                               kk > 0 ? 1 : 0);
    }
    wgmma_commit();
    if (n_block + 1 < s_end) load_k(next_row, (iter + 1) % Traits::kStages);
    ptx::cp_async_commit();
    if (n_block + 2 < s_end) next_row = lookup(n_block + 2);
    wgmma_wait<0>();
    fence_registers(s);

    float(&s4)[1][kSTiles][4] = *reinterpret_cast<float(*)[1][kSTiles][4]>(&s);
    const int col0 = n_block * kBlockN + wg * Traits::kKeysPerWg;
    mods.apply(
        s4, col0, lane, [&](int, int hi) { return alibi_diag[hi]; }, [&](int, int hi) { return alibi_neg[hi]; });
    if (block_needs_mask(n_block, u_begin, u_end)) {
      const RowRange<1> ranges = mask.template ranges<1>([&](int, int hi) { return (row_begin + tile_row[hi]) / g; });
      apply_mask<kMasked>(s4, ranges, col0, lane);
    }
    // The block's row maxima of both warpgroups.
    float mine[2];
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      float x = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) x = fmaxf(x, fmaxf(s4[0][nt][2 * hi], s4[0][nt][2 * hi + 1]));
      mine[hi] = quad_max(x);
      if (lane % 4 == 0) row_max[wg * kBlockM + tile_row[hi]] = mine[hi];
    }
    named_barrier_sync(1, kThreads);
    // The lazy max of OnlineSoftmax: a row's subtracted max moves only when
    // some row of the warp has outgrown it by more than 2^kLazyLog2, so most
    // blocks leave O alone. Warp w of either warpgroup holds the same rows
    // and sees the same maxima, so both decide alike.
    float m_new[2];
    bool grow = false;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const float other = row_max[(1 - wg) * kBlockM + tile_row[hi]];
      m_new[hi] = fmaxf(m_run[hi], fmaxf(mine[hi], other));
      grow = grow || (m_run[hi] == -INFINITY ? m_new[hi] != -INFINITY
                                             : (m_new[hi] - m_run[hi]) * scale_log2 > OnlineSoftmax<1>::kLazyLog2);
    }
    const bool rescale = __any_sync(0xffffffffu, grow);
    float correction[2];
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const float m_use = rescale ? m_new[hi] : m_run[hi];
      // As OnlineSoftmax: the max scaled rounding up, so no exponent
      // exceeds the lazy bound; a row with no visible key yet subtracts 0.
      const float m_scaled = m_use == -INFINITY ? 0.f : __fmul_ru(m_use, scale_log2);
      correction[hi] = ptx::exp2_approx(__fmul_ru(m_run[hi], scale_log2) - m_scaled);
      m_run[hi] = m_use;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        const float p0 = ptx::exp2_approx(fmaf(s4[0][nt][2 * hi], scale_log2, -m_scaled));
        const float p1 = ptx::exp2_approx(fmaf(s4[0][nt][2 * hi + 1], scale_log2, -m_scaled));
        s4[0][nt][2 * hi] = p0;
        s4[0][nt][2 * hi + 1] = p1;
        sum += p0 + p1;
      }
      l_run[hi] = fmaf(l_run[hi], correction[hi], sum);
    }
    // P into its tile: row r's keys are one 128-byte swizzled row.
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int r = tile_row[hi];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        const int col = wg * Traits::kKeysPerWg + nt * 8 + (lane % 4) * 2;
        const int at = Traits::kPOffset + r * 128 + (((col / 8) ^ (r % 8)) * 16) + (col % 8) * 2;
        *reinterpret_cast<uint32_t*>(smem + at) = ptx::pack2<Element>(s4[0][nt][2 * hi], s4[0][nt][2 * hi + 1]);
      }
    }
    if (rescale) {
#pragma unroll
      for (int i = 0; i < Traits::kOCols / 2; ++i) o[i] *= correction[(i % 4) / 2];
    }
    fence_proxy_async_smem();
    named_barrier_sync(2, kThreads);

    // O[:, 256 wg ...] += P V: V's rows are keys, its columns contiguous.
    const uint64_t desc_v = smem_descriptor(sk + wg * (Traits::kOCols / 64) * kBlockN * 128, kBlockN * 128);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      wgmma_ss<Traits::kOCols, 1, Element>(o, smem_descriptor_at(desc_p, kk * 32),
                                           smem_descriptor_at(desc_v, kk * 16 * 128), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o);
  }
  ptx::cp_async_wait<0>();

  // Whole-row sums: this warpgroup's keys, then both warpgroups' (added in
  // the same order by both, so both finalize alike).
  float* const row_sum = row_max;  // free: every thread read the maxima before the last barrier
  float sums[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    sums[hi] = quad_sum(l_run[hi]);
    if (lane % 4 == 0) row_sum[wg * kBlockM + tile_row[hi]] = sums[hi];
  }
  named_barrier_sync(1, kThreads);
  float inv_l[2], lse[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const float total = row_sum[tile_row[hi]] + row_sum[kBlockM + tile_row[hi]];
    const bool empty = total == 0.f || m_run[hi] == -INFINITY;
    ptx::finalize_row(total, m_run[hi] * p.softmax_scale, inv_l[hi], lse[hi]);
    if (empty) {
      inv_l[hi] = 0.f;
      lse[hi] = -INFINITY;
    }
    const int r = row_begin + tile_row[hi];
    if (p.sinks != nullptr && p.num_splits == 1 && r < row_end) add_sink(p.sinks[head_kv * g + r % g], inv_l[hi], lse[hi]);
  }

  const int heads_q = p.heads_q;
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int r = row_begin + tile_row[hi];
    if (r >= row_end) continue;
    const int token = r / g;
    const int head = head_kv * g + r % g;
    if (p.num_splits == 1) {
      Element* out = static_cast<Element*>(p.o) + seq.o_offset + static_cast<int64_t>(token) * p.o_seq_stride +
                     static_cast<int64_t>(head) * p.o_head_stride;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        const int col = wg * Traits::kOCols + nt * 8 + (lane % 4) * 2;
        if (col >= p.head_dim_v) continue;
        *reinterpret_cast<uint32_t*>(out + col) =
            ptx::pack2<Element>(o[4 * nt + 2 * hi] * inv_l[hi], o[4 * nt + 2 * hi + 1] * inv_l[hi]);
      }
      if (wg == 0 && lane % 4 == 0 && p.lse != nullptr) {
        const int64_t at = p.cu_seqlens_q != nullptr
                               ? static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + seq.q_start + token
                               : (static_cast<int64_t>(batch) * heads_q + head) * p.seqlen_q + token;
        p.lse[at] = lse[hi];
      }
    } else if (token < p.seqlen_q) {
      const int64_t slot = ((static_cast<int64_t>(split) * p.batch + batch) * heads_q + head) * p.seqlen_q + token;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        const int col = wg * Traits::kOCols + nt * 8 + (lane % 4) * 2;
        *reinterpret_cast<float2*>(p.o_partial + slot * Traits::kHeadDim + col) =
            make_float2(o[4 * nt + 2 * hi] * inv_l[hi], o[4 * nt + 2 * hi + 1] * inv_l[hi]);
      }
      if (wg == 0 && lane % 4 == 0) p.lse_partial[slot] = lse[hi];
    }
  }
}

// Launches the kernel and, with several splits, the combine (workspace
// rows Traits::kHeadDim wide; splits count 64-key blocks). The caller has
// checked the grid: seqlen_q x q_per_kv packed rows below 2^30, batch and
// heads_kv within gridDim.z / y (the plan). V must be K's rows (the kernel
// reads V's columns from the K tile): anything else is refused.
template <typename Traits>
cudaError_t launch_mla(const detail::FwdParams& params, cudaStream_t stream) {
  if (params.v != params.k || params.v_batch_stride != params.k_batch_stride ||
      params.v_seq_stride != params.k_seq_stride || params.v_head_stride != params.k_head_stride ||
      params.head_dim_v > Traits::kHeadDimV || params.head_dim > Traits::kHeadDim ||
      params.head_dim_v > params.head_dim || params.head_dim % 8 != 0 || params.head_dim_v % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  const bool window = params.window_left >= 0 || params.window_right >= 0;
  const bool mods = params.softcap > 0.f || params.alibi_slopes != nullptr;
  auto launch = [&](auto* kernel) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (err != cudaSuccess) return err;
    const int64_t rows = static_cast<int64_t>(params.seqlen_q) * params.q_per_kv;
    dim3 grid;
    if (!split_rows_grid(rows, Traits::kBlockM, params.num_splits, params.heads_kv, params.batch, &grid)) {
      return cudaErrorInvalidConfiguration;
    }
    return launch_kernel(kernel, grid, dim3(Traits::kThreads), Traits::kSmemBytes, stream, params);
  };
  cudaError_t err;
  if (window) {
    err = mods ? launch(&mla_kernel<Traits, true, true>) : launch(&mla_kernel<Traits, true, false>);
  } else {
    err = mods ? launch(&mla_kernel<Traits, false, true>) : launch(&mla_kernel<Traits, false, false>);
  }
  if (err != cudaSuccess || params.num_splits <= 1) return err;
  return decode::launch_combine<Traits::kHeadDim, typename Traits::Element>(params, stream);
}

}  // namespace flash::sm90
