// The sm90 kernel's tile numbering (tile_scheduler.cuh; the padded walk of
// a batch, and the compact varlen walk within one sequence): which
// (batch x head, query block) tiles make up unit u. Plain arithmetic with no
// device code, so host tests can check that every tile is covered once and
// that the CTAs' shares cost about the same.
#pragma once

#if defined(__CUDACC__)
#define FLASH_UNIT_MAP_FN __host__ __device__ __forceinline__
#else
#define FLASH_UNIT_MAP_FN inline
#endif

namespace flash::sm90 {

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
struct UnitMap {
  int num_m_blocks;    // M: query blocks a head
  int heads_x_batch;   // heads_q * batch (the compact varlen walk: one sequence's heads_q)
  bool masked;

  // Units of one head, counting its middle block when M is odd.
  FLASH_UNIT_MAP_FN int units_per_head() const { return masked ? (num_m_blocks + 1) / 2 : num_m_blocks; }

  FLASH_UNIT_MAP_FN int num_units() const { return units_per_head() * heads_x_batch; }

  // Tile k of unit u: its (batch x head) index and query block. Returns the
  // unit's tile count (1 or 2).
  FLASH_UNIT_MAP_FN int locate(int u, int k, int* bh, int* m_block) const {
    const int m = num_m_blocks;
    if (!masked) {
      *bh = u / m;
      *m_block = m - 1 - u % m;
      return 1;
    }
    const int pairs = m / 2;  // pair units a head
    const int pair_units = pairs * heads_x_batch;
    if (u >= pair_units) {  // a middle block (M odd); every unit when M = 1
      *bh = u - pair_units;
      *m_block = pairs;
      return 1;
    }
    *bh = u / pairs;  // pairs > 0 here, as u < pair_units
    const int j = u % pairs;
    *m_block = k == 0 ? m - 1 - j : j;
    return 2;
  }
};

}  // namespace flash::sm90

#undef FLASH_UNIT_MAP_FN
