// Mask policy: which keys a query row sees, and which K/V blocks of a query
// block need the per-element mask at all.
//
// Causal is aligned to the bottom-right corner: row i sees key j iff
// j <= i + seqlen_k - seqlen_q. Every row also stops at seqlen_k (the ragged
// tail of the last K/V block is masked to -inf, never treated as a zero score).
#pragma once

#include <cstdint>

#include "../params.h"
#include "mask_bits.h"
#include "ptx.cuh"

namespace flash {

// Whether K/V block n_block needs the per-element mask, given the blocks
// [unmasked_begin, unmasked_end) that every row of the query block sees in
// full (WindowMask::unmasked_blocks). The one test every kernel uses.
__device__ __forceinline__ bool block_needs_mask(int n_block, int unmasked_begin, int unmasked_end) {
  return n_block >= unmasked_end || n_block < unmasked_begin;
}

// The keys [begin, limit) each accumulator row of a thread sees: row (m, hi)
// is the thread's row of m16 tile m, upper (hi = 0) or lower (hi = 1) half.
template <int kM>
struct RowRange {
  int begin[kM][2];
  int limit[kM][2];
};

// Sliding-window mask (which includes causal: window_right = 0) plus the
// ragged tail, for the sm80, decode and sm90 kernels. Row i (0-based within its
// sequence) sees keys j with
//   i + d - window_left <= j <= i + d + window_right,  d = seqlen_k - seqlen_q,
// and 0 <= j < seqlen_k; a negative window side is unbounded. kMasked
// (a causal or window mask compiled in) false: only the tail applies.
// kHasLeft false drops the left edge at compile time (for callers that know
// window_left is -1: causal and right-only windows). Both edges are
// non-decreasing in the row, so a block of rows sees the union
// [col_begin(first), col_limit(last)).
template <bool kMasked, bool kHasLeft = kMasked>
struct WindowMask {
  int seqlen_k;
  int64_t lo;  // row i sees keys from i + lo ...
  int64_t hi;  // ... to i + hi inclusive

  __device__ __forceinline__ WindowMask(int seqlen_q, int seqlen_k_, int window_left, int window_right)
      : seqlen_k(seqlen_k_) {
    const int64_t d = static_cast<int64_t>(seqlen_k_) - seqlen_q;
    lo = window_left < 0 ? -(int64_t{1} << 40) : d - window_left;
    hi = window_right < 0 ? (int64_t{1} << 40) : d + window_right;
  }

  // First key row `row` sees (clamped to [0, seqlen_k]).
  __device__ __forceinline__ int col_begin(int row) const {
    if constexpr (kMasked && kHasLeft) {
      return static_cast<int>(max(int64_t{0}, min(row + lo, static_cast<int64_t>(seqlen_k))));
    } else {
      return 0;
    }
  }
  // One past the last key row `row` sees (clamped to [0, seqlen_k]).
  __device__ __forceinline__ int col_limit(int row) const {
    if constexpr (kMasked) {
      return static_cast<int>(max(int64_t{0}, min(row + hi + 1, static_cast<int64_t>(seqlen_k))));
    } else {
      return seqlen_k;
    }
  }

  __device__ __forceinline__ void range_of(int row, int* begin, int* limit) const {
    *begin = col_begin(row);
    *limit = col_limit(row);
  }
  // The ranges of a thread's accumulator rows; row_of(m, hi) is the row.
  template <int kM, typename RowOf>
  __device__ __forceinline__ RowRange<kM> ranges(RowOf&& row_of) const {
    RowRange<kM> r;
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) range_of(row_of(m, hi), &r.begin[m][hi], &r.limit[m][hi]);
    }
    return r;
  }

  // K/V blocks [*begin, *end) hold every key some row in [row_first, row_last] sees;
  // the rest are wholly hidden and never loaded. Empty (begin == end) when no row sees a key.
  template <int kBlockN>
  __device__ __forceinline__ void visible_blocks(int row_first, int row_last, int* begin, int* end) const {
    const int b = col_begin(row_first);
    const int e = col_limit(row_last);
    if (e <= b) {
      *begin = *end = 0;
    } else {
      *begin = b / kBlockN;
      *end = (e + kBlockN - 1) / kBlockN;
    }
  }

  // Blocks [*begin, *end) are seen in full by every row in [row_first,
  // row_last]: they need no per-element mask (the range may be empty).
  template <int kBlockN>
  __device__ __forceinline__ void unmasked_blocks(int row_first, int row_last, int* begin, int* end) const {
    *begin = (col_begin(row_last) + kBlockN - 1) / kBlockN;
    *end = col_limit(row_first) / kBlockN;
  }
};

// The per-element mask on an S fragment (kM m16 tiles by kN n8 tiles, the
// mma/wgmma accumulator layout) whose first column is key col0: scores of
// keys outside each row's [begin, limit) become -inf (never a finite
// stand-in: a masked score must weigh exactly zero). kHasLeft false skips
// the left edge. kThreadBounds (the sm90 and decode kernels): the bounds
// move to the thread's first column, so each score compares them with a
// constant; the column form builds the thread's columns in registers,
// which spilled in the sm90 window and KV-cache kernels. The sm80 kernel
// keeps the column form: there the bounds form spills more in some
// kernels and less in others (docs/perf/sm90-short-calls.md).
template <bool kHasLeft, bool kThreadBounds = true, int kM, int kN>
__device__ __forceinline__ void apply_mask(float (&s)[kM][kN][4], const RowRange<kM>& r, int col0, int lane) {
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      // Columns, and the bounds, relative to `first`.
      const int first = kThreadBounds ? col0 + (lane % 4) * 2 : col0;
      const int begin = r.begin[m][hi] - first;
      const int limit = r.limit[m][hi] - first;
#pragma unroll
      for (int nt = 0; nt < kN; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + e + (kThreadBounds ? 0 : (lane % 4) * 2);
          if (col >= limit || (kHasLeft && col < begin)) s[m][nt][2 * hi + e] = -INFINITY;
        }
      }
    }
  }
}

// apply_mask without a left edge, with each row's visible columns as words
// of bits (mask_bits.h): each score tests a bit at a constant position,
// which ptxas turns into R2P (a word's bits to seven predicates at once)
// and one FSEL, about 1.1 instructions a score against a compare and a
// select with the column (docs/perf/sm90-short-calls.md).
template <int kM, int kN>
__device__ __forceinline__ void apply_right_mask_words(float (&s)[kM][kN][4], const RowRange<kM>& r, int col0,
                                                       int lane) {
  constexpr int kT = 2 * kN;  // a row's scores in the thread
  const int first_col = col0 + (lane % 4) * 2;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int seen_end = mask_bits::below<kN>(r.limit[m][hi] - first_col);
#pragma unroll
      for (int w = 0; w < (kT + 31) / 32; ++w) {
        const uint32_t bits = mask_bits::word(0, seen_end, w);
#pragma unroll
        for (int t = 32 * w; t < kT && t < 32 * w + 32; ++t) {
          if (((bits >> (t - 32 * w)) & 1u) == 0) s[m][t / 2][2 * hi + t % 2] = -INFINITY;
        }
      }
    }
  }
}

// The score modifiers, compiled into one variant of each kernel (kEnabled:
// MaskVariant::kScoreMod) and chosen there at run time by branches uniform
// across the CTA:
//   softcap (prescale > 0): s <- tanh(s * prescale); the cap itself is
//     folded into the softmax scale by the host (see FwdParams);
//   ALiBi (slopes non-null): the score of row i and key j of a sequence
//     gains -slope * |i + d - j|, d = seqlen_k - seqlen_q, slope that of the
//     row's query head (FlashAttention-2's non-causal bias, under every
//     mask). The kernels' scores are in units of 1 / softmax_scale, so the
//     bias is scaled by alibi_scale = 1 / softmax_scale (after the softcap's
//     folding).
// Both come before the mask: a masked score is -inf whatever the bias.
template <bool kEnabled>
struct ScoreMod {
  float prescale;
  const float* slopes;
  float alibi_scale;

  __device__ __forceinline__ ScoreMod(const detail::FwdParams& p)
      : prescale(p.softcap_prescale), slopes(p.alibi_slopes), alibi_scale(p.alibi_scale) {}

  // -slope / softmax_scale of query head `head` (ALiBi on).
  __device__ __forceinline__ float neg_slope(int head) const { return -__ldg(slopes + head) * alibi_scale; }

  // S fragment (kM m16 tiles by kN n8 tiles) whose first column is key
  // col0. diag(m, hi): i + d of the thread's row (m, hi); neg(m, hi): its
  // neg_slope() (read only with ALiBi on).
  template <int kM, int kN, typename Diag, typename Neg>
  __device__ __forceinline__ void apply(float (&s)[kM][kN][4], int col0, int lane, Diag&& diag, Neg&& neg) const {
    if constexpr (kEnabled) {
      if (prescale > 0.f) {
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int n = 0; n < kN; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[m][n][e] = ptx::tanh_fast(s[m][n][e] * prescale);
      }
      if (slopes != nullptr) {
#pragma unroll
        for (int m = 0; m < kM; ++m) {
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            // |i + d - j| for the thread's first column, then each fragment
            // column's constant offset from it. Exact in float below 2^24.
            const float base = static_cast<float>(diag(m, hi) - col0 - (lane % 4) * 2);
            const float slope = neg(m, hi);
#pragma unroll
            for (int n = 0; n < kN; ++n) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& x = s[m][n][2 * hi + e];
                x = fmaf(slope, fabsf(base - static_cast<float>(n * 8 + e)), x);
              }
            }
          }
        }
      }
    }
  }

  // apply() for OnlineSoftmax::update_shifted: the same scores, with ALiBi's
  // bias split where a thread's columns of the block all lie on one side of
  // its row's diagonal. There -slope * |i + d - j| is linear in j: the part
  // at the thread's first column goes to shift[hi], and each score gains
  // only its column's offset from it, one FFMA with a constant. Rows whose
  // columns straddle the diagonal take the whole bias per score (shift 0).
  template <int kN, typename Diag>
  __device__ __forceinline__ void apply_shifted(float (&s)[1][kN][4], int col0, int lane, Diag&& diag, float neg,
                                                float (&shift)[2]) const {
    shift[0] = shift[1] = 0.f;
    if constexpr (kEnabled) {
      if (prescale > 0.f) {
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[0][n][e] = ptx::tanh_fast(s[0][n][e] * prescale);
      }
      if (slopes != nullptr) {
        constexpr int kLastOffset = (kN - 1) * 8 + 1;  // the thread's last column, from its first
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          // i + d - j at the thread's first column; exact in float below 2^24.
          const int base = diag(0, hi) - col0 - (lane % 4) * 2;
          const float fbase = static_cast<float>(base);
          if (base >= kLastOffset || base <= 0) {
            // Left of the diagonal (every j <= i + d): bias = neg * (base - k);
            // right of it (j >= i + d): neg * (k - base); k the column's offset.
            const float sign = base > 0 ? 1.f : -1.f;
            shift[hi] = sign * neg * fbase;
            const float coef = -sign * neg;
#pragma unroll
            for (int n = 0; n < kN; ++n) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                if (n * 8 + e == 0) continue;  // the first column's offset is 0
                float& x = s[0][n][2 * hi + e];
                x = fmaf(coef, static_cast<float>(n * 8 + e), x);
              }
            }
          } else {
#pragma unroll
            for (int n = 0; n < kN; ++n) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& x = s[0][n][2 * hi + e];
                x = fmaf(neg, fabsf(fbase - static_cast<float>(n * 8 + e)), x);
              }
            }
          }
        }
      }
    }
  }
};

}  // namespace flash
