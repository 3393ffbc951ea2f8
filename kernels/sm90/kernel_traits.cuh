// Compile-time shape of the sm90 (wgmma + TMA + warp specialisation)
// forward kernel. Everything is derived from four choices (and whether the
// softmax keeps float32 row sums) and asserted.
#pragma once

namespace flash::sm90 {

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, typename Element_, bool kLseSums_ = true>
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
  // hold S and O in registers, can have more. 128*P + 128*kCWG*C <= 65536.
  static constexpr int kProducerRegs = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumerWarpgroups == 2 ? 240 : 160;
  // Pingpong: the consumer warpgroups take turns issuing their GEMMs
  // (named barriers, fwd_kernel.cuh), so one's softmax runs under the
  // other's GEMMs; without it each issues as soon as its operands are
  // ready. Measured both ways (bench/NOTES.md, run 73): without it hd64
  // lost 6% and hd128 up to 8% (causal 16k), but hd256's unmasked kernels
  // gained 2-4%: an 80-key block's softmax is short next to its
  // head_dim-256 GEMMs, and the turns only hold those back. hd256 under a
  // mask was within 1% either way and keeps the turns (it spills less).
  template <bool kMasked>
  static constexpr bool kPingpong = !(kHeadDim == 256 && !kMasked);
  // The softmax's lazy max (OnlineSoftmax::update<true>): the max moves, and
  // O is rescaled, only when a row outgrows it by 2^8. Where it runs
  // (bench/NOTES.md): the 128 x 176 kernels (hd128; the autotuner's only
  // since run 114), +3-4% at 16k (run 58); hd256's unmasked kernels, +3% at
  // 16k and +1% at 2k (runs 62-63), and its masked ones, causal +2-4% at
  // 2k-16k in bf16 and +0.6-4% in fp16 (run 119; run 58's extra spill of
  // 100-180 bytes there is 4 bytes or less since O's rescale left the
  // pingpong turn); the 128 x 160 kernel (hd128 non-causal, the autotuner's
  // only since run 125), +2-4% in bf16 and 0-3% in fp16 at 2k-8k (runs
  // 110-111); and hd128's 128 x 128 kernels (the heuristic's pick at every
  // hd128 shape since run 125), +1-2% causal and +1.4% / +4.4% (bf16 /
  // fp16) non-causal at 1k (run 112).
  // Run 58 had the last two behind by 1-3%, before O's rescale left the
  // turn. Where it does not: hd64 lost 1-3% (run 58; 2-3% under a causal
  // mask in run 110).
  static constexpr bool kLazyMax = kHeadDim == 128 || kHeadDim == 256;

  // Row sums on the tensor cores (head_dim 64): P V_j runs as m64n72, its
  // last eight columns reading a block of ones in shared memory, so O's
  // columns 64-71 accumulate each row's sum of P (as rounded for the GEMM)
  // and are rescaled with O, and O is normalised by them. A call without a
  // log-sum-exp then skips the softmax's FADD row sums (kLseSums, below):
  // hd64's softmax is its longest phase (run 77), and the eight
  // extra columns cost 6% more tensor-core work. Measured (bench/NOTES.md,
  // run 130): +0.7% to +3.0% in every hd64 cell at 2k and 16k, both
  // dtypes. (Run 129's form, one kernel branching on the LSE pointer in
  // its softmax, lost 1-4%.) A call with a log-sum-exp, which keeps both,
  // lost 1.5-5.1% (run 134); window and softcap calls always keep both.
  static constexpr bool kRowSumInO = kHeadDim == 64;
  static constexpr int kOCols = kHeadDim + (kRowSumInO ? 8 : 0);  // N of P V's wgmma
  // Whether the softmax keeps float32 row sums, for the log-sum-exp. Only
  // kRowSumInO traits, whose O takes its normalisation from the tensor
  // cores, are compiled without them (WithoutLseSums), for tail-only and
  // causal calls that ask for no log-sum-exp (launch.cuh).
  static constexpr bool kLseSums = kLseSums_;
  using WithoutLseSums = FwdTraits<kHeadDim_, kBlockM_, kBlockN_, kStages_, Element_, false>;

  // Tiles live in shared memory as TMA's SWIZZLE_128B writes them: column
  // blocks of 64 elements (128 bytes a row), each rows x 128 B, 1024-byte aligned.
  static constexpr int kColBlocks = kHeadDim / 64;
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVBytes = kBlockN * kHeadDim * 2;  // one K or one V block
  // The ones block: one column block of kBlockN rows, every element 1, read
  // as V's second column block (the descriptor's leading byte offset points
  // from each V stage to it).
  static constexpr int kOnesBytes = kRowSumInO ? kBlockN * 128 : 0;
  static constexpr int kNumBarriers = 2 + 4 * kStages;     // Q full/empty; K/V full/empty per stage
  // +1024: the dynamic shared memory base is rounded up to a 1024-byte boundary.
  static constexpr int kSmemWithoutO = kQBytes + 2 * kStages * kKVBytes + kOnesBytes + 8 * kNumBarriers + 1024;
  // The epilogue stages O through shared memory for a TMA store: in a
  // buffer of its own where there is room, so Q is released at the tile's
  // last S and the next Q loads under its last P V; otherwise in Q's buffer,
  // and Q is released once the store has read it. (Storing O straight from
  // the accumulators instead, and releasing Q early, measured no faster at
  // hd128 128x176 and 4-5% slower at hd256 N = 2k: bench/NOTES.md, run 29.)
  static constexpr bool kSeparateO = kSmemWithoutO + kQBytes <= 227 * 1024;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kOnesOffset = kVOffset + kStages * kKVBytes;
  static constexpr int kOOffset = kSeparateO ? kOnesOffset + kOnesBytes : kQOffset;
  static constexpr int kBarrierOffset = kOnesOffset + kOnesBytes + (kSeparateO ? kQBytes : 0);
  // Varlen schedule (tile_scheduler.cuh): two int tables of kSchedSeqs + 1
  // entries after the barriers, as many sequences as one pass of the
  // threads ranks and the leftover shared memory holds.
  static constexpr int kTileSmemBytes = kSmemWithoutO + (kSeparateO ? kQBytes : 0);
  static constexpr int kSchedOffset = kBarrierOffset + 8 * kNumBarriers;
  static constexpr int kSchedRoom = (227 * 1024 - kTileSmemBytes) / 8 - 1;
  static constexpr int kSchedSeqs = (kSchedRoom < kNThreads ? kSchedRoom : kNThreads) / 32 * 32;
  static constexpr int kSmemBytes = kTileSmemBytes + 8 * (kSchedSeqs + 1);

  static_assert(sizeof(Element) == 2, "Element must be a 16-bit type (fp16 or bf16)");
  static_assert(kLseSums || kRowSumInO, "only kernels with O's row sums on the tensor cores may drop the float32 sums");
  static_assert(kHeadDim % 64 == 0 && kHeadDim <= 256, "sm90 kernel: head_dim must be 64, 128, 192 or 256");
  static_assert(kBlockM % 64 == 0 && (kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3),
                "sm90 kernel: two or three consumer warpgroups of 64 query rows");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "kBlockN must be a multiple of 16, at most 256 (wgmma N)");
  static_assert(kBlockN % 8 == 0 && kBlockM <= 256, "TMA boxes are at most 256 rows");
  static_assert(kStages >= 2, "the K/V rings need two stages to overlap loads with compute");
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= 65536,
                "register split exceeds the register file");
  static_assert(kSmemBytes <= 227 * 1024, "tiles do not fit in shared memory");
};

// The compiled tile configurations per head dim and mask. Candidate 0 is
// the heuristic's choice at every length, picked by measurement on an H200
// (bench/NOTES.md): head_dim 64 takes 192 x 128 (three consumer
// warpgroups; v4, run 106). Head_dim 128 takes 128 x 128, causal and not:
// with the lazy max in all three tiles, it led 128 x 176 by 2-3% causal at
// 16k keys (run 114) and 128 x 160 non-causal by 0.5-1.9% in bf16 and
// 1.4-3.6% in fp16 at 2k-16k (runs 125-126). Head_dim 256 takes 128 x 64,
// causal and not (run 107: +1% to +4.5% over 128 x 80 non-causal from 1k
// to 8k keys, both dtypes, level at 16k, since 2048 keys fill 32 blocks of
// 64 but leave the 26th block of 80 with 48; causal, where 128 x 80 had led
// by 1-6% in run 108, 128 x 64 leads by 0.4-3.4% now that both have the
// lazy max: runs 121-122). The others are runners-up only the autotuner
// picks (src/dispatch.cpp).
template <int kHeadDim, bool kIsCausal, int kIndex>
struct CandidateTile;
template <bool kIsCausal> struct CandidateTile<64, kIsCausal, 0>  { static constexpr int kBlockM = 192, kBlockN = 128, kStages = 2; };
template <bool kIsCausal> struct CandidateTile<64, kIsCausal, 1>  { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 3; };
template <> struct CandidateTile<128, false, 0> { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <> struct CandidateTile<128, false, 1> { static constexpr int kBlockM = 128, kBlockN = 160, kStages = 2; };
template <> struct CandidateTile<128, false, 2> { static constexpr int kBlockM = 128, kBlockN = 176, kStages = 2; };
template <> struct CandidateTile<128, true, 0>  { static constexpr int kBlockM = 128, kBlockN = 128, kStages = 2; };
template <> struct CandidateTile<128, true, 1>  { static constexpr int kBlockM = 128, kBlockN = 176, kStages = 2; };
template <bool kIsCausal> struct CandidateTile<256, kIsCausal, 0> { static constexpr int kBlockM = 128, kBlockN = 64, kStages = 2; };
template <bool kIsCausal> struct CandidateTile<256, kIsCausal, 1> { static constexpr int kBlockM = 128, kBlockN = 80, kStages = 2; };

// How many candidates each head dim and mask compiles (indices 0 .. n-1).
template <int kHeadDim, bool kIsCausal>
inline constexpr int kNumCandidates = (kHeadDim == 128 && !kIsCausal) ? 3 : 2;
inline constexpr int kMaxCandidates = 3;

template <int kHeadDim, bool kIsCausal, int kIndex, typename Element>
using CandidateTraits = FwdTraits<kHeadDim, CandidateTile<kHeadDim, kIsCausal, kIndex>::kBlockM,
                                  CandidateTile<kHeadDim, kIsCausal, kIndex>::kBlockN,
                                  CandidateTile<kHeadDim, kIsCausal, kIndex>::kStages, Element>;

}  // namespace flash::sm90
