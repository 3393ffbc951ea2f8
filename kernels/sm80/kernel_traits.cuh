// Compile-time shape of the sm80 forward kernel. Everything the kernel
// needs is derived here from five choices, and every limit is asserted.
#pragma once

#include "../common/constants.h"

namespace flash::sm80 {

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kStages_, typename Element_>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;  // D: elements per Q/K/V/O row
  static constexpr int kBlockM = kBlockM_;    // query rows per CTA (Q_i)
  static constexpr int kBlockN = kBlockN_;    // key rows per K_j / V_j block
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kStages = kStages_;    // K/V blocks resident in the shared-memory ring
  static constexpr int kNThreads = kNWarps * 32;

  // Each warp owns kWarpRows consecutive query rows, as kMTiles m16 tiles.
  static constexpr int kWarpRows = kBlockM / kNWarps;
  static constexpr int kMTiles = kWarpRows / 16;
  static constexpr int kNTilesS = kBlockN / 8;     // n8 tiles of S = Q K^T
  static constexpr int kKStepsQK = kHeadDim / 16;  // k16 steps of Q K^T
  static constexpr int kNTilesO = kHeadDim / 8;    // n8 tiles of O
  static constexpr int kKStepsPV = kBlockN / 16;   // k16 steps of P V

  // Shared memory holds rows of 16-byte chunks. Chunks are grouped in
  // column blocks of kSwizzleChunks (128 bytes, or 64 for head dims that are
  // not a multiple of 64) and the chunk index is XORed with the row, so the
  // eight rows one ldmatrix phase reads land in eight different bank groups.
  static constexpr int kChunksPerRow = kHeadDim * 2 / 16;
  static constexpr int kSwizzleChunks = (kHeadDim % 64 == 0) ? 8 : 4;

  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKVBytes = kBlockN * kHeadDim * 2;  // one K or one V block
  static constexpr int kStageBytes = 2 * kKVBytes;
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes;

  static_assert(sizeof(Element) == 2, "Element must be a 16-bit type (fp16 or bf16)");
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head_dim must be a multiple of 32, at most 256");
  static_assert(kWarpRows % 16 == 0 && kMTiles >= 1, "kBlockM must give each warp a multiple of 16 rows");
  static_assert(kBlockN % 16 == 0, "kBlockN must be a multiple of 16 (k16 steps of P V, pairs of n8 tiles)");
  static_assert(kNTilesO % 2 == 0, "ldmatrix.x4 of V covers pairs of n8 tiles of O");
  static_assert(kChunksPerRow % kSwizzleChunks == 0, "a row must be whole swizzle blocks");
  static_assert((kBlockM * kChunksPerRow) % kNThreads == 0, "Q tile must split evenly over the threads");
  static_assert((kBlockN * kChunksPerRow) % kNThreads == 0, "K/V tiles must split evenly over the threads");
  static_assert(kStages >= 2, "the K/V ring needs at least two stages to overlap loads with compute");
  static_assert(kSmemBytes <= kMaxSmemPerBlock, "tile does not fit in shared memory");
};

// The compiled tile configurations per head dim, for sm_80..sm_90.
// Candidate 0 is the heuristic's choice: FlashAttention-2's proven shapes
// (128-row query blocks; 64-key blocks where the output accumulator is
// large, 128-key blocks where it is small). Candidate 1, where present,
// halves the query block (more CTAs, fewer registers per thread) for short
// or narrow problems; the autotuner may pick it.
template <int kHeadDim, int kIndex>
struct CandidateTile;
template <> struct CandidateTile<32, 0>  { static constexpr int kBlockM = 128, kBlockN = 128, kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<64, 0>  { static constexpr int kBlockM = 128, kBlockN = 128, kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<64, 1>  { static constexpr int kBlockM = 64,  kBlockN = 128, kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<96, 0>  { static constexpr int kBlockM = 128, kBlockN = 64,  kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<128, 0> { static constexpr int kBlockM = 128, kBlockN = 64,  kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<128, 1> { static constexpr int kBlockM = 64,  kBlockN = 64,  kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<192, 0> { static constexpr int kBlockM = 128, kBlockN = 64,  kNWarps = 8, kStages = 2; };
template <> struct CandidateTile<256, 0> { static constexpr int kBlockM = 128, kBlockN = 64,  kNWarps = 8, kStages = 2; };
// 160 KiB instead of 192: for GPUs whose blocks cannot have 192 KiB of shared
// memory (A100: 163 KiB). A fallback only: listed when candidate 0 does not fit.
template <> struct CandidateTile<256, 1> { static constexpr int kBlockM = 64,  kBlockN = 64,  kNWarps = 4, kStages = 2; };
// 72 and 96 KiB: for GPUs whose blocks have at most 99 KiB (sm_86, sm_89:
// RTX 30/40, A10, L4, L40). Fallbacks only, listed when nothing before fits.
template <> struct CandidateTile<192, 1> { static constexpr int kBlockM = 64,  kBlockN = 32,  kNWarps = 4, kStages = 2; };
template <> struct CandidateTile<256, 2> { static constexpr int kBlockM = 64,  kBlockN = 32,  kNWarps = 4, kStages = 2; };

// At most kMaxCandidates (the launcher's and candidates.cpp's switches).
inline constexpr int kMaxCandidates = 3;
template <int kHeadDim>
inline constexpr int kNumCandidates = kHeadDim == 256 ? 3 : (kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 192) ? 2 : 1;
// Candidates used only when every earlier one needs more shared memory than the device has.
template <int kHeadDim, int kIndex>
inline constexpr bool kFallbackOnly = (kHeadDim == 256 && kIndex >= 1) || (kHeadDim == 192 && kIndex == 1);
static_assert(kNumCandidates<256> <= kMaxCandidates, "extend the candidate switches");

template <int kHeadDim, int kIndex, typename Element>
using CandidateTraits =
    FwdTraits<kHeadDim, CandidateTile<kHeadDim, kIndex>::kBlockM, CandidateTile<kHeadDim, kIndex>::kBlockN,
              CandidateTile<kHeadDim, kIndex>::kNWarps, CandidateTile<kHeadDim, kIndex>::kStages, Element>;

}  // namespace flash::sm80
