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
// (Pairing two heads' middle blocks instead, so that no unit costs half the
// others, measured no faster at hd64 8k keys, the one swept shape where it
// applied: bench/NOTES.md, run 50.)
struct UnitMap {
  int num_m_blocks;    // M: query blocks a head
  int heads_x_batch;   // heads_q * batch
  bool masked;

  FLASH_UNIT_MAP_FN int units_per_head() const { return masked ? (num_m_blocks + 1) / 2 : num_m_blocks; }
  FLASH_UNIT_MAP_FN int num_units() const { return units_per_head() * heads_x_batch; }

  // Tile k of unit u: its (batch x head) index and query block. Returns the
  // unit's tile count (1 or 2).
  FLASH_UNIT_MAP_FN int locate(int u, int k, int* bh, int* m_block) const {
    const int m = num_m_blocks;
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

}  // namespace flash::sm90

#undef FLASH_UNIT_MAP_FN
