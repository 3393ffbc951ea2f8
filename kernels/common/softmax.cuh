// Online softmax over mma.sync m16n8 accumulator fragments.
//
// A thread holds, for each of kMTiles 16-row tiles, two rows (lane/4 and
// lane/4 + 8) and, for each of kNTiles 8-column tiles, two columns of each
// row: s[mt][nt][2 * hi + e]. The four lanes of a quad share a row, so row
// reductions are two xor-shuffles.
//
// The running max m is kept in raw-score units; scores become probabilities
// as exp2(s * scale_log2 - m * scale_log2), one FFMA and one MUFU.EX2 each.
// The running sum l stays a per-thread partial sum until finalize().
#pragma once

#include <cmath>

#include "ptx.cuh"

namespace flash {

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <int kMTiles>
struct OnlineSoftmax {
  static constexpr int kRows = 2 * kMTiles;
  float m[kRows];  // running max of raw scores, -inf until a visible key is seen
  float l[kRows];  // this thread's partial sum of exp2(s * scale_log2 - m * scale_log2)

  __device__ __forceinline__ OnlineSoftmax() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.f;
    }
  }

  // Pairwise merge of kN partial results (kN a power of two or not).
  template <int kN, typename Op>
  __device__ __forceinline__ static float merge(float (&v)[kN], Op op) {
#pragma unroll
    for (int stride = 1; stride < kN; stride *= 2) {
#pragma unroll
      for (int a = 0; a + stride < kN; a += 2 * stride) v[a] = op(v[a], v[a + stride]);
    }
    return v[0];
  }

  // Turns the scores s into unnormalised probabilities in place, updates m
  // and l, and returns in `correction` the factor exp2((m_old - m_new) *
  // scale_log2) by which the output accumulator must be rescaled (see
  // rescale(); kept separate so a kernel can defer it while O is still being
  // accumulated asynchronously). A row whose scores are all -inf keeps
  // m = -inf and gets zeros, not NaN: its subtracted max is taken as 0.
  //
  // kLazy: the max a row subtracts moves only when some row of the warp
  // has outgrown it by more than kLazyThreshold (in exp2 units; kLazyLog2 =
  // 8 unless the caller asks for less), so most blocks leave m alone,
  // correction is 1 and the caller may skip rescaling O: update() returns
  // whether O needs it (warp-uniform; always true when !kLazy).
  // Probabilities then reach up to 2^(kLazyThreshold + kPOffset), 256 by default, before the
  // final normalisation, well inside fp32, bf16 and fp16 range; the result
  // is the same function (l and O share the stale max).
  //
  // kSum = false: l is left alone, and the FADD work of the sums skipped,
  // for a caller that gets the row sums elsewhere (e.g. from the P V GEMM
  // against a column of ones) and finalizes with finalize_sums().
  //
  // update_shifted<..., kShift = true>: row r's scores are s + shift[r] (a
  // per-thread row offset the caller took out of s, e.g. ALiBi's bias at a
  // block's first column); the max compares s + shift against m and the
  // exponents take s against m - shift, so the offset costs a few
  // instructions per row instead of one per score.
  static constexpr int kLazyLog2 = 8;
  //
  // kPOffset: the probabilities are 2^kPOffset times larger (exponents
  // against m - kPOffset), l with them; the caller's O and log-sum-exp take
  // the factor out (the FP8 prefill scales P into e4m3's range this way).
  // kLazyThreshold: the lazy max's allowance (kLazyLog2 unless a caller
  // needs P in a narrower range: then P <= 2^(kLazyThreshold + kPOffset)).
  template <bool kLazy = false, bool kSum = true, int kPOffset = 0, int kLazyThreshold = kLazyLog2, int kNTiles>
  __device__ __forceinline__ bool update(float (&s)[kMTiles][kNTiles][4], float scale_log2,
                                         float (&correction)[kRows]) {
    const float none[kRows] = {};
    return update_shifted<kLazy, kSum, false, kPOffset, kLazyThreshold>(s, scale_log2, correction, none);
  }
  // update() where only the first `live` n8 tiles may hold visible scores
  // (update_shifted's kChunked).
  template <bool kLazy = false, bool kSum = true, int kPOffset = 0, int kLazyThreshold = kLazyLog2, int kNTiles>
  __device__ __forceinline__ bool update_live(float (&s)[kMTiles][kNTiles][4], float scale_log2,
                                              float (&correction)[kRows], int live) {
    const float none[kRows] = {};
    return update_shifted<kLazy, kSum, false, kPOffset, kLazyThreshold, kNTiles, true>(s, scale_log2, correction,
                                                                                       none, live);
  }
  // kChunked (update_live): only the first `live` n8 tiles of the block may
  // hold a score above -inf in any row of the warp; `live` is warp-uniform.
  // Whole groups of kAcc n8 tiles past it (the last group may be shorter)
  // are skipped: their probabilities set to 0, kept out of the max and the
  // sums. For finite visible scores the result is the same bits, a masked
  // score's probability being exactly 0 and -inf changing no max.
  template <bool kLazy, bool kSum, bool kShift, int kPOffset = 0, int kLazyThreshold = kLazyLog2, int kNTiles,
            bool kChunked = false>
  __device__ __forceinline__ bool update_shifted(float (&s)[kMTiles][kNTiles][4], float scale_log2,
                                                 float (&correction)[kRows], const float (&shift)[kRows],
                                                 int live = kNTiles) {
    constexpr int kAcc = kNTiles < 4 ? kNTiles : 4;  // independent partial max / sum chains per row
    constexpr int kGroups = (kNTiles + kAcc - 1) / kAcc;
    // Whether n8 tile group g (tiles g * kAcc ..) is computed: those that
    // may hold a visible score, and the first always (it starts the chains).
    auto group_live = [&](int g) { return !kChunked || g == 0 || g * kAcc < live; };
    // Both row reductions run as kAcc independent chains merged at the end,
    // not one chain through every column: a serial chain of 2 * kNTiles
    // dependent FMNMX / FADD is latency the softmax cannot hide.
    auto row_max = [&](int mt, int hi, int r) {
      float part_max[kAcc];
      if constexpr (!kChunked) {
#pragma unroll
        for (int a = 0; a < kAcc; ++a) part_max[a] = fmaxf(s[mt][a][2 * hi], s[mt][a][2 * hi + 1]);
#pragma unroll
        for (int nt = kAcc; nt < kNTiles; ++nt) {
          part_max[nt % kAcc] = fmaxf(part_max[nt % kAcc], fmaxf(s[mt][nt][2 * hi], s[mt][nt][2 * hi + 1]));
        }
      } else {
#pragma unroll
        for (int a = 0; a < kAcc; ++a) part_max[a] = fmaxf(s[mt][a][2 * hi], s[mt][a][2 * hi + 1]);
#pragma unroll
        for (int g = 1; g < kGroups; ++g) {
          if (group_live(g)) {
#pragma unroll
            for (int nt = g * kAcc; nt < (g + 1) * kAcc && nt < kNTiles; ++nt) {
              part_max[nt % kAcc] = fmaxf(part_max[nt % kAcc], fmaxf(s[mt][nt][2 * hi], s[mt][nt][2 * hi + 1]));
            }
          }
        }
      }
      float block_max = merge(part_max, [](float x, float y) { return fmaxf(x, y); });
      if constexpr (kShift) block_max += shift[r];
      return quad_max(fmaxf(m[r], block_max));
    };
    // Scores of row r to probabilities against max m_new; l updated.
    // m * scale_log2 is rounded up, so every exponent s * scale_log2 -
    // m_scaled (one FFMA, exact before its own rounding) is <= 0 for s <= m:
    // no probability exceeds 1 (2^kLazyThreshold with the lazy max; times 2^kPOffset), whatever
    // the magnitude of the scores. The old max is scaled the same way, so a
    // max that does not move gives a correction of exactly 1: with the lazy
    // max, l is rescaled on every block but O only when the max moves, and
    // any other value would drift l against O block by block.
    auto exp_row = [&](int mt, int hi, int r, float m_new) {
      const float m_scaled = m_new == -INFINITY ? 0.f : __fmul_ru(m_new, scale_log2);
      correction[r] = ptx::exp2_approx(__fmul_ru(m[r], scale_log2) - m_scaled);
      // The exponents' reference: the max as seen from the shifted scores.
      const float ref =
          (kShift ? (m_new == -INFINITY ? 0.f : __fmul_ru(m_new - shift[r], scale_log2)) : m_scaled) - kPOffset;
      m[r] = m_new;
      float part_sum[kAcc];
      if constexpr (!kChunked) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          const float p0 = ptx::exp2_approx(fmaf(s[mt][nt][2 * hi], scale_log2, -ref));
          const float p1 = ptx::exp2_approx(fmaf(s[mt][nt][2 * hi + 1], scale_log2, -ref));
          s[mt][nt][2 * hi] = p0;
          s[mt][nt][2 * hi + 1] = p1;
          if constexpr (kSum) part_sum[nt % kAcc] = nt < kAcc ? p0 + p1 : part_sum[nt % kAcc] + (p0 + p1);
        }
      } else {
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          if (group_live(g)) {
#pragma unroll
            for (int nt = g * kAcc; nt < (g + 1) * kAcc && nt < kNTiles; ++nt) {
              const float p0 = ptx::exp2_approx(fmaf(s[mt][nt][2 * hi], scale_log2, -ref));
              const float p1 = ptx::exp2_approx(fmaf(s[mt][nt][2 * hi + 1], scale_log2, -ref));
              s[mt][nt][2 * hi] = p0;
              s[mt][nt][2 * hi + 1] = p1;
              if constexpr (kSum) part_sum[nt % kAcc] = g == 0 ? p0 + p1 : part_sum[nt % kAcc] + (p0 + p1);
            }
          } else {
#pragma unroll
            for (int nt = g * kAcc; nt < (g + 1) * kAcc && nt < kNTiles; ++nt) {
              s[mt][nt][2 * hi] = s[mt][nt][2 * hi + 1] = 0.f;
            }
          }
        }
      }
      if constexpr (kSum) {
        const float sum = merge(part_sum, [](float x, float y) { return x + y; });
        l[r] = fmaf(l[r], correction[r], sum);
      }
    };
    if constexpr (!kLazy) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int r = 2 * mt + hi;
          exp_row(mt, hi, r, row_max(mt, hi, r));
        }
      }
      return true;
    } else {
      float m_new[kRows];
      bool grow = false;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int r = 2 * mt + hi;
          m_new[r] = row_max(mt, hi, r);
          // A row's first visible keys always move its max (a row still at
          // -inf would read as empty in finalize()).
          grow = grow || (m[r] == -INFINITY ? m_new[r] != -INFINITY : (m_new[r] - m[r]) * scale_log2 > kLazyThreshold);
        }
      }
      const bool rescale = __any_sync(0xffffffffu, grow);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int r = 2 * mt + hi;
          exp_row(mt, hi, r, rescale ? m_new[r] : m[r]);
        }
      }
      return rescale;
    }
  }

  // O *= correction, row by row.
  template <int kNTilesO>
  __device__ __forceinline__ static void rescale(float (&o)[kMTiles][kNTilesO][4], const float (&correction)[kRows]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNTilesO; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][nt][e] *= correction[2 * mt + e / 2];
      }
    }
  }

  // Completes the row sums across the quad. inv_l[r] is 1/l (0 for a row
  // that saw no key) and lse[r] the natural-log log-sum-exp of the scaled
  // scores (-inf for such a row).
  __device__ __forceinline__ void finalize(float softmax_scale, float (&inv_l)[kRows], float (&lse)[kRows]) const {
    float sums[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) sums[r] = quad_sum(l[r]);
    finalize_sums(sums, softmax_scale, inv_l, lse);
  }

  // The same from whole-row sums computed elsewhere (update<..., false>).
  __device__ __forceinline__ void finalize_sums(const float (&sums)[kRows], float softmax_scale, float (&inv_l)[kRows],
                                                float (&lse)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool empty = sums[r] == 0.f || m[r] == -INFINITY;
      ptx::finalize_row(sums[r], m[r] * softmax_scale, inv_l[r], lse[r]);
      if (empty) {
        inv_l[r] = 0.f;
        lse[r] = -INFINITY;
      }
    }
  }
};

// An attention sink (a per-head logit, in the natural-log units of the
// scaled scores): one more term, exp(sink), in the row's softmax
// denominator, contributing nothing to O. Applied once to the row's final
// normaliser and LSE: lse' = log(exp(lse) + exp(sink)), and O's 1/l scaled
// by exp(lse - lse'). sink = -inf changes nothing; a row that saw no key
// (lse = -inf, inv_l = 0) gets LSE = sink and keeps O = 0.
// It runs at each tile's end, between its last P V and its store, so its
// dependent chain is kept to two MUFU operations: with e the smaller term
// over the larger (exp(-|lse - sink|), in [0, 1]), lse' = max + log(1 + e)
// and O's factor is 1 / (1 + e) where lse is the larger, e / (1 + e) else.
// The approximate intrinsics stay within a few 1e-6 (O's factor, relative;
// the LSE, absolute), far under an fp16 or bf16 output's step.
__device__ __forceinline__ void add_sink(float sink, float& inv_l, float& lse) {
  const float m = fmaxf(lse, sink);
  if (m == -INFINITY) return;
  const float d = lse - sink;  // +inf without a sink, -inf for a row that saw no key
  const float e = __expf(-fabsf(d));
  const float s = 1.f + e;
  lse = m + __logf(s);
  inv_l *= __fdividef(d >= 0.f ? 1.f : e, s);
}

}  // namespace flash
