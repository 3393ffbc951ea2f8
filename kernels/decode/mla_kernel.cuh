// Wide-head decode kernel: Q K^T up to 576 columns, V and O up to 512,
// V being the first head_dim_v columns of the K rows (MLA's absorbed form:
// DeepSeek-V2/V3, head_dim 576, head_dim_v 512, one K/V head shared by
// every query head), or V rows of their own as wide as K's
// (MlaTraits::kSeparateV: head dim 512). sm_80 and newer.
//
// The decode kernel (decode_kernel.cuh) gives each warp the whole O width
// of its rows, 16 x 512 float32 accumulators a thread-quad here: more than a
// thread's 255 registers. This kernel splits the head dim between the four
// warps instead ("split-D"):
//
//   - Warp w computes the partial scores of all the block's keys over Q
//     and K columns [kQKSlice w, kQKSlice (w + 1)).
//   - The four partial S tiles meet in shared memory; every warp sums them
//     in the same order, so every warp holds the same S and runs the same
//     online softmax (masks, score modifiers and the lazy max included):
//     no merge of softmax states at the end.
//   - Warp w accumulates O's columns [kVSlice w, kVSlice (w + 1)) over all
//     the block's keys, reading V from the K tile already in shared memory
//     (or, kSeparateV, from the V tile copied beside it).
//
// So no K byte is loaded twice and no product is computed twice. One CTA
// owns 16 packed query rows (GQA packing as in decode_kernel.cuh) of one
// (batch, K/V head) and one split of the keys; K streams through a
// kStages-deep cp.async ring (dense, varlen or paged rows, any page size).
// With several splits each CTA writes its normalised float32 partial O and
// LSE to the workspace (rows kHeadDim wide) for combine_kernel<kHeadDim>.
#pragma once

#include <cstdint>

#include "../common/mask.cuh"
#include "../common/launch.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../common/softmax.cuh"
#include "../params.h"
#include "../sm80/fwd_kernel.cuh"  // chunk_offset, LdsmAddress, load_tile
#include "api.h"                   // the split-D variants' figures
#include "combine_kernel.cuh"

namespace flash::decode {

// kBlockN_ keys a block (16 or 32) and kStages_ blocks in the ring: MLA's
// default is 32 x 3 (134 KiB), a separate V's 32 x 2 (152 KiB); the
// variants for devices with 99 KiB a block (api.h, split_d_smem) take two
// stages (MLA, 98 KiB) and 16-key blocks (head dim 512, 84 KiB).
template <int kHeadDim_, int kHeadDimV_, typename Element_, bool kSeparateV_ = false, int kBlockN_ = 32,
          int kStages_ = kSeparateV_ ? 2 : 3>
struct MlaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;    // Q K^T's width (K rows)
  static constexpr int kHeadDimV = kHeadDimV_;  // V's and O's width
  // false: V is K's first kHeadDimV columns (MLA); true: V rows of their
  // own (p.v), as wide as K's, in a V tile beside each K tile.
  static constexpr bool kSeparateV = kSeparateV_;
  static constexpr int kNWarps = 4;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kBlockM = 16;        // packed query rows per CTA
  static constexpr int kBlockN = kBlockN_;  // keys per K block: kBlockN / 16 k16 steps of P V
  static constexpr int kStages = kStages_;
  static constexpr int kQKSlice = kHeadDim / kNWarps;  // Q K^T columns per warp
  static constexpr int kVSlice = kHeadDimV / kNWarps;  // O columns per warp
  static constexpr int kChunksPerRow = kHeadDim * 2 / 16;
  static constexpr int kSwizzleChunks = 8;
  static constexpr int kNTilesS = kBlockN / 8;  // n8 tiles of S
  static constexpr int kNTilesO = kVSlice / 8;  // n8 tiles of a warp's O
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKBytes = kBlockN * kHeadDim * 2;
  static constexpr int kVBytes = kSeparateV ? kBlockN * kHeadDimV * 2 : 0;
  static constexpr int kStageBytes = kKBytes + kVBytes;  // a stage: K, then V when separate
  static constexpr int kRingBytes = kStages * kStageBytes;
  // The partial S tiles: [warp][n8 tile][lane] float4s. One buffer: a warp
  // writes the next block's only after the loop's first barrier, which every
  // warp reaches after its reads of this block's.
  static constexpr int kExchangeBytes = kNWarps * kNTilesS * 32 * 16;
  static constexpr int kSmemBytes = kQBytes + kRingBytes + kExchangeBytes;

  static_assert(kHeadDim % (16 * kNWarps) == 0, "each warp's Q K^T columns are whole k16 steps");
  static_assert(kHeadDimV % (16 * kNWarps) == 0, "each warp's O columns are whole pairs of n8 tiles");
  static_assert(kHeadDimV <= kHeadDim, "V is the first kHeadDimV columns of the K rows");
  static_assert(!kSeparateV || kHeadDimV == kHeadDim, "a separate V tile has K's layout");
  static_assert(kHeadDim % 64 == 0, "whole 128-byte swizzle rows");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 32, "whole k16 steps; a block's rows are looked up one per lane");
  static_assert(kStages >= 2, "the ring waits for all but kStages - 2 groups");
  static_assert(kSmemBytes <= 160 * 1024, "must fit an A100's shared memory");
};

// The K rows of a paged block, one page lookup per row: lane l of every
// warp looks up row l (a block ahead, fetch()); issue() shuffles each
// copy's row offset from the lane that holds it.
template <typename Traits>
struct MlaPagedRows {
  static_assert(Traits::kBlockN <= 32, "a block's rows are looked up one per lane");
  int64_t offset = -1;    // this lane's K row: element offset from the head's page 0 (-1: none)
  int64_t v_offset = -1;  // the same row of V (Traits::kSeparateV)

  __device__ __forceinline__ void fetch(const int* table, int page_size, int page_shift, int first, int valid_rows,
                                        int64_t page_stride, int64_t row_stride, int64_t v_page_stride,
                                        int64_t v_row_stride, int lane) {
    offset = -1;
    v_offset = -1;
    if (lane < Traits::kBlockN && lane < valid_rows) {
      const int key = first + lane;
      const int index = page_of_key(key, page_size, page_shift);
      const int64_t page = __ldg(table + index);
      const int64_t row = key - index * page_size;
      offset = page * page_stride + row * row_stride;
      if constexpr (Traits::kSeparateV) v_offset = page * v_page_stride + row * v_row_stride;
    }
  }

  // kV: V's rows (v_offset), else K's.
  template <bool kV = false>
  __device__ __forceinline__ void issue(uint32_t smem, const typename Traits::Element* head, int valid_chunks,
                                        int tid) const {
    constexpr int kCPR = Traits::kChunksPerRow;
    constexpr int kIters = Traits::kBlockN * kCPR / Traits::kNThreads;
    static_assert(Traits::kBlockN * kCPR % Traits::kNThreads == 0, "the block's chunks split evenly");
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int idx = tid + i * Traits::kNThreads;
      const int row = idx / kCPR;
      const int c = idx % kCPR;
      const int64_t at = __shfl_sync(0xffffffffu, kV ? v_offset : offset, row);
      const bool valid = at >= 0 && c < valid_chunks;
      ptx::cp_async_16(smem + sm80::chunk_offset<Traits, Traits::kBlockN>(row, c), valid ? head + at + c * 8 : head,
                       valid);
    }
  }
};

template <typename Traits, bool kMasked, bool kScoreMod>
__global__ void __launch_bounds__(Traits::kNThreads, 1) mla_kernel(const __grid_constant__ detail::FwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kStages = Traits::kStages;
  constexpr int kCPR = Traits::kChunksPerRow;
  constexpr int kNTilesS = Traits::kNTilesS;
  constexpr int kNTilesO = Traits::kNTilesO;

  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int split = blockIdx.x % p.num_splits;
  const int m_block = blockIdx.x / p.num_splits;
  const int head_kv = blockIdx.y;
  const int batch = blockIdx.z;
  const int g = p.q_per_kv;

  const SeqInfo seq(p, batch);
  const int rows = min(seq.len_q, p.seqlen_q) * g;
  const int row_begin = m_block * kBlockM;
  if (row_begin >= rows) return;
  const int row_end = min(row_begin + kBlockM, rows);

  const WindowMask<kMasked> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
  const ScoreMod<kScoreMod> mods(p);
  float alibi_neg[2] = {0.f, 0.f};
  int alibi_diag[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int r = row_begin + lane / 4 + hi * 8;
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
  const Element* v = static_cast<const Element*>(p.v) + seq.v_offset + head_kv * p.v_head_stride;
  const int* table = p.block_table != nullptr ? p.block_table + batch * p.block_table_batch_stride : nullptr;

  const uint32_t smem_q = ptx::smem_addr(smem);
  const uint32_t smem_k = smem_q + Traits::kQBytes;
  float4* const exchange = reinterpret_cast<float4*>(smem + Traits::kQBytes + Traits::kRingBytes);

  MlaPagedRows<Traits> pages;
  auto fetch_pages = [&](int n_block) {
    if (table != nullptr && n_block < s_end) {
      pages.fetch(table, p.page_size, p.page_shift, n_block * kBlockN, seq.len_k - n_block * kBlockN, p.k_batch_stride,
                  p.k_seq_stride, p.v_batch_stride, p.v_seq_stride, lane);
    }
  };
  const int chunks = p.head_dim / 8;      // 16-byte chunks of a K row the call has
  const int v_chunks = p.head_dim_v / 8;  // and of a V row (kSeparateV)
  auto load_k = [&](int n_block, int stage) {
    const uint32_t sk = smem_k + stage * Traits::kStageBytes;
    const int first = n_block * kBlockN;
    if (table == nullptr) {
      sm80::load_tile<Traits, kBlockN>(sk, k + first * p.k_seq_stride, p.k_seq_stride, seq.len_k - first, chunks, tid);
      if constexpr (Traits::kSeparateV) {
        sm80::load_tile<Traits, kBlockN>(sk + Traits::kKBytes, v + first * p.v_seq_stride, p.v_seq_stride,
                                         seq.len_k - first, v_chunks, tid);
      }
    } else {
      pages.issue(sk, k, chunks, tid);
      if constexpr (Traits::kSeparateV) pages.template issue<true>(sk + Traits::kKBytes, v, v_chunks, tid);
    }
  };

  // Q: 16 packed rows, each its own (token, head) address; columns past
  // head_dim zero-filled.
  {
    constexpr int kQIters = (kBlockM * kCPR + Traits::kNThreads - 1) / Traits::kNThreads;
    const int q_chunks = p.head_dim / 8;
#pragma unroll
    for (int i = 0; i < kQIters; ++i) {
      const int idx = tid + i * Traits::kNThreads;
      if (idx < kBlockM * kCPR) {
        const int row = idx / kCPR;
        const int c = idx % kCPR;
        const int r = row_begin + row;
        const bool valid = r < row_end && c < q_chunks;
        const Element* src = valid ? static_cast<const Element*>(p.q) + seq.q_offset +
                                         static_cast<int64_t>(r / g) * p.q_seq_stride +
                                         static_cast<int64_t>(head_kv * g + r % g) * p.q_head_stride + c * 8
                                   : static_cast<const Element*>(p.q);
        ptx::cp_async_16(smem_q + sm80::chunk_offset<Traits, kBlockM>(row, c), src, valid);
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s_begin + s < s_end) {
      fetch_pages(s_begin + s);
      load_k(s_begin + s, s);
    }
    ptx::cp_async_commit();
  }
  fetch_pages(s_begin + kStages - 1);

  float acc_o[1][kNTilesO][4];
#pragma unroll
  for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[0][nt][e] = 0.f;
  OnlineSoftmax<1> softmax;

  const sm80::LdsmAddress<Traits, kBlockM> q_addr(smem_q, lane % 16, lane / 16);
  const int k_lane_row = lane % 8 + (lane / 16) * 8;
  const int v_lane_row = lane % 8 + ((lane / 8) % 2) * 8;
  constexpr int kQKChunk0 = Traits::kQKSlice / 8;  // this warp's first Q K^T chunk, per warp
  constexpr int kVChunk0 = Traits::kVSlice / 8;    // this warp's first V chunk, per warp

  int iter = 0;
  for (int n_block = s_begin; n_block < s_end; ++n_block, ++iter) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    if (n_block + kStages - 1 < s_end) load_k(n_block + kStages - 1, (iter + kStages - 1) % kStages);
    ptx::cp_async_commit();
    fetch_pages(n_block + kStages);

    const uint32_t sk = smem_k + (iter % kStages) * Traits::kStageBytes;
    const sm80::LdsmAddress<Traits, kBlockN> k_addr(sk, k_lane_row, (lane / 8) % 2);
    const sm80::LdsmAddress<Traits, kBlockN> v_addr(Traits::kSeparateV ? sk + Traits::kKBytes : sk, v_lane_row,
                                                    lane / 16);

    // This warp's partial S over its Q K^T columns.
    float s[1][kNTilesS][4];
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Traits::kQKSlice / 16; ++ks) {
      const int chunk = warp * kQKChunk0 + 2 * ks;
      uint32_t a[4];
      ptx::ldmatrix_x4(a, q_addr.at(0, chunk));
#pragma unroll
      for (int t = 0; t < kBlockN / 16; ++t) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, k_addr.at(16 * t, chunk));
        ptx::mma_m16n8k16<Element>(s[0][2 * t], a, b[0], b[1]);
        ptx::mma_m16n8k16<Element>(s[0][2 * t + 1], a, b[2], b[3]);
      }
    }
    // The four partial tiles, summed in warp order by every warp.
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt) {
      exchange[(warp * kNTilesS + nt) * 32 + lane] = make_float4(s[0][nt][0], s[0][nt][1], s[0][nt][2], s[0][nt][3]);
    }
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt) {
      float4 sum = exchange[nt * 32 + lane];
#pragma unroll
      for (int w = 1; w < Traits::kNWarps; ++w) {
        const float4 x = exchange[(w * kNTilesS + nt) * 32 + lane];
        sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
      }
      s[0][nt][0] = sum.x, s[0][nt][1] = sum.y, s[0][nt][2] = sum.z, s[0][nt][3] = sum.w;
    }

    const int col0 = n_block * kBlockN;
    mods.apply(
        s, col0, lane, [&](int, int hi) { return alibi_diag[hi]; }, [&](int, int hi) { return alibi_neg[hi]; });
    if (block_needs_mask(n_block, u_begin, u_end)) {
      const RowRange<1> ranges =
          mask.template ranges<1>([&](int, int hi) { return (row_begin + lane / 4 + hi * 8) / g; });
      apply_mask<kMasked>(s, ranges, col0, lane);
    }
    float correction[2];
    softmax.update(s, p.softmax_scale_log2, correction);
    softmax.rescale(acc_o, correction);

    // O's columns of this warp += P V, V the K tile's first columns.
#pragma unroll
    for (int t = 0; t < kBlockN / 16; ++t) {
      uint32_t a[4];
      a[0] = ptx::pack2<Element>(s[0][2 * t][0], s[0][2 * t][1]);
      a[1] = ptx::pack2<Element>(s[0][2 * t][2], s[0][2 * t][3]);
      a[2] = ptx::pack2<Element>(s[0][2 * t + 1][0], s[0][2 * t + 1][1]);
      a[3] = ptx::pack2<Element>(s[0][2 * t + 1][2], s[0][2 * t + 1][3]);
#pragma unroll
      for (int np = 0; np < kNTilesO / 2; ++np) {
        uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, v_addr.at(16 * t, warp * kVChunk0 + 2 * np));
        ptx::mma_m16n8k16<Element>(acc_o[0][2 * np], a, b[0], b[1]);
        ptx::mma_m16n8k16<Element>(acc_o[0][2 * np + 1], a, b[2], b[3]);
      }
    }
  }
  ptx::cp_async_wait<0>();

  // Every warp holds the same softmax state: finalize and store its columns.
  float inv_l[2], lse[2];
  softmax.finalize(p.softmax_scale, inv_l, lse);
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int r = row_begin + lane / 4 + hi * 8;
    if (p.sinks != nullptr && p.num_splits == 1) add_sink(p.sinks[head_kv * g + r % g], inv_l[hi], lse[hi]);
  }
  const int heads_q = p.heads_q;
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int r = row_begin + lane / 4 + hi * 8;
    if (r >= row_end) continue;
    const int token = r / g;
    const int head = head_kv * g + r % g;
    if (p.num_splits == 1) {
      Element* o = static_cast<Element*>(p.o) + seq.o_offset + static_cast<int64_t>(token) * p.o_seq_stride +
                   static_cast<int64_t>(head) * p.o_head_stride;
#pragma unroll
      for (int nt = 0; nt < kNTilesO; ++nt) {
        const int col = warp * Traits::kVSlice + nt * 8 + (lane % 4) * 2;
        if (col >= p.head_dim_v) continue;
        *reinterpret_cast<uint32_t*>(o + col) =
            ptx::pack2<Element>(acc_o[0][nt][2 * hi] * inv_l[hi], acc_o[0][nt][2 * hi + 1] * inv_l[hi]);
      }
      if (warp == 0 && lane % 4 == 0 && p.lse != nullptr) {
        const int64_t at = p.cu_seqlens_q != nullptr
                               ? static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + seq.q_start + token
                               : (static_cast<int64_t>(batch) * heads_q + head) * p.seqlen_q + token;
        p.lse[at] = lse[hi];
      }
    } else if (token < p.seqlen_q) {
      const int64_t slot = ((static_cast<int64_t>(split) * p.batch + batch) * heads_q + head) * p.seqlen_q + token;
#pragma unroll
      for (int nt = 0; nt < kNTilesO; ++nt) {
        const int col = warp * Traits::kVSlice + nt * 8 + (lane % 4) * 2;
        *reinterpret_cast<float2*>(p.o_partial + slot * Traits::kHeadDim + col) =
            make_float2(acc_o[0][nt][2 * hi] * inv_l[hi], acc_o[0][nt][2 * hi + 1] * inv_l[hi]);
      }
      if (warp == 0 && lane % 4 == 0) p.lse_partial[slot] = lse[hi];
    }
  }
}

// Launches the wide-head decode kernel and, with several splits, the
// combine (workspace rows Traits::kHeadDim wide; splits count
// Traits::kBlockN-key blocks). The caller has checked the grid (seqlen_q x q_per_kv packed
// rows below 2^30, batch and heads_kv within gridDim.z / y: the plan) and
// that the device's shared memory holds Traits::kSmemBytes. Without
// Traits::kSeparateV, V must be K's rows (the kernel reads V's columns from
// the K tile): anything else is refused.
template <typename Traits>
cudaError_t run_mla(const detail::FwdParams& params, cudaStream_t stream) {
  const bool v_is_k = params.v == params.k && params.v_batch_stride == params.k_batch_stride &&
                      params.v_seq_stride == params.k_seq_stride && params.v_head_stride == params.k_head_stride;
  if ((!Traits::kSeparateV && !v_is_k) || params.head_dim_v > Traits::kHeadDimV || params.head_dim > Traits::kHeadDim ||
      (!Traits::kSeparateV && params.head_dim_v > params.head_dim) || params.head_dim % 8 != 0 ||
      params.head_dim_v % 8 != 0) {
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
    return launch_kernel(kernel, grid, dim3(Traits::kNThreads), Traits::kSmemBytes, stream, params);
  };
  cudaError_t err;
  if (window) {
    err = mods ? launch(&mla_kernel<Traits, true, true>) : launch(&mla_kernel<Traits, true, false>);
  } else {
    err = mods ? launch(&mla_kernel<Traits, false, true>) : launch(&mla_kernel<Traits, false, false>);
  }
  if (err != cudaSuccess || params.num_splits <= 1) return err;
  return launch_combine<Traits::kHeadDim, typename Traits::Element>(params, stream);
}

// run_mla (kWide false: MLA, 576 / 512, V in K's rows) and run_wide (kWide:
// head dim 512 with its own V) of one element type: `variant` 0 or 1 as
// api.h's split_d_* give them, cudaErrorInvalidValue for any other.
template <bool kWide, typename Element>
cudaError_t run_split_d(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  constexpr int kHeadDim = kWide ? kWideHeadDim : 576;
  constexpr int kHeadDimV = kWide ? kWideHeadDim : 512;
  using Default = MlaTraits<kHeadDim, kHeadDimV, Element, kWide, split_d_block_n(kWide, 0), split_d_stages(kWide, 0)>;
  using Small = MlaTraits<kHeadDim, kHeadDimV, Element, kWide, split_d_block_n(kWide, 1), split_d_stages(kWide, 1)>;
  static_assert(Default::kSmemBytes == split_d_smem(kWide, 0) && Small::kSmemBytes == split_d_smem(kWide, 1) &&
                    Default::kBlockM == kMlaBlockM && Small::kBlockM == kMlaBlockM,
                "api.h's split-D figures are stale");
  if (variant == 0) return run_mla<Default>(params, stream);
  if (variant == 1) return run_mla<Small>(params, stream);
  return cudaErrorInvalidValue;
}

}  // namespace flash::decode
