// Compile-time shape of the sm90 (wgmma + TMA + warp specialisation)
// forward kernel. Everything is derived from four choices (and whether the
// softmax keeps float32 row sums) and asserted.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "../common/constants.h"
#include "fp8_vt.h"

namespace flash::sm90 {

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, typename Element_, bool kLseSums_ = true,
          bool kGatherKernel_ = false, bool kCompactK_ = false>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;  // D
  static constexpr int kBlockM = kBlockM_;    // query rows per CTA; 64 per consumer warpgroup
  static constexpr int kBlockN = kBlockN_;    // key rows per K_j / V_j block (the N of S's wgmma)
  static constexpr int kStages = kStages_;    // depth of the K and V shared-memory rings

  // Warpgroup 0 is the producer (one thread issues every TMA load); the
  // others are consumers, each owning 64 query rows of the block.
  static constexpr int kConsumerWarpgroups = kBlockM / 64;
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
  static constexpr int kNThreads = 128 * (kConsumerWarpgroups + 1);
  // setmaxnreg: the producer gives registers back so the consumers, which
  // hold S and O in registers, can have more. It moves registers within
  // what the CTA was launched with (kLaunchRegs a thread, the most
  // __launch_bounds__(kNThreads, 1) allows, a multiple of 8: 168 for two
  // consumer warpgroups, 128 for three); a split that asks for more leaves
  // the consumers' setmaxnreg.inc waiting for ever. So 128*P + 128*kCWG*C
  // <= kNThreads * kLaunchRegs (64,512 or 65,536).
  static constexpr int kLaunchRegs = 65536 / kNThreads / 8 * 8;
  static constexpr int kProducerRegs = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumerWarpgroups == 2 ? 240 : 160;
  // Pingpong: the consumer warpgroups take turns issuing their GEMMs, so
  // one's softmax runs under the other's. Everywhere but head_dim 256
  // without a mask, where an 80-key block's softmax is short next to its
  // GEMMs and the turns only hold them back
  // (docs/perf/sm90-pingpong-and-lazy-max.md).
  template <bool kMasked>
  static constexpr bool kPingpong = !(kHeadDim == 256 && !kMasked);
  // The lazy max (OnlineSoftmax::update<true>): the running max, and O's
  // rescale, move only when a row outgrows it by 2^8. It pays at head_dim
  // 128 and 256 and costs at 64 (docs/perf/sm90-pingpong-and-lazy-max.md);
  // 96 and 192 take it with 128 and 256, whose tiles they share.
  static constexpr bool kLazyMax = kHeadDim >= 96;
  static constexpr int kLazyLog2 = 8;  // its allowance: P up to 2^8

  // Row sums on the tensor cores (head_dim 64): P V_j runs as m64n72, its
  // last eight columns reading a block of ones in shared memory, so O's
  // columns 64-71 accumulate each row's sum of P (as rounded for the GEMM)
  // and O is normalised by them; a call without a log-sum-exp then skips
  // the softmax's float32 row sums (kLseSums false). See
  // docs/perf/sm90-row-sums-hd64.md for what each variant costs.
  static constexpr bool kRowSumInO = kHeadDim == 64;
  static constexpr int kOCols = kHeadDim + (kRowSumInO ? 8 : 0);  // N of P V's wgmma
  // An fp8 cache's Q K^T element where K is widened (kFp8 kernels but
  // bf16 at head dims 128 and 256, kFp8CacheQkE4m3): fp16, a bf16 Q
  // converted in shared memory (Mainloop::convert_q), up to head dim 128;
  // wider, Element, K widened by fp8::pair's integer conversion
  // (docs/perf/fp8-prefill.md has the A/B).
  using Fp8QKElement = std::conditional_t<std::is_same_v<Element_, __half> || kHeadDim <= 128, __half, Element_>;
  // Whether the softmax keeps float32 row sums, for the log-sum-exp. Only
  // kRowSumInO traits are compiled without them (WithoutLseSums), for
  // unsplit calls that ask for no log-sum-exp (launch.cuh, run_lse_variant).
  static constexpr bool kLseSums = kLseSums_;
  // Q, K and V are Element (the FP8 prefill's traits, Fp8FwdTraits, set it).
  static constexpr bool kFp8In = false;
  // The probabilities' exponent offset: P = 2^(s - m + kPOffsetLog2).
  static constexpr int kPOffsetLog2 = 0;
  using WithoutLseSums =
      FwdTraits<kHeadDim_, kBlockM_, kBlockN_, kStages_, Element_, false, kGatherKernel_, kCompactK_>;
  // The KV-cache kernel of the paged calls a head dim gathers row by row
  // where gather_tile (tma_limits.h) gives them a kernel of their own
  // (run_cache_kernel, launch.cuh): it compiles only the gathering producer,
  // and that head dim's other cache kernel only the TMA one (fwd_kernel).
  static constexpr bool kGatherKernel = kGatherKernel_;
  // ALiBi's column term on the tensor cores (AlibiCausalTraits).
  static constexpr bool kAlibiCausal = false;

  // Tiles live in shared memory as TMA's SWIZZLE_128B writes them: column
  // blocks of 64 elements (128 bytes a row), each rows x 128 B, 1024-byte
  // aligned. Head dim 96 has two, the second half used: TMA zero-fills its
  // columns 96-127, Q K^T stops at column 96 and P V's N is 96, so those
  // columns are never multiplied.
  static constexpr int kColBlocks = (kHeadDim + 63) / 64;
  // Q's column blocks as TMA loads them, and the elements each spans.
  static constexpr int kInColBlocks = kColBlocks;
  static constexpr int kInColumns = kSwizzleColumns;
  static constexpr int kQBytes = kBlockM * kColBlocks * kSwizzleBytes;
  static constexpr int kKVBytes = kBlockN * kColBlocks * kSwizzleBytes;  // one K or one V block
  static constexpr int kKBytes = kKVBytes;
  // An fp8 cache's kernel whose Q K^T reads K as e4m3 (kFp8CacheQkE4m3):
  // K's bytes fill only the upper half of a kKVBytes block, so its stages
  // are kKVBytes / 2 apart, each overlapping the previous one's unused
  // lower half (SmemLayout::k), and the ring holds more stages.
  static constexpr bool kCompactK = kCompactK_;
  static constexpr int kKStageBytes = kCompactK ? kKVBytes / 2 : kKVBytes;
  // The ones block: one column block of kBlockN rows of ones, read as V's
  // second column block (the descriptor's leading byte offset points from
  // each V stage to it; P V reads its columns 0-7). With kAlibiCausal,
  // ALiBi's step reads columns 16-31 and 48-63 (Mainloop::kAlibiMma).
  static constexpr int kOnesBytes = kRowSumInO ? kBlockN * 128 : 0;
  static constexpr int kNumBarriers = 2 + 4 * kStages;     // Q full/empty; K/V full/empty per stage
  // +1024: the dynamic shared memory base is rounded up to a 1024-byte boundary.
  static constexpr int kSmemWithoutO =
      kQBytes + kStages * (kKStageBytes + kKVBytes) + kOnesBytes + 8 * kNumBarriers + 1024;
  // The epilogue stages O through shared memory for a TMA store: in a
  // buffer of its own where there is room, so Q is released at the tile's
  // last S and the next Q loads under its last P V and the epilogue; a
  // buffer of half O's column blocks where only that fits (O then goes out
  // in two halves, the second staged once the first's store has read the
  // buffer); otherwise in Q's buffer (docs/perf/sm90-epilogue.md).
  static constexpr int kOColBlockBytes = kBlockM * kSwizzleBytes;
  static constexpr int kOBufColBlocks =
      kSmemWithoutO + kColBlocks * kOColBlockBytes <= kMaxSmemPerBlock ? kColBlocks
      : kColBlocks % 2 == 0 && kSmemWithoutO + kColBlocks / 2 * kOColBlockBytes <= kMaxSmemPerBlock
          ? kColBlocks / 2
          : 0;
  static constexpr bool kSeparateO = kOBufColBlocks > 0;
  static constexpr int kOBufBytes = kOBufColBlocks * kOColBlockBytes;
  // Column blocks staged at a time, and how many times.
  static constexpr int kOStageColBlocks = kSeparateO ? kOBufColBlocks : kColBlocks;
  static constexpr int kOPasses = kColBlocks / kOStageColBlocks;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKStageBytes;
  static constexpr int kOnesOffset = kVOffset + kStages * kKVBytes;
  static constexpr int kOOffset = kSeparateO ? kOnesOffset + kOnesBytes : kQOffset;
  static constexpr int kBarrierOffset = kOnesOffset + kOnesBytes + kOBufBytes;
  // Varlen schedule (tile_scheduler.cuh): two int tables of kSchedSeqs + 1
  // entries after the barriers, as many sequences as one pass of the
  // threads ranks and the leftover shared memory holds.
  static constexpr int kTileSmemBytes = kSmemWithoutO + kOBufBytes;
  static constexpr int kSchedOffset = kBarrierOffset + 8 * kNumBarriers;
  static constexpr int kSchedRoom = (kMaxSmemPerBlock - kTileSmemBytes) / 8 - 1;
  static constexpr int kSchedSeqs = (kSchedRoom < kNThreads ? kSchedRoom : kNThreads) / 32 * 32;
  static constexpr int kSmemBytes = kTileSmemBytes + 8 * (kSchedSeqs + 1);

  static_assert(sizeof(Element) == 2, "Element must be a 16-bit type (fp16 or bf16)");
  static_assert(kLseSums || kRowSumInO, "only kernels with O's row sums on the tensor cores may drop the float32 sums");
  static_assert((kHeadDim % 64 == 0 || kHeadDim == 96) && kHeadDim <= 256,
                "sm90 kernel: head_dim must be 64, 96, 128, 192 or 256");
  static_assert(kBlockM % 64 == 0 && (kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3),
                "sm90 kernel: two or three consumer warpgroups of 64 query rows");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "kBlockN must be a multiple of 16, at most 256 (wgmma N)");
  static_assert(kBlockN % 8 == 0 && kBlockM <= 256, "TMA boxes are at most 256 rows");
  static_assert(kStages >= 2, "the K/V rings need two stages to overlap loads with compute");
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kNThreads * kLaunchRegs,
                "register split exceeds the CTA's launch allocation");
  static_assert(kSmemBytes <= kMaxSmemPerBlock, "tiles do not fit in shared memory");
  static_assert(kOPasses * kOStageColBlocks == kColBlocks, "O is staged in equal parts");
  static_assert(!kCompactK || (kHeadDim % 128 == 0 && std::is_same_v<Element, __nv_bfloat16>),
                "compact K stages hold e4m3 K: bf16 calls at head dims 128 and 256 (kFp8CacheQkE4m3)");
};

// FP8 prefill (Q, K and V in e4m3; fp8_kernel.cuh): the same names as
// FwdTraits where the shared parts (SmemLayout, TileScheduler, Mainloop,
// Epilogue) read them. Element is O's type. Tiles of one-byte elements are
// TMA's 128-byte swizzle rows of 128 elements: Q and K are (rows, head dim)
// in kInColBlocks column blocks (head dim 64 fills half of one, TMA
// zero-fills the rest, and Q K^T reads only its 64 columns); V arrives
// transposed (V^T, head dim rows of kBlockN keys, in column blocks of
// kVtBoxCols keys), because e4m3 wgmma reads B only K-major. O is staged for its TMA
// store in a buffer of its own, in Element.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, typename Element_, bool kLseSums_ = true>
struct Fp8FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumerWarpgroups = kBlockM / 64;
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
  static constexpr int kNThreads = 128 * (kConsumerWarpgroups + 1);
  static constexpr int kLaunchRegs = 65536 / kNThreads / 8 * 8;  // as FwdTraits
  static constexpr int kProducerRegs = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumerWarpgroups == 2 ? 240 : 160;
  template <bool kMasked>
  static constexpr bool kPingpong = !(kHeadDim == 256 && !kMasked);
  // P goes to e4m3 (at most 448, smallest subnormal 2^-9), so P <= 256:
  // - head dim 256: the lazy max with an allowance of 2^2 and an offset of
  //   2^6: a row's largest P is 64 to 256, terms down to 2^-15 of it
  //   survive, and O is rescaled only when a row's max grows by more than
  //   2^2 (3% faster on the H200; docs/perf/fp8-prefill-qkv.md);
  // - 64 and 128: the exact max and an offset of 2^8 (a row's largest is
  //   256, terms down to 2^-17 of it survive); the lazy max measured slower
  //   there.
  static constexpr bool kLazyMax = kHeadDim_ == 256;
  static constexpr int kLazyLog2 = kHeadDim_ == 256 ? 2 : 8;
  static constexpr int kPOffsetLog2 = kHeadDim_ == 256 ? 6 : 8;
  // Row sums on the tensor cores (head dims 64 and 128), as FwdTraits' at
  // 64: P V runs eight columns wider, over eight rows of e4m3 ones that
  // follow each V^T box's head-dim rows in every stage (filled once a
  // CTA; TMA writes only the first kHeadDim rows), so O's last eight
  // columns hold each row's sum of P as rounded to e4m3, the weights its
  // numerator used. A call without a log-sum-exp then runs without the
  // softmax's float32 sums (WithoutLseSums).
  static constexpr bool kRowSumInO = kHeadDim_ <= 128;
  static constexpr bool kLseSums = kLseSums_;
  static constexpr bool kAlibiCausal = false;
  static constexpr bool kFp8In = true;
  static constexpr int kOCols = kHeadDim + (kRowSumInO ? 8 : 0);
  using WithoutLseSums = Fp8FwdTraits<kHeadDim_, kBlockM_, kBlockN_, kStages_, Element_, false>;
  static constexpr bool kGatherKernel = false;
  using Fp8QKElement = Element;  // (the fp8 cache kernels' type; unused here)

  static constexpr int kInColBlocks = (kHeadDim + 127) / 128;
  static constexpr int kInColumns = kSwizzleBytes;  // one-byte elements
  static constexpr int kQBytes = kBlockM * kInColBlocks * kSwizzleBytes;
  static constexpr int kKBytes = kBlockN * kInColBlocks * kSwizzleBytes;
  static constexpr int kVtBytes = kHeadDim * kBlockN;  // kHeadDim rows of kBlockN one-byte keys
  // V^T's block as TMA boxes of kHeadDim rows of kVtBoxCols keys, each
  // swizzled over its kVtBoxCols-byte rows (128, 64 or 32: the widest that
  // divides kBlockN), kVtRows * kVtBoxCols bytes apart in the stage (with
  // kRowSumInO the ones rows between them).
  static constexpr int kVtBoxCols = kBlockN % 128 == 0 ? 128 : kBlockN % 64 == 0 ? 64 : 32;
  static constexpr int kVtBoxes = kBlockN / kVtBoxCols;
  // A V^T box's rows in shared memory: kHeadDim from TMA, then the ones.
  static constexpr int kVtRows = kOCols;
  static constexpr int kVtStageBytes = kVtRows * kBlockN;
  // One stage of K or of V^T, whole swizzle atoms so every stage starts on one.
  static constexpr int kKVBytes = ((kKBytes > kVtStageBytes ? kKBytes : kVtStageBytes) + 1023) / 1024 * 1024;
  static constexpr bool kCompactK = false;
  static constexpr int kKStageBytes = kKVBytes;
  static constexpr int kOnesBytes = 0;
  static constexpr int kNumBarriers = 2 + 4 * kStages;
  // O in Element: column blocks of 64.
  static constexpr int kColBlocks = kHeadDim / 64;
  static constexpr int kOColBlockBytes = kBlockM * kSwizzleBytes;
  static constexpr bool kSeparateO = true;
  static constexpr int kOBufColBlocks = kColBlocks;
  static constexpr int kOBufBytes = kColBlocks * kOColBlockBytes;
  static constexpr int kOStageColBlocks = kColBlocks;
  static constexpr int kOPasses = 1;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kOnesOffset = kVOffset + kStages * kKVBytes;
  static constexpr int kOOffset = kOnesOffset;
  static constexpr int kBarrierOffset = kOOffset + kOBufBytes;
  static constexpr int kTileSmemBytes = kBarrierOffset + 8 * kNumBarriers + 1024;
  static constexpr int kSchedOffset = kBarrierOffset + 8 * kNumBarriers;
  static constexpr int kSchedRoom = (kMaxSmemPerBlock - kTileSmemBytes) / 8 - 1;
  static constexpr int kSchedSeqs = (kSchedRoom < kNThreads ? kSchedRoom : kNThreads) / 32 * 32;
  static constexpr int kSmemBytes = kTileSmemBytes + 8 * (kSchedSeqs + 1);

  static_assert(sizeof(Element) == 2, "O is fp16 or bf16");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "FP8 prefill: head dim 64, 128 or 256");
  static_assert(kBlockN % 32 == 0 && kBlockN <= 256,
                "key blocks of whole k32 steps, at most TMA's 256 K rows (and an N wgmma_ss_e4m3 has)");
  static_assert(kBlockN + 15 <= kFp8VtSlack, "a key block that starts before a sequence's end stays in its V^T slack");
  static_assert(kBlockM % 64 == 0 && (kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3),
                "two or three consumer warpgroups of 64 query rows");
  static_assert(kStages >= 2, "the K/V rings need two stages to overlap loads with compute");
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kNThreads * kLaunchRegs,
                "register split exceeds the CTA's launch allocation");
  static_assert(kSchedSeqs >= 32 && kSmemBytes <= kMaxSmemPerBlock, "tiles do not fit in shared memory");
  static_assert(kLseSums || kRowSumInO, "only kernels with O's row sums on the tensor cores may drop the float32 sums");
  static_assert((kVtRows * kVtBoxCols) % (8 * kVtBoxCols) == 0, "V^T boxes start on their swizzle atoms");
};

// The FP8 prefill's tile per head dim, unmasked and masked (causal or a
// window). Masked head dim 128 takes 192-key blocks (3% faster there, 3%
// slower unmasked, on the H200; docs/perf/fp8-prefill-qkv.md).
template <int kHeadDim, bool kMasked>
struct Fp8Tile;
template <bool kMasked> struct Fp8Tile<64, kMasked>  { static constexpr int kBlockM = 192, kBlockN = 128, kStages = 3; };
template <> struct Fp8Tile<128, false> { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 3; };
template <> struct Fp8Tile<128, true>  { static constexpr int kBlockM = 128, kBlockN = 192, kStages = 3; };
template <bool kMasked> struct Fp8Tile<256, kMasked> { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <int kHeadDim, bool kMasked, typename Element>
using Fp8Traits = Fp8FwdTraits<kHeadDim, Fp8Tile<kHeadDim, kMasked>::kBlockM, Fp8Tile<kHeadDim, kMasked>::kBlockN,
                               Fp8Tile<kHeadDim, kMasked>::kStages, Element>;

// The ALiBi kernel's form at head dim 64 for causal calls, with or without
// a left window edge, without a softcap, an LSE or splits (launch.cuh,
// run_candidate): Base's tiles, ALiBi's column term on the tensor cores
// (Mainloop::kAlibiMma).
template <typename Base>
struct AlibiCausalTraits : Base {
  static constexpr bool kAlibiCausal = true;
};

// Whether an fp8 cache's kernel of these traits runs Q K^T on the e4m3
// tensor cores (bf16 Q at head dims 128 and 256, whose column blocks the
// copies pair within a key row): ConvertProducer leaves K as its copies
// land it, and Mainloop splits Q into two e4m3 parts (Mainloop::kQkE4m3),
// which hold a bf16 element's 8 significant bits, not an fp16 one's 11.
template <typename Traits>
inline constexpr bool kFp8CacheQkE4m3 =
    !Traits::kFp8In && Traits::kHeadDim % 128 == 0 && std::is_same_v<typename Traits::Element, __nv_bfloat16>;

// The compiled tile configurations per head dim, unmasked and masked.
// Candidate 0 is the heuristic's pick at every length, but for
// score-modifier calls at head dim 64 under a left window of at most 256
// keys, which the plan starts with candidate 1 unless ALiBi's tensor-core
// form takes them (make_plan; docs/perf/score-features.md),
// and every score-modifier call at head dim 96, which runs candidate 1
// alone (kScoreModCandidate96, head-dims.md); the others are runners-up
// only the autotuner picks. KV-cache calls run one
// candidate, cache_candidate's (api.h). The choice and the measurements
// behind it: docs/perf/sm90-tiles.md.
template <int kHeadDim, bool kMasked, int kIndex>
struct CandidateTile;
template <bool kMasked> struct CandidateTile<64, kMasked, 0>  { static constexpr int kBlockM = 192, kBlockN = 128, kStages = 2; };
template <bool kMasked> struct CandidateTile<64, kMasked, 1>  { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 3; };
// 96: head dim 128's shared memory (two column blocks), P V and O 96
// columns wide. Three consumer warpgroups on 96-key blocks (S 48, P 24, O
// 48 registers a thread, within 160); 128 x 128, two warpgroups, for
// score-modifier calls (whose general 192-row variant spills) and the
// KV-cache kernels (whose producer spills beside three warpgroups).
template <bool kMasked> struct CandidateTile<96, kMasked, 0>  { static constexpr int kBlockM = 192, kBlockN = 96, kStages = 2; };
template <bool kMasked> struct CandidateTile<96, kMasked, 1>  { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <> struct CandidateTile<128, false, 0> { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <> struct CandidateTile<128, false, 1> { static constexpr int kBlockM = 128, kBlockN = 160, kStages = 2; };
template <> struct CandidateTile<128, false, 2> { static constexpr int kBlockM = 128, kBlockN = 176, kStages = 2; };
template <> struct CandidateTile<128, true, 0>  { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <> struct CandidateTile<128, true, 1>  { static constexpr int kBlockM = 128, kBlockN = 176, kStages = 2; };
// 192 (DeepSeek's QK head dim, some vision towers): FlashAttention-3's
// 112-key blocks fill shared memory (Q 48 KiB + two stages of K and V at
// 42 KiB); 96 keys is the runner-up.
template <bool kMasked> struct CandidateTile<192, kMasked, 0> { static constexpr int kBlockM = 128, kBlockN = 112, kStages = 2; };
template <bool kMasked> struct CandidateTile<192, kMasked, 1> { static constexpr int kBlockM = 128, kBlockN = 96, kStages = 2; };
template <bool kMasked> struct CandidateTile<256, kMasked, 0> { static constexpr int kBlockM = 128, kBlockN = 64, kStages = 2; };
template <bool kMasked> struct CandidateTile<256, kMasked, 1> { static constexpr int kBlockM = 128, kBlockN = 80, kStages = 2; };

// How many candidates each head dim and mask compiles (indices 0 .. n-1).
template <int kHeadDim, bool kMasked>
inline constexpr int kNumCandidates = (kHeadDim == 128 && !kMasked) ? 3 : 2;

template <int kHeadDim, bool kMasked, int kIndex, typename Element>
using CandidateTraits = FwdTraits<kHeadDim, CandidateTile<kHeadDim, kMasked, kIndex>::kBlockM,
                                  CandidateTile<kHeadDim, kMasked, kIndex>::kBlockN,
                                  CandidateTile<kHeadDim, kMasked, kIndex>::kStages, Element>;

}  // namespace flash::sm90
