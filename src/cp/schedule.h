// The zigzag ring schedule of flash::cp, pure host logic (no NCCL, no CUDA):
// which attention calls rank r makes at each step of the ring.
//
// The N tokens of each sequence are cut into 2R chunks of c = N / 2R; rank
// r holds chunks r and 2R - 1 - r ("a" and "b"), concatenated, so that
// every rank has the same causal work. At step s the rank holds the K/V of
// rank t = (r - s) mod R (its own at step 0): chunks t and 2R - 1 - t,
// concatenated the same way. Under a causal mask, chunk x sees chunk y
// whole when y < x, causally when y == x, not at all when y > x:
//   s = 0:   a vs t's first chunk, causal; b vs both, causal (bottom-right:
//            b's row i sees all of a and b's keys up to i);
//   t < r:   a and b each vs t's first chunk, whole (t's second chunk is
//            past both);
//   t > r:   b vs both of t's chunks, whole (a is before both).
// Without a mask every step is a and b each vs both of t's chunks.
#pragma once

#include <vector>

namespace flash::cp::detail {

struct Part {
  int q_chunk;  // 0: the rank's first chunk (a), 1: its second (b)
  int keys;     // K/V rows from the start of the held pair: 1 = its first chunk, 2 = both
  bool causal;  // bottom-right causal mask over those rows
};

// The calls of step `step` (0 .. world - 1) on rank `rank`.
std::vector<Part> parts_of_step(int rank, int world, int step, bool causal);

// The rank whose K/V rank `rank` holds at step `step`.
inline int source_of_step(int rank, int world, int step) {
  return ((rank - step) % world + world) % world;
}

}  // namespace flash::cp::detail
