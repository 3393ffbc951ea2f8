// The consumers' main loop of the sm90 kernel: for one tile (64 query rows
// of Q_i per consumer warpgroup), S = Q_i K_j^T by wgmma from shared
// memory, the mask where a block needs it, the online softmax on the fp32
// accumulators, then O += P V_j by wgmma with P straight from registers.
// S_{j+1} is issued together with P_j V_j, so one block's softmax runs
// under the other's tensor-core work; with pingpong (FwdTraits::kPingpong)
// the consumer warpgroups also take turns issuing, so one's softmax
// overlaps the other's GEMMs (docs/perf/sm90-pingpong-and-lazy-max.md).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/constants.h"
#include "../common/fp8.cuh"
#include "../common/mask.cuh"
#include "../common/ptx.cuh"
#include "../common/softmax.cuh"
#include "ptx_sm90.cuh"
#include "smem_layout.cuh"
#include "tile_scheduler.cuh"
#include "wgmma_ops.cuh"

namespace flash::sm90 {

// Pingpong turns: turn w is named barrier kTurn + w, completed by
// warpgroup w (sync) and its predecessor (arrive). The rotation runs on
// across the CTA's tiles, so a warpgroup starts its next tile without
// waiting for the others' epilogues: the last warpgroup opens the very first
// turn and skips only its very last arrive, so every barrier sees matched
// counts. Without pingpong every call is a no-op.
template <bool kEnabled, int kCWG>
struct Turns {
  int wg;
  bool opened = false;

  __device__ __forceinline__ void open_once() {
    if (kEnabled && !opened && wg == kCWG - 1) named_barrier_arrive(named_barrier_id(NamedBarrier::kTurn, 0), 256);
    opened = true;
  }
  __device__ __forceinline__ void begin() const {
    if constexpr (kEnabled) named_barrier_sync(named_barrier_id(NamedBarrier::kTurn, wg), 256);
  }
  __device__ __forceinline__ void end(bool last_of_cta) const {
    if constexpr (kEnabled) {
      if (!(last_of_cta && wg == kCWG - 1)) {
        named_barrier_arrive(named_barrier_id(NamedBarrier::kTurn, (wg + 1) % kCWG), 256);
      }
    }
  }
};

// kCache: K/V come from a KV cache (seqused_k or pages), whose rows past a
// sequence's keys may hold anything, NaN included: the tile's last block
// has those V rows zeroed before P V reads them (zero_v_tail, or by the
// gather itself); their keys are masked like any ragged tail.
//
// kFp8: V widened from an fp8 cache (ConvertProducer) to fp16 whatever
// Element is, K to Traits::Fp8QKElement, or, for bf16 at head dims 128 and
// 256, left e4m3 for an e4m3 Q K^T (kQkE4m3). P V runs on fp16: fp16 rounds P (at
// most 2^8, with the lazy max) at least as finely as bf16 down to 2^-17,
// and within 2^-25 below. Q K^T on fp16 (up to head dim 128): a bf16 Q is
// turned into fp16 in shared memory (convert_q), each row scaled by a
// power of two; the scores are scaled back with K's descale.
//
// Traits::kFp8In (the FP8 prefill, Fp8FwdTraits): Q, K and V^T are e4m3 in
// shared memory. Q K^T runs as e4m3 wgmma k32 steps, P goes to e4m3 in
// registers (convert_p), and P V reads V^T K-major. P's k32 fragment holds
// keys 4q .. 4q + 3 and 16 + 4q .. of row g (lane = 4g + q), where S's
// accumulators hold keys 2q, 2q + 1, 8 + 2q, 9 + 2q, ...: convert_p packs
// the accumulators as they lie, and V^T's columns are keys in the matching
// order (fp8_key_of_column, kernels/sm90/fp8_vt.h).
//
// kUniformQ: the warpgroup's Q address (smem_q_wg) is broadcast from lane
// 0, so that ptxas holds it in a uniform register (q_address).
template <typename Traits, bool kMasked, bool kLeft, bool kScoreMod, bool kCache = false, bool kFp8 = false,
          bool kUniformQ = false>
struct Mainloop {
  using Element = typename Traits::Element;
  using PVElement = std::conditional_t<kFp8, __half, Element>;
  using QKElement = std::conditional_t<kFp8, typename Traits::Fp8QKElement, Element>;
  using Smem = SmemLayout<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kOCols = Traits::kOCols;  // O, and with kRowSumInO the row sums in its last eight columns
  static constexpr bool kPingpong = Traits::template kPingpong<kMasked>;
  // With O staged in its own buffer, Q is free once the tile's last S is done.
  static constexpr bool kEarlyQ = Traits::kSeparateO;
  // A warpgroup passes over the top blocks none of its rows sees
  // (hidden_top_blocks, pass_blocks) in the kernels of 192-row tiles, where
  // a causal tile's top warpgroup ends up to two blocks before its bottom
  // one and a sequence's last tile often has a warpgroup of padding rows;
  // not with a left window edge, nor in the FP8 prefill, whose consumers
  // then spill (docs/perf/sm90-short-calls.md).
  static constexpr bool kPassHidden = Traits::kConsumerWarpgroups == 3 && !kLeft && !Traits::kFp8In;
  // Each wgmma's descriptor as one add on a descriptor built once per GEMM
  // (Q's once per kernel), which keeps a pingpong turn short; head_dim 64
  // rebuilds them (docs/perf/sm90-pingpong-and-lazy-max.md).
  static constexpr bool kDescriptorAdd = kHeadDim != 64;
  // Q's descriptors built again in every issue_qk (from an opaque zero)
  // where, with descriptor adds, the compiler would otherwise hold one per
  // k-step across the key loop and the consumers spill around them: the
  // fp8-cache kernels, the masked KV-cache kernels from head dim 128 (at
  // 256 only the gathering one and those with a left edge or score
  // modifiers), the FP8 prefill's masked hd256 kernels, and hd256's masked
  // 80-key kernels and its windowed score-modifier ones. Elsewhere nothing
  // spills and the descriptors stay where the compiler puts them
  // (docs/perf/sm90-short-calls.md).
  static constexpr bool kFreshQDesc =
      kDescriptorAdd &&
      (kFp8 ||
       (kCache && kMasked && kHeadDim >= 128 && (kHeadDim != 256 || Traits::kGatherKernel || kLeft || kScoreMod)) ||
       (Traits::kFp8In && kMasked && kHeadDim == 256) ||
       (!kCache && !Traits::kFp8In && kHeadDim == 256 && kMasked && (Traits::kBlockN == 80 || (kLeft && kScoreMod))));
  static constexpr bool kFp8In = Traits::kFp8In;
  // An fp8 cache at head dim 128 and up waits for K_j and V_{j-1} before
  // S's wgmma and fences once (docs/perf/sm90-kv-cache.md: +0.5-2% at
  // hd128, +3.5-4% at hd256, -1.5-1.8% on hd64's paged rows; hd192 not
  // measured).
  static constexpr bool kFenceAhead = kFp8 && kHeadDim >= 128;
  // An fp8 cache with bf16 Q at head dims 128 and 256: Q K^T on the e4m3 tensor cores,
  // K as ConvertProducer's copies left it (the upper half of its stage,
  // kColBlocks / 2 column blocks whose 16-byte chunk 4a + 2h + b of column
  // block u holds columns 64 (u + h kColBlocks / 2) + 16 (2a + b)), Q in
  // two e4m3 parts in the same order (convert_q). Two
  // e4m3 k32 GEMMs take the tensor time of one 16-bit one, and K is never
  // widened.
  static constexpr bool kQkE4m3 = kFp8 && kCache && kFp8CacheQkE4m3<Traits>;
  static_assert(!kFenceAhead || kCache, "fp8 caches run on the KV-cache kernel");
  using STile = float[kBlockN / 2];
  using PTile = uint32_t[kBlockN / (kFp8In ? 32 : 16)][4];
  using OTile = float[kOCols / 2];

  const Smem& smem;
  const detail::FwdParams& p;
  int wg;          // consumer index: rows [64 wg, 64 wg + 64) of a tile
  int warp_in_wg;  // 16 rows each
  int lane;
  uint32_t smem_q_wg;
  uint64_t desc_q;
  bool gathered;  // kCache: K/V written by the producer's threads (GatherProducer, ConvertProducer), not TMA

  __device__ __forceinline__ static uint32_t q_address(const Smem& smem_, int wg_) {
    const uint32_t a = smem_.q() + wg_ * kWarpgroupRows * kSwizzleBytes;
    if constexpr (kUniformQ) return __shfl_sync(0xffffffffu, a, 0);
    return a;
  }
  __device__ __forceinline__ Mainloop(const Smem& smem_, const detail::FwdParams& p_, int wg_, bool gathered_ = false)
      : smem(smem_),
        p(p_),
        wg(wg_),
        warp_in_wg((threadIdx.x / 32) % 4),
        lane(threadIdx.x % 32),
        smem_q_wg(q_address(smem_, wg_)),
        desc_q(smem_descriptor(smem_q_wg, 0)),
        gathered(gathered_) {}

  // The per-element mask: bit words in masked kernels without a left edge
  // or a KV cache (causal and right-window calls; their epilogue reads the
  // varlen LSE offset again to free the register the words need). The
  // per-column form elsewhere: with a left edge, in the KV-cache kernels
  // (whose hd64 consumers would hold one register more than they have),
  // for the sequence tail of unmasked kernels, and in the FP8 prefill,
  // whose kernels with the words are not measured yet.
  static constexpr bool kMaskWords = kMasked && !kLeft && !kCache && !kFp8In;

  // ALiBi on the tensor cores (Traits::kAlibiCausal: the ALiBi kernel at
  // head dim 64 for causal calls, with or without a left window edge,
  // without a softcap or an LSE, dense K/V). Every
  // visible key j of row i lies left of the row's diagonal i + d, so the
  // bias -slope * (i + d - j) is a row offset (OnlineSoftmax's shift) plus
  // a * k, k = j's place in its block and a = slope / softmax_scale. One
  // more k16 step of Q K^T adds a * k, both operands in spare columns of
  // the ones block (P V's row sums read only its columns 0-7):
  //   A: a = hi + mid + lo in bf16, columns 48-50 of an 8-row atom per
  //      consumer warpgroup (rows 8 wg to 8 wg + 7, written once a tile by
  //      write_alibi_a); the descriptor's 8-row stride is 0, so all 64 of
  //      the warpgroup's rows read that atom;
  //   B: k in columns 16-18 of row k (fwd_kernel writes them).
  // The three products are exact in float32 and their sum is a * k to
  // within float32's rounding. The step is a bf16 wgmma whatever Element
  // is (it reads only these columns): fp16 would overflow at a >= 65520.
  static constexpr bool kAlibiMma = Traits::kAlibiCausal;
  static_assert(!kAlibiMma || (kMasked && kScoreMod && Traits::kRowSumInO && !Traits::kLseSums && !kCache && !kFp8In),
                "ALiBi's tensor-core form: the ALiBi kernel at head dim 64, without float32 sums");
  using AlibiElement = __nv_bfloat16;
  static constexpr int kAlibiKeyColumn = 16;    // k
  static constexpr int kAlibiSlopeColumn = 48;  // a's three parts

  // Writes this warpgroup's A atom for slope a (per key, in raw score
  // units). Each warp writes the same bytes and fences its own stores
  // before its wgmma reads them. The previous tile's steps are done: every
  // S is waited for before its softmax.
  __device__ __forceinline__ void write_alibi_a(float a) const {
    using E = AlibiElement;
    if (lane < 16) {
      const float hi = static_cast<float>(static_cast<E>(a));
      const float mid = static_cast<float>(static_cast<E>(a - hi));
      const float lo = a - hi - mid;
      const int r = lane / 2, logical = kAlibiSlopeColumn / 8 + lane % 2;
      const uint4 v = lane % 2 == 0 ? make_uint4(ptx::pack2<E>(hi, mid), ptx::pack2<E>(lo, 0.f), 0u, 0u)
                                    : make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(smem.ones_bytes() + (wg * 8 + r) * kSwizzleBytes + (logical ^ r) * 16) = v;
    }
    fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
    __syncwarp();
  }
  // How many of a block's n8 tiles, from its first key col0, hold a key
  // that some row of the warp sees: up to the warp's largest limit
  // (warp-uniform, a REDUX).
  __device__ __forceinline__ static int live_tiles(const RowRange<1>& ranges, int col0) {
    const int limit = __reduce_max_sync(0xffffffffu, max(ranges.limit[0][0], ranges.limit[0][1]));
    return min(max(limit - col0 + 7, 0) / 8, kBlockN / 8);
  }
  template <typename Frag>
  __device__ __forceinline__ void mask(Frag& s_frag, const RowRange<1>& ranges, int col0) const {
    if constexpr (!kMaskWords) {
      apply_mask<kLeft>(s_frag, ranges, col0, lane);
    } else {
      apply_right_mask_words(s_frag, ranges, col0, lane);
    }
  }

  // Waits for the CTA's j-th K or V block. Rows gathered with cp.async, or
  // widened from fp8 by the producer's stores, are generic-proxy writes:
  // the fence makes them visible to wgmma's async proxy reads.
  __device__ __forceinline__ void wait_kv(Barrier full, int j) const {
    mbarrier_wait(smem.bar(full, Smem::stage_of(j)), Smem::parity_of(j));
    if constexpr (kCache) {
      if (gathered) fence_proxy_async_smem();
    }
  }

  // S = Q_i K_j^T: both operands K-major; K advances 16 elements (32 bytes)
  // inside a 128-byte swizzle row, then to the next column block.
  // kAlibiMma: one more step adds a * k (the ones block's columns).
  __device__ __forceinline__ void issue_qk(int stage, STile& s) const {
    const uint64_t desc_k = smem_descriptor(smem.k(stage), 0);
    const uint64_t desc_q = kFreshQDesc ? this->desc_q + ptx::opaque_zero() : this->desc_q;
    if constexpr (kQkE4m3) {
      // S = Q_hi K^T + Q_lo K^T: Q_hi in Q's first kColBlocks / 2 column
      // blocks, Q_lo in the rest, K in its stage's upper half; 32 one-byte
      // elements (32 bytes) a step.
      constexpr int kGroups = Traits::kColBlocks / 2;
      const uint64_t desc_k8 = smem_descriptor(smem.k(stage) + kGroups * kBlockN * kSwizzleBytes, 0);
#pragma unroll
      for (int part = 0; part < 2; ++part) {
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 32; ++kk) {
          const uint32_t q_offset = (part * kGroups + kk / 4) * kBlockM * kSwizzleBytes + (kk % 4) * 32;
          const uint32_t k_offset = (kk / 4) * kBlockN * kSwizzleBytes + (kk % 4) * 32;
          wgmma_ss_e4m3<kBlockN>(s, smem_descriptor_at(desc_q, q_offset), smem_descriptor_at(desc_k8, k_offset),
                                 part > 0 || kk > 0 ? 1 : 0);
        }
      }
    } else if constexpr (kFp8In) {
      // 32 one-byte elements (32 bytes) a step: the same byte offsets.
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 32; ++kk) {
        const uint32_t q_offset = (kk / 4) * kBlockM * kSwizzleBytes + (kk % 4) * 32;
        const uint32_t k_offset = (kk / 4) * kBlockN * kSwizzleBytes + (kk % 4) * 32;
        wgmma_ss_e4m3<kBlockN>(s, smem_descriptor_at(desc_q, q_offset), smem_descriptor_at(desc_k, k_offset),
                               kk > 0 ? 1 : 0);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t q_offset = (kk / 4) * kBlockM * kSwizzleBytes + (kk % 4) * 32;
        const uint32_t k_offset = (kk / 4) * kBlockN * kSwizzleBytes + (kk % 4) * 32;
        if constexpr (kDescriptorAdd) {
          wgmma_ss<kBlockN, 0, QKElement>(s, smem_descriptor_at(desc_q, q_offset),
                                          smem_descriptor_at(desc_k, k_offset), kk > 0 ? 1 : 0);
        } else {
          wgmma_ss<kBlockN, 0, QKElement>(s, smem_descriptor(smem_q_wg + q_offset, 0),
                                          smem_descriptor(smem.k(stage) + k_offset, 0), kk > 0 ? 1 : 0);
        }
      }
      if constexpr (kAlibiMma) {
        // Both descriptors are built again at each use from an opaque zero:
        // held across the key loop they cost the 192-row kernel spills.
        constexpr uint64_t kStrideField = uint64_t{0x3FFF} << 32;  // the 8-row stride: 0, one atom for 64 rows
        const uint32_t ones = smem.ones() + ptx::opaque_zero();
        const uint64_t desc_a =
            smem_descriptor(ones + wg * 8 * kSwizzleBytes + kAlibiSlopeColumn * sizeof(AlibiElement), 0) & ~kStrideField;
        wgmma_ss<kBlockN, 0, AlibiElement>(s, desc_a, smem_descriptor(ones + kAlibiKeyColumn * sizeof(AlibiElement), 0),
                                           1);
      }
    }
    wgmma_commit();
  }

  // O += P V_j: V is N-major for this GEMM (keys are rows, head_dim is
  // contiguous); 16 keys are 16 swizzled rows, 2048 bytes. With kRowSumInO
  // the second column block is the ones block, however far from this stage it lies.
  __device__ __forceinline__ uint32_t v_lead_bytes(int stage) const {
    return Traits::kRowSumInO ? smem.ones() - smem.v(stage) : kBlockN * kSwizzleBytes;
  }
  __device__ __forceinline__ void issue_pv(int stage, const PTile& pa, OTile& o) const {
    if constexpr (kFp8In) {
      // V^T: kHeadDim rows (P V's N; with kRowSumInO eight rows of ones
      // after them, kVtRows in all) of kBlockN keys (its K), K-major, in
      // boxes of kVtBoxCols keys, each row one swizzle row of the box; 32
      // keys a step.
      constexpr int kBoxCols = Traits::kVtBoxCols;
      const uint64_t desc_vt = smem_descriptor_kmajor<kBoxCols>(smem.v(stage));
#pragma unroll
      for (int kk = 0; kk < kBlockN / 32; ++kk) {
        const uint32_t offset = (kk * 32 / kBoxCols) * Traits::kVtRows * kBoxCols + (kk * 32) % kBoxCols;
        wgmma_rs_e4m3<kOCols>(o, pa[kk], smem_descriptor_at(desc_vt, offset), 1);
      }
    } else {
      const uint64_t desc_v = smem_descriptor(smem.v(stage), v_lead_bytes(stage));
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        if constexpr (kDescriptorAdd) {
          wgmma_rs<kOCols, 1, PVElement>(o, pa[kk], smem_descriptor_at(desc_v, kk * 16 * kSwizzleBytes), 1);
        } else {
          wgmma_rs<kOCols, 1, PVElement>(o, pa[kk], smem_descriptor(smem.v(stage) + kk * 16 * kSwizzleBytes,
                                                                    v_lead_bytes(stage)),
                                         1);
        }
      }
    }
    wgmma_commit();
  }

  // The tile row of this thread's accumulator row `hi` (0: lane / 4, 1: 8 below).
  __device__ __forceinline__ int row(const Tile& tile, int hi) const {
    return tile.row_begin + wg * kWarpgroupRows + warp_in_wg * 16 + lane / 4 + hi * 8;
  }

  // The keys [begin, limit) this thread's two rows see, computed once per tile.
  __device__ __forceinline__ RowRange<1> row_ranges(const Tile& tile) const {
    const WindowMask<kMasked, kLeft> mask(tile.len_q, tile.len_k, p.window_left, p.window_right);
    RowRange<1> r;
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) mask.range_of(row(tile, hi), &r.begin[0][hi], &r.limit[0][hi]);
    return r;
  }

  // ALiBi's -slope / softmax_scale for the tile's head (0 when off), read once per tile.
  __device__ __forceinline__ float alibi_neg_slope(const Tile& tile) const {
    if constexpr (kScoreMod) {
      if (p.alibi_slopes != nullptr) return ScoreMod<true>(p).neg_slope(tile.head);
    }
    return 0.f;
  }

  // The score modifiers (softcap, ALiBi with `alibi_neg` from
  // alibi_neg_slope()), the mask (only on blocks that need it), then the
  // online softmax. Returns whether O must be rescaled by `correction`:
  // with the lazy max (Traits::kLazyMax) most blocks leave the max, and O,
  // alone.
  // `scale_log2`: the factor of raw scores in exp2 units (p.softmax_scale_log2,
  // times the FP8 prefill's descales).
  // The score-modifier kernels' mask and softmax update on scores with a
  // row offset `shift`; kLive as in softmax_step's plain path.
  template <bool kLive, typename Frag>
  __device__ __forceinline__ bool shifted_update(const Tile& tile, const RowRange<1>& ranges, Frag& s_frag, int n_block,
                                                 OnlineSoftmax<1>& softmax, float (&correction)[2], float scale_log2,
                                                 const float (&shift)[2]) const {
    constexpr bool kChunked = kLive && kMaskWords;
    int live = kBlockN / 8;
    if (tile.needs_mask(n_block)) {
      mask(s_frag, ranges, n_block * kBlockN);
      if constexpr (kChunked) live = live_tiles(ranges, n_block * kBlockN);
    }
    return softmax.template update_shifted<Traits::kLazyMax, Traits::kLseSums, true, 0, OnlineSoftmax<1>::kLazyLog2,
                                           kBlockN / 8, kChunked>(s_frag, scale_log2, correction, shift, live);
  }

  template <bool kLive = false>
  __device__ __forceinline__ bool softmax_step(const Tile& tile, const RowRange<1>& ranges, float alibi_neg, STile& s,
                                               int n_block, OnlineSoftmax<1>& softmax, float (&correction)[2],
                                               float scale_log2) const {
    auto& s_frag = *reinterpret_cast<float(*)[1][kBlockN / 8][4]>(&s);
    if constexpr (kAlibiMma) {
      // S holds a * k (issue_qk); the row offset neg * (i + d - the
      // block's first key) is left, i + d + 1 being the row's key limit
      // (clamped only in rows that see no key or lie past the queries).
      // Exact in float below 2^24.
      float shift[2];
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        shift[hi] = alibi_neg * static_cast<float>(ranges.limit[0][hi] - 1 - n_block * kBlockN);
      }
      return shifted_update<kLive>(tile, ranges, s_frag, n_block, softmax, correction, scale_log2, shift);
    }
    if constexpr (kScoreMod) {
      // ALiBi's bias leaves part of itself in `shift`, a row offset (ScoreMod::apply_shifted).
      float shift[2];
      ScoreMod<true> mods(p);
      // The score-modifier kernels without a left window edge serve only
      // ALiBi calls without a softcap (launch.cuh, run_candidate).
      if constexpr (!kLeft) mods.prescale = 0.f;
      mods.apply_shifted(
          s_frag, n_block * kBlockN, lane, [&](int, int hi) { return row(tile, hi) + tile.len_k - tile.len_q; },
          alibi_neg, shift);
      return shifted_update<kLive>(tile, ranges, s_frag, n_block, softmax, correction, scale_log2, shift);
    } else if constexpr (kMaskWords) {
      // kLive (the tile's first block, where a causal warp's diagonal
      // lies): the n8 tiles past the warp's last visible key, in groups of
      // four, skip the softmax (OnlineSoftmax::update_live). Not in the
      // steady state's blocks: there the groups' branches would split every
      // block's softmax into basic blocks, and a second copy of it spills.
      int live = kBlockN / 8;
      if (tile.needs_mask(n_block)) {
        mask(s_frag, ranges, n_block * kBlockN);
        if constexpr (kLive) live = live_tiles(ranges, n_block * kBlockN);
      }
      if constexpr (kLive) {
        return softmax
            .template update_live<Traits::kLazyMax, Traits::kLseSums, Traits::kPOffsetLog2, Traits::kLazyLog2>(
                s_frag, scale_log2, correction, live);
      }
      return softmax.template update<Traits::kLazyMax, Traits::kLseSums, Traits::kPOffsetLog2, Traits::kLazyLog2>(
          s_frag, scale_log2, correction);
    } else {
      if (tile.needs_mask(n_block)) mask(s_frag, ranges, n_block * kBlockN);
      return softmax.template update<Traits::kLazyMax, Traits::kLseSums, Traits::kPOffsetLog2, Traits::kLazyLog2>(
          s_frag, scale_log2, correction);
    }
  }

  // P as the register A operand: per 16 keys, two adjacent n8 fragments.
  __device__ __forceinline__ static void convert_p(const STile& s, PTile& pa) {
    if constexpr (kFp8In) {
      // Per 32 keys (four n8 accumulator fragments, 16 floats: fragment f's
      // row g pair at 4f, 4f + 1, row g + 8's at 4f + 2, 4f + 3): register
      // 0 row g, 1 row g + 8, each from fragments 0 and 1; 2 and 3 the same
      // from fragments 2 and 3.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 32; ++kk) {
        const float* x = s + 16 * kk;
        pa[kk][0] = ptx::pack4_e4m3(x[0], x[1], x[4], x[5]);
        pa[kk][1] = ptx::pack4_e4m3(x[2], x[3], x[6], x[7]);
        pa[kk][2] = ptx::pack4_e4m3(x[8], x[9], x[12], x[13]);
        pa[kk][3] = ptx::pack4_e4m3(x[10], x[11], x[14], x[15]);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) pa[kk][r] = ptx::pack2<PVElement>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
      }
    }
  }

  __device__ __forceinline__ void release_q() const { consumer_release(smem, Barrier::kQEmpty, 0, lane); }

  // How many of the tile's blocks, from the top (the first visited), no row
  // of this warpgroup sees: all of them for a warpgroup of padding rows
  // (past len_q, or before row 0 in a shifted block 0), and under a causal
  // or right-window mask the blocks right of its last row's limit (a
  // 192-row tile's top warpgroup ends up to two 128-key blocks before its
  // bottom one). Blocks left of the first key its rows see are not counted:
  // they are visited last.
  __device__ __forceinline__ int hidden_top_blocks(const Tile& tile) const {
    const int first = tile.row_begin + wg * kWarpgroupRows;
    const int row_first = max(first, 0);
    const int row_last = min(first + kWarpgroupRows, tile.len_q) - 1;
    if (row_last < row_first) return tile.n_blocks;
    const WindowMask<kMasked, kLeft> mask(tile.len_q, tile.len_k, p.window_left, p.window_right);
    int begin, end;
    mask.template visible_blocks<kBlockN>(row_first, row_last, &begin, &end);
    return min(max(tile.n_first + tile.n_blocks - end, 0), tile.n_blocks);
  }

  // Passes over the tile's first `hidden` blocks (hidden_top_blocks)
  // without a GEMM or a softmax: takes their pingpong turns, so that the
  // rotation's count stays every warpgroup's, and releases their stages.
  // Each release waits for its block to land first: an arrival before the
  // producer has refilled a stage would count toward its previous block.
  template <typename TurnsT>
  __device__ __forceinline__ void pass_blocks(int hidden, int kv_count, const TurnsT& turns, bool last_of_cta) const {
#pragma unroll 1
    for (int j = 0; j < hidden; ++j) {
      const int at = kv_count + j;
      wait_kv(Barrier::kKFull, at);
      turns.begin();
      turns.end(last_of_cta && j == hidden - 1);
      consumer_release(smem, Barrier::kKEmpty, Smem::stage_of(at), lane);
      wait_kv(Barrier::kVFull, at);
      consumer_release(smem, Barrier::kVEmpty, Smem::stage_of(at), lane);
    }
  }

  // KV caches: zeroes the rows of V past the sequence's last key in the
  // tile's last block (the first one visited, the CTA's kv_count-th), so
  // that P's zeros there never meet a NaN. Every consumer warpgroup writes
  // the same zeros before its own P V on the block; whole 128-byte rows, so
  // the swizzle does not matter.
  __device__ __forceinline__ void zero_v_tail(const Tile& tile, int kv_count) const {
    if (gathered) return;  // the gather (or the fp8 copies) zero-filled them
    const int block = tile.n_first + tile.n_blocks - 1;
    const int valid = tile.len_k - block * kBlockN;
    if (valid >= kBlockN) return;
    const int stage = Smem::stage_of(kv_count);
    mbarrier_wait(smem.bar(Barrier::kVFull, stage), Smem::parity_of(kv_count));
    constexpr int kChunksPerRow = Traits::kColBlocks * (kSwizzleBytes / 16);
    unsigned char* const v = smem.ptr + (smem.v(stage) - smem.base);
    const int chunks = (kBlockN - valid) * kChunksPerRow;
    for (int c = threadIdx.x % kWarpgroupThreads; c < chunks; c += kWarpgroupThreads) {
      const int r = valid + c / kChunksPerRow;
      const int cb = c % kChunksPerRow / (kSwizzleBytes / 16);
      const int chunk = c % (kSwizzleBytes / 16);
      *reinterpret_cast<uint4*>(v + cb * kBlockN * kSwizzleBytes + r * kSwizzleBytes + chunk * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
    named_barrier_sync(named_barrier_id(NamedBarrier::kEpilogue, wg), kWarpgroupThreads);
  }

  // S times each row's factor (an fp8 cache's K descale, and convert_q's
  // unscaling), before the score modifiers and the mask. Accumulator
  // element i of an n8 fragment's four lies on row (i / 2) % 2.
  __device__ __forceinline__ static void scale_scores(STile& s, const float (&row_scale)[2]) {
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) s[i] *= row_scale[(i / 2) % 2];
  }

  // The 16-bit Element code in the low half of `bits` as a float.
  __device__ __forceinline__ static float to_float_lo(uint32_t bits) {
    if constexpr (std::is_same_v<Element, __half>) {
      return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    } else {
      return __uint_as_float(bits << 16);
    }
  }
  // Sixteen Element values (chunks a then b, eight each) times `up`, as
  // e4m3 x = hi + lo (convert_q, kQkE4m3): byte i of hi and lo from value i.
  __device__ __forceinline__ static void split_e4m3(const uint4& a, const uint4& b, float up, uint4& hi, uint4& lo) {
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t h[4], l[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float x[4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        x[2 * j] = to_float_lo(w[2 * q + j]) * up;
        x[2 * j + 1] = to_float_lo(w[2 * q + j] >> 16) * up;
      }
      h[q] = ptx::pack4_e4m3(x[0], x[1], x[2], x[3]);
      const uint32_t p01 = fp8::f16_pair<false>(h[q]), p23 = fp8::f16_pair<true>(h[q]);
      const float2 h01 = __half22float2(*reinterpret_cast<const __half2*>(&p01));
      const float2 h23 = __half22float2(*reinterpret_cast<const __half2*>(&p23));
      l[q] = ptx::pack4_e4m3(x[0] - h01.x, x[1] - h01.y, x[2] - h23.x, x[3] - h23.y);
    }
    hi = make_uint4(h[0], h[1], h[2], h[3]);
    lo = make_uint4(l[0], l[1], l[2], l[3]);
  }

  // An fp8 cache's Q K^T runs on fp16 (kFp8): a bf16 Q is converted in
  // place, this warpgroup's 64 rows, once the tile's Q has landed. Row r is
  // multiplied by 2^e_r, putting its largest magnitude in [2^14, 2^15), so
  // every element at least 2^-31 of the row's largest converts exactly
  // (fp16 keeps bf16's 8 significant bits from 2^-17 up; smaller ones are
  // rounded to fp16's subnormal steps). `row_scale` (k_scale on entry) is
  // multiplied by 2^-e_r of the thread's two accumulator rows. Two threads
  // a row, each half its 16-byte chunks (whole 128-byte lines per column
  // block, so the swizzle does not matter; it is elementwise).
  //
  // kQkE4m3: Q (bf16) becomes two e4m3 tiles in its own buffer, row
  // r times 2^e_r, putting its largest magnitude in [2^7, 2^8): Q_hi =
  // e4m3(x), Q_lo = e4m3(x - Q_hi), so x = Q_hi + Q_lo exactly for every
  // element at least about 2^-10 of the row's largest (its 8 significant
  // bits, 4 in each part, the low part still a normal e4m3); smaller ones
  // keep fewer low bits. Columns in K's order (kQkE4m3): the e4m3 chunks
  // 4a + 2h + b (b = 0, 1) of group u come from Q's column block
  // u + h kColBlocks / 2, its 16-byte chunks 4a + 2b and 4a + 2b + 1, and
  // go to the same row's slots 4a + 2h + b of blocks u (Q_hi) and
  // u + kColBlocks / 2 (Q_lo), so each (group, a) rewrites exactly the 128
  // bytes it reads. Two threads a row, each half the row's (group, a).
  __device__ __forceinline__ void convert_q(float (&row_scale)[2]) const {
    if constexpr (kQkE4m3) {
      constexpr int kGroups = Traits::kColBlocks / 2;
      constexpr int kMine = kGroups;  // of the row's 2 kGroups (group, a)
      const int t = threadIdx.x % kWarpgroupThreads;
      const int r = t / 2;
      unsigned char* const q = smem.ptr + (smem_q_wg - smem.base) + r * kSwizzleBytes;
      // Q's 16-byte chunk `c` of column block `cb` in this row.
      auto at = [&](int cb, int c) {
        return reinterpret_cast<uint4*>(q + cb * kBlockM * kSwizzleBytes + ((c ^ (r % 8)) * 16));
      };
      auto group = [&](int i) { return ((t % 2) * kMine + i) / 2; };
      auto half = [&](int i) { return ((t % 2) * kMine + i) % 2; };
      uint32_t m = 0;  // the largest |x| of the row's 16-bit codes, per half (bf16 and fp16 order alike)
#pragma unroll
      for (int i = 0; i < kMine; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint4 w = *at(group(i) + (j / 4) * kGroups, 4 * half(i) + j % 4);
          m = __vmaxu2(m, __vmaxu2(__vmaxu2(w.x & 0x7fff7fffu, w.y & 0x7fff7fffu),
                                   __vmaxu2(w.z & 0x7fff7fffu, w.w & 0x7fff7fffu)));
        }
      }
      m = max(m & 0xffffu, m >> 16);
      m = max(m, __shfl_xor_sync(0xffffffffu, m, 1));
      const float largest = to_float_lo(m);
      // Its biased exponent E: [2^(E-127), 2^(E-126)), so 2^(134 - E) puts
      // it in [2^7, 2^8); at most 2^126 for all-zero or tiny rows.
      const int e = min(134 - static_cast<int>(__float_as_uint(largest) >> 23), 126);
      const float up = __int_as_float((127 + e) << 23);
      const float down = __int_as_float((127 - e) << 23);
#pragma unroll
      for (int i = 0; i < kMine; ++i) {
        const int u = group(i), a = half(i);
        // e4m3 chunk 4a + 2h + b: block u + h kGroups's chunks 4a + 2b, 4a + 2b + 1.
        uint4 in[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) in[j] = *at(u + (j / 4) * kGroups, 4 * a + j % 4);
        uint4 hi[4], lo[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) split_e4m3(in[2 * k], in[2 * k + 1], up, hi[k], lo[k]);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          *at(u, 4 * a + k) = hi[k];
          *at(u + kGroups, 4 * a + k) = lo[k];
        }
      }
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) row_scale[hi] *= __shfl_sync(0xffffffffu, down, 2 * (lane / 4) + 16 * hi);
      fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
      named_barrier_sync(named_barrier_id(NamedBarrier::kEpilogue, wg), kWarpgroupThreads);
    } else if constexpr (kFp8 && std::is_same_v<QKElement, __half> && !std::is_same_v<Element, __half>) {
      constexpr int kMine = kHeadDim / 16;  // of the row's kHeadDim / 8 chunks
      const int t = threadIdx.x % kWarpgroupThreads;
      unsigned char* const q = smem.ptr + (smem_q_wg - smem.base) + (t / 2) * kSwizzleBytes;
      auto chunk = [&](int c) {
        const int pc = (t % 2) * kMine + c;
        return reinterpret_cast<uint4*>(q + (pc / 8) * kBlockM * kSwizzleBytes + (pc % 8) * 16);
      };
      uint32_t m = 0;  // the largest |x| of the row's bf16 bits, per half
#pragma unroll
      for (int c = 0; c < kMine; ++c) {
        const uint4 w = *chunk(c);
        m = __vmaxu2(m, __vmaxu2(__vmaxu2(w.x & 0x7fff7fffu, w.y & 0x7fff7fffu),
                                 __vmaxu2(w.z & 0x7fff7fffu, w.w & 0x7fff7fffu)));
      }
      m = max(m & 0xffffu, m >> 16);
      m = max(m, __shfl_xor_sync(0xffffffffu, m, 1));
      const int e = fp8::fp16_row_exponent(m);
      const float up = __int_as_float((127 + e) << 23);
      const float down = __int_as_float((127 - e) << 23);
#pragma unroll
      for (int c = 0; c < kMine; ++c) {
        uint4 w = *chunk(c);
        uint32_t* x = reinterpret_cast<uint32_t*>(&w);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const __half2 h =
              __floats2half2_rn(__uint_as_float(x[j] << 16) * up, __uint_as_float(x[j] & 0xffff0000u) * up);
          x[j] = *reinterpret_cast<const uint32_t*>(&h);
        }
        *chunk(c) = w;
      }
      // Row R of the 64 is converted by threads 2R, 2R + 1: for accumulator
      // row 16 w + l / 4 + 8 hi, lane 2 (l / 4) + 16 hi of warp w.
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) row_scale[hi] *= __shfl_sync(0xffffffffu, down, 2 * (lane / 4) + 16 * hi);
      fence_proxy_async_smem();  // generic-proxy stores, read by wgmma
      named_barrier_sync(named_barrier_id(NamedBarrier::kEpilogue, wg), kWarpgroupThreads);
    }
  }

  // One tile with at least one visible block: O (unnormalised) and the
  // softmax statistics over its blocks, visited from the last down. `ranges`
  // is row_ranges(tile); the tile's K/V blocks are the CTA's kv_count-th onwards. `last_of_cta`: no
  // later tile of this CTA has work (ends the pingpong rotation).
  // kScaleScores: S is multiplied by `row_scale` (scale_scores); with
  // kFp8In the scores keep their raw values and row_scale[0] (the tile's
  // q and k descales) joins the softmax's scale instead, one multiply a
  // tile rather than one a score.
  template <bool kScaleScores, typename TurnsT>
  __device__ __forceinline__ void run_tile(const Tile& tile, const RowRange<1>& ranges, int kv_count, OTile& o,
                                           OnlineSoftmax<1>& softmax, const TurnsT& turns, bool last_of_cta,
                                           const float (&row_scale)[2]) const {
    static_assert(!(kFp8In && kScaleScores), "the FP8 prefill folds its descales into the softmax's scale");
    const float scale_log2 = kFp8In ? p.softmax_scale_log2 * row_scale[0] : p.softmax_scale_log2;
    auto& o_frag = *reinterpret_cast<float(*)[1][kOCols / 8][4]>(&o);
    const int n = tile.n_blocks;
    STile s;
    float correction[2];
    PTile pa;

    // Read before the first S, whose GEMM hides the load.
    const float alibi_neg = alibi_neg_slope(tile);
    if constexpr (kAlibiMma) write_alibi_a(-alibi_neg);

    // The first block: S only.
    wait_kv(Barrier::kKFull, kv_count);
    turns.begin();
    wgmma_fence();
    issue_qk(Smem::stage_of(kv_count), s);
    turns.end(last_of_cta && n == 1);
    wgmma_wait<0>();
    fence_registers(s);
    consumer_release(smem, Barrier::kKEmpty, Smem::stage_of(kv_count), lane);
    if (kEarlyQ && n == 1) release_q();
    if constexpr (kScaleScores) scale_scores(s, row_scale);
    bool rescale_o =
        softmax_step<true>(tile, ranges, alibi_neg, s, tile.n_first + n - 1, softmax, correction, scale_log2);
    convert_p(s, pa);
    if constexpr (kCache) zero_v_tail(tile, kv_count);

    // Steady state: issue S_i = Q K_i^T and O += P_{i-1} V_{i-1} together,
    // then run S_i's softmax while P V is still on the tensor cores.
    for (int i = 1; i < n; ++i) {
      const int cur = kv_count + i;
      const int prev = cur - 1;
      // kFenceAhead: K_cur and V_prev are waited for and fenced once, ahead
      // of both GEMMs, so the fence (MEMBAR.ALL.CTA in SASS) never sits
      // between S's wgmma and P V's.
      if constexpr (kFenceAhead) {
        mbarrier_wait(smem.bar(Barrier::kKFull, Smem::stage_of(cur)), Smem::parity_of(cur));
        mbarrier_wait(smem.bar(Barrier::kVFull, Smem::stage_of(prev)), Smem::parity_of(prev));
        if (gathered) fence_proxy_async_smem();
      } else {
        wait_kv(Barrier::kKFull, cur);
      }
      turns.begin();
      wgmma_fence();
      issue_qk(Smem::stage_of(cur), s);
      if constexpr (!kFenceAhead) wait_kv(Barrier::kVFull, prev);
      wgmma_fence();
      issue_pv(Smem::stage_of(prev), pa, o);
      turns.end(last_of_cta && i == n - 1);
      wgmma_wait<1>();
      fence_registers(s);
      consumer_release(smem, Barrier::kKEmpty, Smem::stage_of(cur), lane);
      if (kEarlyQ && i == n - 1) release_q();
      if constexpr (kScaleScores) scale_scores(s, row_scale);
      rescale_o = softmax_step(tile, ranges, alibi_neg, s, tile.n_first + n - 1 - i, softmax, correction, scale_log2);
      // O takes block i's max before P_i V_i adds to it, once P_{i-1}
      // V_{i-1} is done: outside the pingpong turn (after the first block O
      // is still zero, so that block needs none).
      constexpr bool kRescaleFirst = kFp8In && !Traits::kLazyMax;
      if constexpr (kRescaleFirst) {
        // Only in warps where some row's correction is not exactly 1
        // (multiplying by 1 is exact, so skipping it changes nothing). The
        // branch also ends the softmax's basic block: ptxas hoists a wgmma
        // wait to the top of its block, and there it would wait for P V
        // before the exponentials (docs/perf/fp8-prefill-qkv.md). The
        // 16-bit kernels measured no better with it (hd128 2% worse), and
        // the FP8 head dim 256 (lazy max) measured level.
        if (__any_sync(0xffffffffu, rescale_o && (correction[0] != 1.f || correction[1] != 1.f))) {
          wgmma_wait<0>();
          fence_registers(o);
          OnlineSoftmax<1>::rescale(o_frag, correction);
        }
      }
      wgmma_wait<0>();
      fence_registers(o);
      consumer_release(smem, Barrier::kVEmpty, Smem::stage_of(prev), lane);
      convert_p(s, pa);
      if constexpr (!kRescaleFirst) {
        if (rescale_o) OnlineSoftmax<1>::rescale(o_frag, correction);
      }
    }

    // The last block's P V.
    const int last = kv_count + n - 1;
    wait_kv(Barrier::kVFull, last);
    wgmma_fence();
    issue_pv(Smem::stage_of(last), pa, o);
    wgmma_wait<0>();
    fence_registers(o);
    consumer_release(smem, Barrier::kVEmpty, Smem::stage_of(last), lane);
  }
};

}  // namespace flash::sm90
