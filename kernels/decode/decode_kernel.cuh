// Split-KV decode kernel (flash-decoding) for short queries, sm_80 and newer.
//
// One CTA owns 16 packed query rows of one (batch, K/V head) and one split
// (a contiguous range of K/V blocks). Rows are packed GQA-style: packed row
// r is query token r / g of query head head_kv * g + r % g (g = heads_q /
// heads_kv), so the g query heads that share a K/V head read it once. The
// four warps split every K/V block between them (16 keys each; 32 in the
// fp8 kernels up to head_dim 128, 128-key blocks) instead
// of splitting the rows: each warp keeps its own online softmax over its
// keys, and the four partial results are merged through shared memory at
// the end. K/V stream through a kStages-deep cp.async ring (dense,
// varlen or paged rows).
//
// With one split the CTA writes O (and the LSE) directly. With several,
// each writes its normalised fp32 partial O and its LSE to the workspace and
// combine_kernel (combine_kernel.cuh) merges the splits in a fixed order
// (deterministic).
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include "../common/fp8.cuh"
#include "../common/mask.cuh"
#include "../common/ptx.cuh"
#include "../common/rotary.cuh"
#include "../common/seqlen.cuh"
#include "../common/softmax.cuh"
#include "../params.h"
#include "../sm80/fwd_kernel.cuh"  // chunk_offset, LdsmAddress, load_tile, PagedKV
#include "api.h"                    // stages
#include "paged_rows.cuh"

namespace flash::decode {

// kFp8KV: K and V are e4m3 bytes (AttentionParams::kv_dtype), turned into
// fp16 pairs in registers (fp8.cuh) on their way to the tensor cores, which
// run on fp16 (MmaElement) whatever Element is.
// kStages: the K/V ring's depth, stages() but for the two-stage variant
// (api.h, has_two_stage_variant).
template <int kHeadDim_, typename Element_, bool kFp8KV_ = false, int kStages_ = stages(kHeadDim_, kFp8KV_)>
struct DecodeTraits {
  using Element = Element_;
  static constexpr bool kFp8KV = kFp8KV_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kNWarps = 4;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kBlockM = 16;                // packed query rows per CTA
  static constexpr int kBlockN = block_n(kHeadDim, kFp8KV);  // keys per K/V block
  static constexpr int kKeysPerWarp = kBlockN / kNWarps;    // 16 or 32: one or two k16 steps of P V
  static constexpr int kNTilesS = kKeysPerWarp / 8;         // n8 tiles of a warp's S
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocks = kHeadDim <= 128 ? 2 : 1;  // CTAs per SM the launch bounds ask for
  // The Q tile (and, without kFp8KV, the K/V tiles): 16-byte chunks of Element.
  static constexpr int kChunksPerRow = kHeadDim * 2 / 16;
  static constexpr int kSwizzleChunks = (kHeadDim % 64 == 0) ? 8 : 4;
  static constexpr int kKSteps = kHeadDim / 16;     // k16 steps of Q K^T
  static constexpr int kNTilesO = kHeadDim / 8;     // n8 tiles of O

  // The K and V tiles as load_tile, PagedKV and LdsmAddress see them.
  struct KvTile {
    using Element = std::conditional_t<kFp8KV, uint8_t, Element_>;
    static constexpr int kNThreads = DecodeTraits::kNThreads;
    static constexpr int kChunksPerRow = kHeadDim * static_cast<int>(sizeof(Element)) / 16;
    static constexpr int kSwizzleChunks = kChunksPerRow % 8 == 0 ? 8 : 4;
  };

  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVBytes = kBlockN * kHeadDim * static_cast<int>(sizeof(typename KvTile::Element));
  static constexpr int kStageBytes = 2 * kKVBytes;
  static constexpr int kRingBytes = kStages * kStageBytes;
  // The merge reuses the ring: each warp's fp32 O, then its row max and sum.
  static constexpr int kMergeOBytes = kNWarps * kBlockM * kHeadDim * 4;
  static constexpr int kMergeBytes = kMergeOBytes + 2 * kNWarps * kBlockM * 4;
  // fp8: each Q row's power of two (see the kernel's Q load), after the
  // ring and the merge, which reuse the bytes between them.
  static constexpr int kQFactorBytes = kFp8KV ? kBlockM * 4 : 0;
  // A paged call's row addresses (PagedRows), before Q's factors.
  static constexpr int kPagedRowsOffset = kQBytes + (kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes);
  static constexpr int kPagedRowBytes = PagedRows<KvTile, kBlockN>::kBytes;
  static constexpr int kSmemBytes = kPagedRowsOffset + kPagedRowBytes + kQFactorBytes;
  // The tensor cores' input type: fp16 on an fp8 cache whatever Element is
  // (e4m3 bytes widen to fp16 in one instruction a pair on sm_89 and later;
  // Q is brought into fp16's range by a power of two a row).
  using MmaElement = std::conditional_t<kFp8KV, __half, Element>;

  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head_dim must be a multiple of 32, at most 256");
  static_assert(kStages >= 2, "the ring overlaps one block's copies with another's compute");
  static_assert(!kFp8KV || kHeadDim % 64 == 0, "fp8 K/V tiles take head dims that are multiples of 64");
  static_assert((kBlockN * kChunksPerRow) % kNThreads == 0, "K/V tiles must split evenly over the threads");
  static_assert((kBlockN * KvTile::kChunksPerRow) % kNThreads == 0, "K/V tiles must split evenly over the threads");
  static_assert(kSmemBytes <= 160 * 1024, "must fit an A100's shared memory");
};

// The decode kernel's share of an append it does itself (FwdParams::
// AppendFusion::writes; bf16/fp16 caches): the new rows of one (batch, K/V
// head) written into the cache, and put in the K/V tiles of the blocks
// that hold them, with the append kernel's arithmetic (append.cu,
// common/rotary.cuh), so the cache and the tiles get the bits the append
// kernel would write. Compiled only into the decode kernel's kWrites
// variant, so the other decode kernels' code is as it is without it; there
// only the last block or two of a sequence, and one CTA's writes, take
// these paths.
// The pair (*a, *b) of a tile in shared memory turned in place by the
// angle whose cosine is c and sine s (rotary::first / second).
template <typename T>
__device__ __forceinline__ void turn_pair(T* a, T* b, float c, float s) {
  const float x0 = rotary::to_f32(*a), x1 = rotary::to_f32(*b);
  *a = ptx::from_float<T>(rotary::first(x0, x1, c, s));
  *b = ptx::from_float<T>(rotary::second(x0, x1, c, s));
}

template <typename Traits>
struct KernelAppend {
  using Element = typename Traits::Element;
  static constexpr int kBlockN = Traits::kBlockN;
  using Tile = typename Traits::KvTile;
  static_assert(!Traits::kFp8KV, "bf16/fp16 caches only");
  static constexpr int kChunkElems = 8;  // 16-byte chunks of 2-byte elements
  static constexpr int kCPR = Tile::kChunksPerRow;
  const detail::FwdParams& p;
  int batch, head_kv;
  int cached_keys;  // keys before the append: the cache's rows
  int len_k;        // keys after it

  __device__ __forceinline__ int rot_dim() const { return p.append.rotary_cos != nullptr ? p.append.rotary_dim : 0; }
  // New row t as the caller passed it.
  __device__ __forceinline__ const Element* new_row(const void* base, int64_t batch_stride, int64_t seq_stride,
                                                    int64_t head_stride, int t) const {
    const int* cu_new = p.append.cu_seqlens_new;
    const int64_t row = cu_new != nullptr ? static_cast<int64_t>(cu_new[batch]) + t : t;
    return static_cast<const Element*>(base) + (cu_new != nullptr ? 0 : batch * batch_stride) + row * seq_stride +
           head_kv * head_stride;
  }
  __device__ __forceinline__ const Element* new_k(int t) const {
    return new_row(p.append.k_new, p.append.k_new_batch_stride, p.append.k_new_seq_stride,
                   p.append.k_new_head_stride, t);
  }
  __device__ __forceinline__ const Element* new_v(int t) const {
    return new_row(p.append.v_new, p.append.v_new_batch_stride, p.append.v_new_seq_stride,
                   p.append.v_new_head_stride, t);
  }
  // Offset of new row t's angles in the rotary tables (position cached_keys + t).
  __device__ __forceinline__ int64_t angles(int t) const {
    return static_cast<int64_t>(rotary::table_row(cached_keys + t, p.append.rotary_positions)) * (rot_dim() / 2);
  }
  // Element offsets of key `key`'s row in K and V (head 0).
  __device__ __forceinline__ void cache_row(int key, int64_t* k_at, int64_t* v_at) const {
    if (p.block_table != nullptr) {
      const int index = page_of_key(key, p.page_size, p.page_shift);
      const int64_t page = __ldg(p.block_table + batch * p.block_table_batch_stride + index);
      const int64_t in_page = key - index * p.page_size;
      *k_at = page * p.k_batch_stride + in_page * p.k_seq_stride;
      *v_at = page * p.v_batch_stride + in_page * p.v_seq_stride;
    } else {
      *k_at = batch * p.k_batch_stride + static_cast<int64_t>(key) * p.k_seq_stride;
      *v_at = batch * p.v_batch_stride + static_cast<int64_t>(key) * p.v_seq_stride;
    }
  }

  // The cache writes, spread over the CTAs of this (batch, K/V head) from
  // the last (the last split holds the fewest blocks): new row t by CTA
  // gridDim.x - 1 - t % gridDim.x, a warp a row. No CTA of the grid reads
  // these rows from the cache.
  __device__ __forceinline__ void write() const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int added = len_k - cached_keys;
    const int rd = rot_dim();
    for (int64_t t = (gridDim.x - 1 - blockIdx.x) + static_cast<int64_t>(warp) * gridDim.x; t < added;
         t += static_cast<int64_t>(Traits::kNWarps) * gridDim.x) {
      int64_t k_at, v_at;
      cache_row(cached_keys + static_cast<int>(t), &k_at, &v_at);
      Element* k_dst = static_cast<Element*>(const_cast<void*>(p.k)) + k_at + head_kv * p.k_head_stride;
      Element* v_dst = static_cast<Element*>(const_cast<void*>(p.v)) + v_at + head_kv * p.v_head_stride;
      const Element* k_src = new_k(static_cast<int>(t));
      const Element* v_src = new_v(static_cast<int>(t));
      const int64_t at = angles(static_cast<int>(t));
      // Every load before the first store (the stores may alias the
      // sources as far as the compiler knows): one round trip a row.
      constexpr int kPerLane = Traits::kHeadDim / 32;
      Element k_vals[kPerLane], v_vals[kPerLane];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        k_vals[i] = v_vals[i] = ptx::from_float<Element>(0.f);
        if (e < p.head_dim) {
          k_vals[i] = e < rd ? ptx::from_float<Element>(rotary::rotated_element(k_src, e, rd / 2,
                                                                               p.append.rotary_interleaved,
                                                                               p.append.rotary_cos + at,
                                                                               p.append.rotary_sin + at))
                             : k_src[e];
        }
        if (e < p.head_dim_v) v_vals[i] = v_src[e];
      }
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < p.head_dim) k_dst[e] = k_vals[i];
        if (e < p.head_dim_v) v_dst[e] = v_vals[i];
      }
    }
  }

  // Rows of block n_block: [0, cached) from the cache, [cached, filled) new.
  __device__ __forceinline__ void block_rows(int n_block, int* cached, int* filled) const {
    *cached = min(max(cached_keys - n_block * kBlockN, 0), kBlockN);
    *filled = min(max(len_k - n_block * kBlockN, 0), kBlockN);
  }

  // The copies of block n_block into the stage's K and V tiles (shared
  // addresses sk, sv), in load_tile's layout: cache rows from the cache,
  // new rows from k_new / v_new as they are (rotate() turns the keys once
  // they have landed), rows past the keys and columns past the call's
  // widths zero. Pages are looked up directly (a block or two a sequence).
  __device__ __forceinline__ void load(int n_block, uint32_t sk, uint32_t sv) const {
    const int tid = threadIdx.x;
    const int first = n_block * kBlockN;
    int cached, filled;
    block_rows(n_block, &cached, &filled);
    const Element* k = static_cast<const Element*>(p.k) + head_kv * p.k_head_stride;
    const Element* v = static_cast<const Element*>(p.v) + head_kv * p.v_head_stride;
    const int chunks = p.head_dim / kChunkElems, v_chunks = p.head_dim_v / kChunkElems;
#pragma unroll 1
    for (int idx = tid; idx < kBlockN * kCPR; idx += Traits::kNThreads) {
      const int row = idx / kCPR;
      const int c = idx % kCPR;
      const Element* k_src = k;
      const Element* v_src = v;
      if (row < cached) {
        int64_t k_at, v_at;
        cache_row(first + row, &k_at, &v_at);
        k_src = k + k_at;
        v_src = v + v_at;
      } else if (row < filled) {
        k_src = new_k(first + row - cached_keys);
        v_src = new_v(first + row - cached_keys);
      }
      const bool k_valid = row < filled && c < chunks;
      const bool v_valid = row < filled && c < v_chunks;
      const uint32_t at = sm80::chunk_offset<Tile, kBlockN>(row, c);
      ptx::cp_async_16(sk + at, k_valid ? k_src + c * kChunkElems : k, k_valid);
      ptx::cp_async_16(sv + at, v_valid ? v_src + c * kChunkElems : v, v_valid);
    }
    // The new keys' angles into L2 for rotate() (a 128-byte line each).
    const int rd = rot_dim();
    const int lines = (rd / 2 * static_cast<int>(sizeof(float)) + 127) / 128;
#pragma unroll 1
    for (int idx = tid; idx < (filled - cached) * lines * 2; idx += Traits::kNThreads) {
      const int t = first + cached + idx / (2 * lines) - cached_keys;
      const float* row = (idx % 2 == 0 ? p.append.rotary_cos : p.append.rotary_sin) + angles(t);
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + (idx / 2 % lines) * 32));
    }
  }

  // The new keys of block n_block turned in its landed K tile (`tile`, a
  // generic pointer to it): the append kernel's arithmetic on the same
  // inputs. Called by every thread between the barriers around it.
  __device__ __forceinline__ void rotate(int n_block, unsigned char* tile) const {
    int cached, filled;
    block_rows(n_block, &cached, &filled);
    const int half = rot_dim() / 2;
    const bool inter = p.append.rotary_interleaved;
    auto at = [&](int row, int col) {
      return reinterpret_cast<Element*>(tile + sm80::chunk_offset<Tile, kBlockN>(row, col / kChunkElems)) +
             col % kChunkElems;
    };
#pragma unroll 1
    for (int idx = threadIdx.x; idx < (filled - cached) * half; idx += Traits::kNThreads) {
      const int row = cached + idx / half;
      const int j = idx % half;
      const int64_t a_at = angles(n_block * kBlockN + row - cached_keys) + j;
      const float c = __ldg(p.append.rotary_cos + a_at), s = __ldg(p.append.rotary_sin + a_at);
      turn_pair(at(row, inter ? 2 * j : j), at(row, inter ? 2 * j + 1 : j + half), c, s);
    }
  }
};

// kMinBlocks CTAs per SM, as many as the shared memory holds (2 up to
// head_dim 128: registers capped at 256; 1 at 256, which needs more).
// kWrites: the kernel does the whole append itself (KernelAppend; set
// where FwdParams::AppendFusion::writes is), a kernel of its own so that
// every other call runs code without it.
template <typename Traits, bool kMasked, bool kScoreMod, bool kWrites = false>
__global__ void __launch_bounds__(Traits::kNThreads, Traits::kMinBlocks)
    decode_kernel(const __grid_constant__ detail::FwdParams p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kStages = Traits::kStages;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kCPR = Traits::kChunksPerRow;
  constexpr bool kFp8 = Traits::kFp8KV;
  using KvTile = typename Traits::KvTile;
  using KvElement = typename KvTile::Element;
  using Mma = typename Traits::MmaElement;

  // kWrites: the kernel does the whole append itself (KernelAppend): it
  // counts each sequence's new rows, rotates its Q tile and the new keys as
  // the append kernel would, and writes the new rows into the cache. Else,
  // launched as a programmatic dependent of the append kernel (an fp8
  // cache; a no-op otherwise), it waits for the lengths, rotated Q and
  // cache rows that kernel writes before it reads anything.
  constexpr bool fused = kWrites;
  static_assert(!kWrites || !kFp8, "the kernel's own append takes bf16/fp16 caches");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (!fused) {
    if (p.follows_append) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  }
  // The combine kernel (a programmatic dependent launch) may start now: it
  // reads only the call's own inputs before it waits for this grid to
  // finish, so its CTAs start, and read their lengths, while this grid runs.
  if (p.num_splits > 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int split = blockIdx.x % p.num_splits;
  const int m_block = blockIdx.x / p.num_splits;
  const int head_kv = blockIdx.y;
  const int batch = blockIdx.z;
  const int g = p.q_per_kv;

  SeqInfo seq(p, batch);
  // The first K/V block holding an appended row, and the keys before the
  // append (the cache's rows; the rest come from k_new / v_new).
  int first_appended_block = INT_MAX;
  const int cached_keys = seq.len_k;
  if constexpr (fused) {
    // seq.len_k is seqused_k[b] clamped to [0, alloc], the append's start;
    // the rows that fit the allocation follow it (append.cu's arithmetic).
    const int* cu_new = p.append.cu_seqlens_new;
    const int n_new = cu_new != nullptr ? cu_new[batch + 1] - cu_new[batch] : p.append.seqlen_new;
    const int added = min(max(n_new, 0), p.max_seqlen_k_alloc - seq.len_k);
    if (added > 0) first_appended_block = seq.len_k / kBlockN;
    seq.len_k += added;
  }
  // Rows past seqlen_q * g are not computed (a varlen seqlen_q is the
  // longest sequence); the launcher keeps that product below 2^31 - kBlockM,
  // so these int row indices never wrap.
  const int rows = min(seq.len_q, p.seqlen_q) * g;
  const int row_begin = m_block * kBlockM;

  const int rot_dim = fused && p.append.rotary_cos != nullptr ? p.append.rotary_dim : 0;
  if (row_begin >= rows) {
    if constexpr (fused) KernelAppend<Traits>{p, batch, head_kv, cached_keys, seq.len_k}.write();
    return;
  }
  const int row_end = min(row_begin + kBlockM, rows);

  const WindowMask<kMasked> mask(seq.len_q, seq.len_k, p.window_left, p.window_right);
  const ScoreMod<kScoreMod> mods(p);
  // ALiBi per packed row: its query head's slope, and i + d of its token.
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
  // This split's share of the visible blocks (possibly none).
  const int per_split = (n_end - n_begin + p.num_splits - 1) / p.num_splits;
  const int s_begin = min(n_end, n_begin + split * per_split);
  const int s_end = min(n_end, s_begin + per_split);

  const KvElement* k = static_cast<const KvElement*>(p.k) + seq.k_offset + head_kv * p.k_head_stride;
  const KvElement* v = static_cast<const KvElement*>(p.v) + seq.v_offset + head_kv * p.v_head_stride;
  // fp8: K = k_descale * K_fp8 scales this head's scores, V = v_descale * V_fp8 its O.
  float k_descale = 1.f, v_descale = 1.f;
  if constexpr (kFp8) {
    if (p.k_descale != nullptr) k_descale = __ldg(p.k_descale + head_kv * p.descale_head_stride);
    if (p.v_descale != nullptr) v_descale = __ldg(p.v_descale + head_kv * p.descale_head_stride);
  }
  const int* table = p.block_table != nullptr ? p.block_table + batch * p.block_table_batch_stride : nullptr;

  const uint32_t smem_q = ptx::smem_addr(smem);
  const uint32_t smem_kv = smem_q + Traits::kQBytes;

  // Paged: the page numbers of the next block to copy are read one step
  // ahead (PagedRows; sm80::PagedKV where a warp's lanes do not cover whole
  // rows), so the table read's latency hides under a block's compute
  // instead of stalling the copies.
  std::conditional_t<PagedRows<KvTile, kBlockN>::kApplies, PagedRows<KvTile, kBlockN>, sm80::PagedKV<KvTile, kBlockN>>
      pages;
  if constexpr (PagedRows<KvTile, kBlockN>::kApplies) pages.place(smem_q + Traits::kPagedRowsOffset, tid);
  auto fetch_pages = [&](int n_block) {
    if (table != nullptr && n_block < s_end) {
      pages.fetch(table, p.page_size, p.page_shift, n_block * kBlockN, seq.len_k - n_block * kBlockN, tid);
    }
  };
  constexpr int kKvChunkElems = 16 / static_cast<int>(sizeof(KvElement));
  const int chunks = p.head_dim / kKvChunkElems;     // 16-byte chunks of a K row the call has
  const int v_chunks = p.head_dim_v / kKvChunkElems;  // and of a V row
  auto load_kv = [&](int n_block, int stage) {
    const uint32_t sk = smem_kv + stage * Traits::kStageBytes;
    if constexpr (fused) {
      if (n_block >= first_appended_block) {  // CTA-uniform
        KernelAppend<Traits>{p, batch, head_kv, cached_keys, seq.len_k}.load(n_block, sk, sk + Traits::kKVBytes);
        return;
      }
    }
    const int first = n_block * kBlockN;
    if (table == nullptr) {
      sm80::load_tile<KvTile, kBlockN>(sk, k + first * p.k_seq_stride, p.k_seq_stride, seq.len_k - first, chunks,
                                       tid);
      sm80::load_tile<KvTile, kBlockN>(sk + Traits::kKVBytes, v + first * p.v_seq_stride, p.v_seq_stride,
                                       seq.len_k - first, v_chunks, tid);
    } else {
      pages.issue(sk, sk + Traits::kKVBytes, k, v, p.k_batch_stride, p.v_batch_stride, p.k_seq_stride,
                  p.v_seq_stride, p.page_size, p.page_shift, first, seq.len_k - first, chunks, v_chunks, tid);
    }
  };

  // Q: 16 packed rows, each its own (token, head) address.
  auto q_row = [&](int r) {
    return static_cast<const Element*>(p.q) + seq.q_offset + static_cast<int64_t>(r / g) * p.q_seq_stride +
           static_cast<int64_t>(head_kv * g + r % g) * p.q_head_stride;
  };
  if constexpr (!kFp8) {
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
        const Element* src = valid ? q_row(r) + c * 8 : static_cast<const Element*>(p.q);
        ptx::cp_async_16(smem_q + sm80::chunk_offset<Traits, kBlockM>(row, c), src, valid);
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s_begin + s < s_end) {
      fetch_pages(s_begin + s);
      load_kv(s_begin + s, s);
    }
    ptx::cp_async_commit();
  }
  fetch_pages(s_begin + kStages - 1);
  // Doing an append that rotates: Q's first rotary_dim columns turn as
  // the append kernel turns them, in the tile, once it has landed with the
  // first block's copies (the wait the first iteration below would make).
  // Warp w takes tile rows w, w + kNWarps, ..., lane l column pairs l,
  // l + 32, ...; the angles are loaded here, while the copies are in
  // flight.
  static_assert(kBlockM % Traits::kNWarps == 0, "Q's rotation gives each warp whole rows");
  constexpr int kRotRows = kBlockM / Traits::kNWarps;
  constexpr int kRotPairs = (kHeadDim / 2 + 31) / 32;
  const int rot_half = fused && p.append.rotary_cos != nullptr ? p.append.rotary_dim / 2 : 0;
  float rot_cos[kRotRows][kRotPairs], rot_sin[kRotRows][kRotPairs];
  if constexpr (fused) {
    if (rot_half > 0) {
#pragma unroll
      for (int i = 0; i < kRotRows; ++i) {
        const int r = row_begin + warp + i * Traits::kNWarps;
        const int64_t pos =
            r < row_end ? rotary::table_row(seq.len_k - seq.len_q + r / g, p.append.rotary_positions) : 0;
#pragma unroll
        for (int jj = 0; jj < kRotPairs; ++jj) {
          const int j = lane + 32 * jj;
          rot_cos[i][jj] = rot_sin[i][jj] = 0.f;
          if (r < row_end && j < rot_half) {
            rot_cos[i][jj] = __ldg(p.append.rotary_cos + pos * rot_half + j);
            rot_sin[i][jj] = __ldg(p.append.rotary_sin + pos * rot_half + j);
          }
        }
      }
    }
  }
  if constexpr (fused) {
    // The cache writes wait on their loads while the first blocks' copies
    // and Q's angles are in flight.
    KernelAppend<Traits>{p, batch, head_kv, cached_keys, seq.len_k}.write();
    if (rot_half > 0) {
      ptx::cp_async_wait<kStages - 2>();
      __syncthreads();
      Element* tile = reinterpret_cast<Element*>(smem);
      auto at = [&](int row, int col) {
        return tile + sm80::chunk_offset<Traits, kBlockM>(row, col / 8) / sizeof(Element) + col % 8;
      };
      const bool inter = p.append.rotary_interleaved;
#pragma unroll
      for (int i = 0; i < kRotRows; ++i) {
        const int row = warp + i * Traits::kNWarps;
#pragma unroll
        for (int jj = 0; jj < kRotPairs; ++jj) {
          const int j = lane + 32 * jj;
          if (row_begin + row < row_end && j < rot_half) {
            turn_pair(at(row, inter ? 2 * j : j), at(row, inter ? 2 * j + 1 : j + rot_half), rot_cos[i][jj],
                      rot_sin[i][jj]);
          }
        }
      }
      __syncthreads();
    }
  }
  // K's descale and, for a bf16 Q on an fp8 cache, its row's power of
  // two back: the factor each of this thread's S rows (lane / 4, + 8) takes.
  float qk_factor[2] = {k_descale, k_descale};
  if constexpr (kFp8) {
    // Q into the tile as fp16 (MmaElement), its columns permuted within each
    // group of 16 to the order in which an ldmatrix of K's bytes delivers
    // them (see the loop below): 4-byte pair u of a group holds the source
    // pair u < 4 ? 2u : 2(u - 4) + 1. Plain loads, after the K/V copies are
    // under way. Warp w takes rows 4w .. 4w + 3, eight lanes a row, lane l
    // the groups l % 8, l % 8 + 8, ...
    //
    // A bf16 row is multiplied by the power of two 2^e of
    // fp8::fp16_row_exponent (as the Hopper kernel's Mainloop::convert_q
    // does), and 2^-e joins the row's score factor.
    constexpr int kRowsPerWarp = kBlockM / Traits::kNWarps;
    constexpr int kLanesPerRow = 32 / kRowsPerWarp;
    constexpr int kGroupsPerRow = kHeadDim / 16;
    constexpr int kGroupsPerLane = (kGroupsPerRow + kLanesPerRow - 1) / kLanesPerRow;
    static_assert(kBlockM % Traits::kNWarps == 0 && 32 % kRowsPerWarp == 0, "Q's rows split evenly over the warps");
    const int row = warp * kRowsPerWarp + lane / kLanesPerRow;
    const int r = row_begin + row;
    const int q_groups = p.head_dim / 16;
    uint32_t w[kGroupsPerLane][8];
#pragma unroll
    for (int gi = 0; gi < kGroupsPerLane; ++gi) {
      const int grp = lane % kLanesPerRow + gi * kLanesPerRow;
      uint4 a = make_uint4(0, 0, 0, 0), b = a;
      if (grp < kGroupsPerRow && r < row_end && grp < q_groups) {
        const uint4* src = reinterpret_cast<const uint4*>(q_row(r) + grp * 16);
        a = src[0];
        b = src[1];
      }
      // The permuted order: pairs 0, 2, 4, 6 (the even chunk), then 1, 3, 5, 7.
      w[gi][0] = a.x, w[gi][1] = a.z, w[gi][2] = b.x, w[gi][3] = b.z;
      w[gi][4] = a.y, w[gi][5] = a.w, w[gi][6] = b.y, w[gi][7] = b.w;
    }
    if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
      float* q_factor = reinterpret_cast<float*>(smem + Traits::kSmemBytes - Traits::kQFactorBytes);
      uint32_t m = 0;  // the row's largest magnitude, as bf16 bits
#pragma unroll
      for (int gi = 0; gi < kGroupsPerLane; ++gi)
#pragma unroll
        for (int i = 0; i < 8; ++i) m = __vmaxu2(m, w[gi][i] & 0x7fff7fffu);
      m = max(m & 0xffffu, m >> 16);
#pragma unroll
      for (int off = 1; off < kLanesPerRow; off *= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
      const int e = fp8::fp16_row_exponent(m);
      const float scale = __int_as_float((e + 127) << 23);
      if (lane % kLanesPerRow == 0) q_factor[row] = __int_as_float((127 - e) << 23);
#pragma unroll
      for (int gi = 0; gi < kGroupsPerLane; ++gi)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          w[gi][i] = ptx::pack2<__half>(__uint_as_float(w[gi][i] << 16) * scale,
                                        __uint_as_float(w[gi][i] & 0xffff0000u) * scale);
        }
    }
#pragma unroll
    for (int gi = 0; gi < kGroupsPerLane; ++gi) {
      const int grp = lane % kLanesPerRow + gi * kLanesPerRow;
      if (grp < kGroupsPerRow) {
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_q + sm80::chunk_offset<Traits, kBlockM>(row, 2 * grp)),
                     "r"(w[gi][0]), "r"(w[gi][1]), "r"(w[gi][2]), "r"(w[gi][3]));
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_q + sm80::chunk_offset<Traits, kBlockM>(row, 2 * grp + 1)),
                     "r"(w[gi][4]), "r"(w[gi][5]), "r"(w[gi][6]), "r"(w[gi][7]));
      }
    }
    if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
      __syncthreads();
      const float* q_factor = reinterpret_cast<const float*>(smem + Traits::kSmemBytes - Traits::kQFactorBytes);
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) qk_factor[hi] = k_descale * q_factor[lane / 4 + hi * 8];
    }
  }

  float acc_o[1][Traits::kNTilesO][4];
#pragma unroll
  for (int nt = 0; nt < Traits::kNTilesO; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[0][nt][e] = 0.f;
  OnlineSoftmax<1> softmax;

  const sm80::LdsmAddress<Traits, kBlockM> q_addr(smem_q, lane % 16, lane / 16);
  constexpr int kKeysPerWarp = Traits::kKeysPerWarp;
  constexpr int kNTilesS = Traits::kNTilesS;
  const int k_lane_row = warp * kKeysPerWarp + lane % 8 + (lane / 16) * 8;
  const int v_lane_row = warp * kKeysPerWarp + lane % 8 + ((lane / 8) % 2) * 8;

  int iter = 0;
  for (int n_block = s_begin; n_block < s_end; ++n_block, ++iter) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    if (n_block + kStages - 1 < s_end) load_kv(n_block + kStages - 1, (iter + kStages - 1) % kStages);
    ptx::cp_async_commit();
    fetch_pages(n_block + kStages);

    const uint32_t sk = smem_kv + (iter % kStages) * Traits::kStageBytes;
    if constexpr (fused) {
      if (rot_dim > 0 && n_block >= first_appended_block) {  // CTA-uniform
        KernelAppend<Traits>{p, batch, head_kv, cached_keys, seq.len_k}.rotate(n_block, smem + (sk - smem_q));
        __syncthreads();
      }
    }
    // fp8: lane rows as for V (matrix l / 8: keys +8 for odd l / 8, the
    // next chunk for l >= 16), for K and V alike.
    const sm80::LdsmAddress<KvTile, kBlockN> k_addr(sk, kFp8 ? v_lane_row : k_lane_row,
                                                    kFp8 ? lane / 16 : (lane / 8) % 2);
    const sm80::LdsmAddress<KvTile, kBlockN> v_addr(sk + Traits::kKVBytes, v_lane_row, lane / 16);

    // S (16 rows x this warp's kKeysPerWarp keys, in 16-key groups t) = Q K^T
    float s[1][kNTilesS][4];
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
    if constexpr (!kFp8) {
#pragma unroll
      for (int ks = 0; ks < Traits::kKSteps; ++ks) {
        uint32_t a[4];
        ptx::ldmatrix_x4(a, q_addr.at(0, 2 * ks));
#pragma unroll
        for (int t = 0; t < kKeysPerWarp / 16; ++t) {
          uint32_t b[4];
          ptx::ldmatrix_x4(b, k_addr.at(16 * t, 2 * ks));
          ptx::mma_m16n8k16<Element>(s[0][2 * t], a, b[0], b[1]);
          ptx::mma_m16n8k16<Element>(s[0][2 * t + 1], a, b[2], b[3]);
        }
      }
    } else {
      // One ldmatrix.x4 of K's bytes covers two k16 steps (16-byte chunks
      // 2j and 2j+1) of 16 keys: b[0] / b[1] keys 0-7 / 8-15 of step 2j,
      // b[2] / b[3] of step 2j+1. Lane l gets key l / 4 of its matrix,
      // columns 4(l % 4) .. +3: the first two are its mma k-pair 2(l % 4),
      // the last two its pair 8 + 2(l % 4), the order Q holds.
#pragma unroll
      for (int j = 0; j < Traits::kKSteps / 2; ++j) {
        uint32_t b[kKeysPerWarp / 16][4];
#pragma unroll
        for (int t = 0; t < kKeysPerWarp / 16; ++t) ptx::ldmatrix_x4(b[t], k_addr.at(16 * t, 2 * j));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t a[4];
          ptx::ldmatrix_x4(a, q_addr.at(0, 2 * (2 * j + h)));
#pragma unroll
          for (int t = 0; t < kKeysPerWarp / 16; ++t) {
            uint32_t k0[2], k1[2];
            fp8::f16_pairs(b[t][2 * h], k0[0], k0[1]);
            fp8::f16_pairs(b[t][2 * h + 1], k1[0], k1[1]);
            ptx::mma_m16n8k16<Mma>(s[0][2 * t], a, k0[0], k0[1]);
            ptx::mma_m16n8k16<Mma>(s[0][2 * t + 1], a, k1[0], k1[1]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[0][nt][e] *= qk_factor[e / 2];
    }
    const int col0 = n_block * kBlockN + warp * kKeysPerWarp;
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

    // O += P V over this warp's keys, one k16 step per 16-key group t (P
    // from the S registers).
#pragma unroll
    for (int t = 0; t < kKeysPerWarp / 16; ++t) {
      uint32_t a[4];
      a[0] = ptx::pack2<Mma>(s[0][2 * t][0], s[0][2 * t][1]);
      a[1] = ptx::pack2<Mma>(s[0][2 * t][2], s[0][2 * t][3]);
      a[2] = ptx::pack2<Mma>(s[0][2 * t + 1][0], s[0][2 * t + 1][1]);
      a[3] = ptx::pack2<Mma>(s[0][2 * t + 1][2], s[0][2 * t + 1][3]);
      if constexpr (!kFp8) {
#pragma unroll
        for (int np = 0; np < Traits::kNTilesO / 2; ++np) {
          uint32_t b[4];
          ptx::ldmatrix_x4_trans(b, v_addr.at(16 * t, 2 * np));
          ptx::mma_m16n8k16<Element>(acc_o[0][2 * np], a, b[0], b[1]);
          ptx::mma_m16n8k16<Element>(acc_o[0][2 * np + 1], a, b[2], b[3]);
        }
      } else {
        // A transposing ldmatrix.x4 of V's bytes: matrices (keys 0-7 /
        // 8-15) x (chunks 2j / 2j+1). Lane l gets keys 2(l % 4), +1 of each
        // matrix at columns 2(l / 4), +1 of its chunk: bytes (key0, even
        // column), (key0, odd), (key1, even), (key1, odd). The even columns
        // of chunk c make n8 tile 2c, the odd ones tile 2c + 1, so O's
        // accumulators hold columns 16c + 2n (+1) for tile column n; the
        // merge below puts them back in order.
#pragma unroll
        for (int j = 0; j < Traits::kNTilesO / 4; ++j) {
          uint32_t b[4];
          ptx::ldmatrix_x4_trans(b, v_addr.at(16 * t, 2 * j));
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int c = 2 * j + h;
            uint32_t v0[2], v1[2];  // [even, odd] columns of keys 2(l % 4), +1 and of +8, +9
            fp8::f16_pairs_interleaved(b[2 * h], v0[0], v0[1]);
            fp8::f16_pairs_interleaved(b[2 * h + 1], v1[0], v1[1]);
            ptx::mma_m16n8k16<Mma>(acc_o[0][2 * c], a, v0[0], v1[0]);
            ptx::mma_m16n8k16<Mma>(acc_o[0][2 * c + 1], a, v0[1], v1[1]);
          }
        }
      }
    }
  }

  // Merge the four warps' (max, sum, O) through the now idle ring.
  ptx::cp_async_wait<0>();
  __syncthreads();
  float* merge_o = reinterpret_cast<float*>(smem + Traits::kQBytes);  // [warp][row][head_dim]
  float* merge_m = merge_o + Traits::kNWarps * kBlockM * kHeadDim;     // [warp][row]
  float* merge_l = merge_m + Traits::kNWarps * kBlockM;                // [warp][row]
  float row_sum[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    row_sum[hi] = quad_sum(softmax.l[hi]);
    if (lane % 4 == 0) {
      merge_m[warp * kBlockM + lane / 4 + hi * 8] = softmax.m[hi];
      merge_l[warp * kBlockM + lane / 4 + hi * 8] = row_sum[hi];
    }
  }
  __syncthreads();
  float lse[2];
#pragma unroll
  for (int hi = 0; hi < 2; ++hi) {
    const int row = lane / 4 + hi * 8;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < Traits::kNWarps; ++w) m_all = fmaxf(m_all, merge_m[w * kBlockM + row]);
    // Each warp's maximum scaled as OnlineSoftmax scales it (rounded up), so
    // a weight is exactly 1 for the warp holding the row's maximum and <= 1 else.
    const float m_scaled = m_all == -INFINITY ? 0.f : __fmul_ru(m_all, p.softmax_scale_log2);
    float l_all = 0.f;
#pragma unroll
    for (int w = 0; w < Traits::kNWarps; ++w) {
      // exp2(-inf) = 0 drops warps that saw no visible key.
      l_all += merge_l[w * kBlockM + row] * ptx::exp2_approx(__fmul_ru(merge_m[w * kBlockM + row], p.softmax_scale_log2) - m_scaled);
    }
    const bool empty = l_all == 0.f || m_all == -INFINITY;
    const float mine = ptx::exp2_approx(__fmul_ru(softmax.m[hi], p.softmax_scale_log2) - m_scaled);
    float inv_l;
    ptx::finalize_row(l_all, m_all * p.softmax_scale, inv_l, lse[hi]);
    float factor = empty ? 0.f : mine * inv_l * v_descale;
    if (empty) lse[hi] = -INFINITY;
    if (p.sinks != nullptr && p.num_splits == 1) {
      // The row's query head (rows past row_end are padding of a real head).
      add_sink(p.sinks[head_kv * g + (row_begin + row) % g], factor, lse[hi]);
    }
    if constexpr (!kFp8) {
#pragma unroll
      for (int nt = 0; nt < Traits::kNTilesO; ++nt) {
        float2 val = make_float2(acc_o[0][nt][2 * hi] * factor, acc_o[0][nt][2 * hi + 1] * factor);
        *reinterpret_cast<float2*>(merge_o + (warp * kBlockM + row) * kHeadDim + nt * 8 + (lane % 4) * 2) = val;
      }
    } else {
      // Tiles 2c (even columns) and 2c + 1 (odd) of chunk c: this lane's
      // columns 16c + 4(l % 4) .. +3.
#pragma unroll
      for (int c = 0; c < Traits::kNTilesO / 2; ++c) {
        const float4 val = make_float4(acc_o[0][2 * c][2 * hi] * factor, acc_o[0][2 * c + 1][2 * hi] * factor,
                                       acc_o[0][2 * c][2 * hi + 1] * factor, acc_o[0][2 * c + 1][2 * hi + 1] * factor);
        *reinterpret_cast<float4*>(merge_o + (warp * kBlockM + row) * kHeadDim + c * 16 + (lane % 4) * 4) = val;
      }
    }
  }
  __syncthreads();

  const int heads_q = p.heads_q;
  // Each thread sums 4 consecutive columns of one row over the four warps.
  constexpr int kVecPerRow = kHeadDim / 4;
  for (int idx = tid; idx < kBlockM * kVecPerRow; idx += Traits::kNThreads) {
    const int row = idx / kVecPerRow;
    const int col = (idx % kVecPerRow) * 4;
    const int r = row_begin + row;
    if (r >= row_end) continue;
    float4 sum = *reinterpret_cast<const float4*>(merge_o + row * kHeadDim + col);
#pragma unroll
    for (int w = 1; w < Traits::kNWarps; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(merge_o + (w * kBlockM + row) * kHeadDim + col);
      sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
    }
    const int token = r / g;
    const int head = head_kv * g + r % g;
    if (p.num_splits == 1) {
      if (col >= p.head_dim_v) continue;
      Element* o = static_cast<Element*>(p.o) + seq.o_offset + static_cast<int64_t>(token) * p.o_seq_stride +
                   static_cast<int64_t>(head) * p.o_head_stride + col;
      uint2 packed;
      packed.x = ptx::pack2<Element>(sum.x, sum.y);
      packed.y = ptx::pack2<Element>(sum.z, sum.w);
      *reinterpret_cast<uint2*>(o) = packed;
    } else if (token < p.seqlen_q) {
      const int64_t slot = ((static_cast<int64_t>(split) * p.batch + batch) * heads_q + head) * p.seqlen_q + token;
      *reinterpret_cast<float4*>(p.o_partial + slot * kHeadDim + col) = sum;
    }
  }

  if (warp == 0 && lane % 4 == 0) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int r = row_begin + lane / 4 + hi * 8;
      if (r >= row_end) continue;
      const int token = r / g;
      const int head = head_kv * g + r % g;
      if (p.num_splits == 1) {
        if (p.lse != nullptr) {
          const int64_t at = p.cu_seqlens_q != nullptr
                                 ? static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + seq.q_start + token
                                 : (static_cast<int64_t>(batch) * heads_q + head) * p.seqlen_q + token;
          p.lse[at] = lse[hi];
        }
      } else if (token < p.seqlen_q) {
        p.lse_partial[((static_cast<int64_t>(split) * p.batch + batch) * heads_q + head) * p.seqlen_q + token] =
            lse[hi];
      }
    }
  }
}

}  // namespace flash::decode
