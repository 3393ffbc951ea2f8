// The sm90 kernel's tile numbering (tile_scheduler.cuh; the padded walk of
// a batch, and the compact varlen walk within one sequence): which
// (batch x head, query block) tiles make up unit u. Plain arithmetic with no
// device code, so host tests can check that every tile is covered once and
// that the CTAs' shares cost about the same. locate() divides by a divisor
// fixed for the call: the padded walk passes the launcher's FastDivmod of
// it (common/fast_divmod.h); the compact varlen walk, whose divisor differs
// by sequence, divides plainly; host tests check both forms.
#pragma once

#if defined(__CUDACC__)
#define FLASH_UNIT_MAP_FN __host__ __device__ __forceinline__
#else
#define FLASH_UNIT_MAP_FN inline
#endif

namespace flash::sm90 {

// A runtime integer division, for locate()'s callers without a FastDivmod.
struct PlainDivisor {
  int divisor;
  FLASH_UNIT_MAP_FN void divmod(int n, int* q, int* r) const {
    *q = n / divisor;
    *r = n % divisor;
  }
};

// Unmasked: one tile a unit, every block of a head in turn, last block
// first. Masked (causal or window): a unit is query block M-1-j (long) then
// block j (short) of one head, so their key counts add up to about the same
// for every j; a head's pair units are consecutive, so the CTAs running at
// any moment share few K/V heads and mostly hit in L2.
//
// When M is odd, each head's middle block is a unit of its own, half the
// cost of a pair. These come last, after every head's pairs: the CTAs deal
// units round-robin (c, c + grid, ...), so a list of equal pairs followed by
// half-cost middles leaves no CTA more than one unit's cost ahead of
// another. Numbered inside each head instead, the middles land on the same
// CTAs whenever the grid is a multiple of the units a head (192-row tiles at
// 2k keys: 11 blocks, 6 units a head, 132 CTAs), and those CTAs idle half
// the time (docs/perf/sm90-schedule.md).
// The unit count, and so the grid, does not change: (M + 1) / 2 a head.
//
// Longest first (masked, `section` > 0; the padded walk of a causal call
// only): one tile a unit, dealt so that the CTAs' loads come out about
// equal at the end instead of within one pair. The (batch x head) indices
// are cut into sections of `section` (the last may be shorter), whose K/V
// the launcher sizes to stay in L2 while the section runs. Within a
// section the tiles go by query block, every head of the section at one
// block before the next block, the longest block first; every other
// section runs the other way round (shortest first), so that the list's
// costs rise and fall without jumps, and the last section is a longest-
// first one, so the call ends on its shortest tiles. CTA c takes slots c,
// c + grid, ... as before, and slot u is list entry u in even rounds
// (u / grid) and the round's entries in reverse in odd ones (a snake):
// over a falling or rising run of costs two consecutive rounds then give
// every CTA about the same sum. The unit count is M a head.
struct UnitMap {
  int num_m_blocks;    // M: query blocks a head
  int heads_x_batch;   // heads_q * batch (the compact varlen walk: one sequence's heads_q)
  bool masked;
  int section = 0;     // longest first: (batch x head) indices a section (0: causal pairs)
  int grid = 1;        // longest first: the CTAs dealing the slots (gridDim.x)

  FLASH_UNIT_MAP_FN bool singles() const { return masked && section > 0; }

  // Units of one head, counting its middle block when M is odd.
  FLASH_UNIT_MAP_FN int units_per_head() const {
    return masked && !singles() ? (num_m_blocks + 1) / 2 : num_m_blocks;
  }

  FLASH_UNIT_MAP_FN int num_units() const { return units_per_head() * heads_x_batch; }

  // What locate() divides a unit index by outside the longest-first walk:
  // a head's query blocks unmasked, its pairs masked (0 when M = 1, where
  // no unit is a pair and nothing divides by it).
  FLASH_UNIT_MAP_FN int unit_divisor() const { return masked ? num_m_blocks / 2 : num_m_blocks; }

  // Tile k of unit u: its (batch x head) index and query block. Returns the
  // unit's tile count (1 or 2).
  FLASH_UNIT_MAP_FN int locate(int u, int k, int* bh, int* m_block) const {
    return locate(u, k, bh, m_block, PlainDivisor{unit_divisor()});
  }
  // The same, dividing by unit_divisor() through `div` (PlainDivisor, or a
  // FastDivmod of that divisor, which the longest-first walk does not use).
  template <typename Div>
  FLASH_UNIT_MAP_FN int locate(int u, int k, int* bh, int* m_block, const Div& div) const {
    const int m = num_m_blocks;
    if (singles()) {
      const int total = m * heads_x_batch;
      const int round = u / grid;
      int entry = u;
      if (round % 2 == 1) {
        const int in_round = total - round * grid < grid ? total - round * grid : grid;
        entry = round * grid + in_round - 1 - u % grid;
      }
      const int s = entry / (section * m);
      const int first_head = s * section;
      const int heads = heads_x_batch - first_head < section ? heads_x_batch - first_head : section;
      const int q = entry - first_head * m;
      const int step = q / heads;  // 0 .. M - 1: the section's step through its query blocks
      *bh = first_head + q % heads;
      const int sections = (heads_x_batch + section - 1) / section;
      *m_block = (sections - 1 - s) % 2 == 0 ? m - 1 - step : step;
      return 1;
    }
    if (!masked) {
      int q, r;
      div.divmod(u, &q, &r);
      *bh = q;
      *m_block = m - 1 - r;
      return 1;
    }
    const int pairs = m / 2;  // pair units a head
    const int pair_units = pairs * heads_x_batch;
    if (u >= pair_units) {  // a middle block (M odd); every unit when M = 1
      *bh = u - pair_units;
      *m_block = pairs;
      return 1;
    }
    int j;
    div.divmod(u, bh, &j);  // by pairs, > 0 here as u < pair_units
    *m_block = k == 0 ? m - 1 - j : j;
    return 2;
  }
};

// The section (UnitMap::section) a dense causal call's padded walk runs
// longest first with, or 0 for causal pairs: 192-row tiles (head dims 64, 96)
// with at least kLongestFirstMinBlocks query blocks a head, where the pairs'
// last round leaves the CTAs' loads furthest apart (up to 6% by
// scripts/sched-balance-model.py, against about 1% longest first). A
// section holds the largest power of two of (batch x head) indices whose K
// and V stay within kLongestFirstL2Bytes (`kv_bytes` of one K/V head,
// shared by q_per_kv of them), at most all of them: by the model, sections
// that divide the heads evenly balance best.
inline constexpr int kLongestFirstMinBlocks = 22;
inline constexpr long long kLongestFirstL2Bytes = 25ll << 20;
FLASH_UNIT_MAP_FN int longest_first_section(int block_m, int num_m_blocks, int heads_x_batch, long long kv_bytes,
                                            int q_per_kv) {
  if (block_m != 192 || num_m_blocks < kLongestFirstMinBlocks || heads_x_batch < 1 || kv_bytes < 1) return 0;
  const long long fit = kLongestFirstL2Bytes * q_per_kv / kv_bytes;
  long long section = 1;
  while (section * 2 <= fit) section *= 2;
  return section > heads_x_batch ? heads_x_batch : static_cast<int>(section);
}

}  // namespace flash::sm90

#undef FLASH_UNIT_MAP_FN
