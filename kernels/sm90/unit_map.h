// The sm90 kernel's padded tile numbering (tile_scheduler.cuh): which
// (batch x head, query block) tiles make up unit u. Plain arithmetic with no
// device code, so host tests can check that every tile is covered once and
// that the units cost about the same.
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
// for every j; when M is odd, the middle block is a unit of its own.
//
// UnitMapT<true> (kPairMiddles, off): when M is odd,
// heads go in twos and one unit holds both heads' middle blocks, so that no
// unit costs half the others. A lone middle unit matters when the grid is a
// multiple of the units per head: CTA c then always gets units at the same
// position within a head (192-row tiles at 2k keys: 11 blocks, 6 units a
// head, 132 SMs), and the CTAs holding the lone middles idle half the time.
// Measured (bench/NOTES.md), hd64 causal bf16, 192-row tiles: +4% at 2000
// and 2048 keys (11 blocks), no change at 8k (43 blocks, run 50); where M
// is even it pairs nothing, yet the kernel ran 1-3% slower at 1000-2500
// keys (6-14 blocks; run 54), from the code alone. Off: at M = 1 (a masked
// call of at most one tile a head) it puts two heads' only tiles in one
// unit, halving the CTAs a short call runs on (up to 2x slower when the
// heads are fewer than twice the SMs; found in review, not measured), and
// launch.cuh sizes the grid from this numbering's count, which the varlen
// ranked walk's unpaired count can exceed. To come back it needs M >= 3
// and more units than SMs, and a grid sized for the walk in use.
inline constexpr bool kPairMiddles = false;

template <bool kPair>
struct UnitMapT {
  int num_m_blocks;    // M: query blocks a head
  int heads_x_batch;   // heads_q * batch
  bool masked;

  // Units of one head, with the middle block of an odd M a unit of its own.
  FLASH_UNIT_MAP_FN int units_per_head() const { return masked ? (num_m_blocks + 1) / 2 : num_m_blocks; }

  FLASH_UNIT_MAP_FN int num_units() const {
    if constexpr (kPair) {
      // M units per two heads; a last head on its own has (M + 1) / 2.
      if (masked && num_m_blocks % 2 == 1) {
        return heads_x_batch / 2 * num_m_blocks + heads_x_batch % 2 * units_per_head();
      }
    }
    return units_per_head() * heads_x_batch;
  }

  // Tile k of unit u: its (batch x head) index and query block. Returns the
  // unit's tile count (1 or 2).
  FLASH_UNIT_MAP_FN int locate(int u, int k, int* bh, int* m_block) const {
    const int m = num_m_blocks;
    if constexpr (kPair) {
      if (masked && m % 2 == 1) {
        const int pairs = m / 2;  // (M-1-j, j) pairs a head; block `pairs` is the middle one
        const int first = 2 * (u / m);
        const int w = u % m;
        const bool two_heads = first + 1 < heads_x_batch;
        if (w == (two_heads ? 2 * pairs : pairs)) {  // the middle blocks' unit
          *bh = first + k;
          *m_block = pairs;
          return two_heads ? 2 : 1;
        }
        *bh = first + w / pairs;  // pairs > 0 here, as w < 2 * pairs
        const int j = w % pairs;
        *m_block = k == 0 ? m - 1 - j : j;
        return 2;
      }
    }
    const int per_head = units_per_head();
    *bh = u / per_head;
    const int j = u % per_head;
    if (!masked) {
      *m_block = m - 1 - j;
      return 1;
    }
    *m_block = k == 0 ? m - 1 - j : j;
    return m - 1 - j != j ? 2 : 1;
  }
};

// The numbering the kernel uses.
using UnitMap = UnitMapT<kPairMiddles>;

}  // namespace flash::sm90

#undef FLASH_UNIT_MAP_FN
