// flash::cp's zigzag ring schedule (src/cp/schedule.h), token by token: over
// all steps of all ranks, every (query, key) pair the unsharded call sees is
// computed exactly once and no other pair ever is, causal or not.
#include <gtest/gtest.h>

#include <vector>

#include "src/cp/schedule.h"

namespace {

using flash::cp::detail::Part;
using flash::cp::detail::parts_of_step;
using flash::cp::detail::source_of_step;

// Global chunk of a rank's local chunk x (0: a, 1: b) in a ring of `world`.
int global_chunk(int rank, int world, int x) {
  return x == 0 ? rank : 2 * world - 1 - rank;
}

TEST(CpSchedule, EveryVisiblePairOnceAndNoOther) {
  const int c = 3;  // tokens per chunk
  for (int world = 1; world <= 8; ++world) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE("world " + std::to_string(world) + (causal ? " causal" : ""));
      const int n = 2 * world * c;
      std::vector<int> count(static_cast<size_t>(n * n), 0);
      int calls = 0;
      for (int rank = 0; rank < world; ++rank) {
        for (int step = 0; step < world; ++step) {
          const int source = source_of_step(rank, world, step);
          ASSERT_EQ(source, ((rank - step) % world + world) % world);
          for (const Part& part : parts_of_step(rank, world, step, causal)) {
            ++calls;
            ASSERT_TRUE(part.q_chunk == 0 || part.q_chunk == 1);
            ASSERT_TRUE(part.keys == 1 || part.keys == 2);
            const int keys = part.keys * c;
            for (int i = 0; i < c; ++i) {
              const int q = global_chunk(rank, world, part.q_chunk) * c + i;
              for (int j = 0; j < keys; ++j) {
                if (part.causal && j > i + keys - c) continue;  // bottom-right causal
                const int k = global_chunk(source, world, j / c) * c + j % c;
                ++count[static_cast<size_t>(q * n + k)];
              }
            }
          }
        }
      }
      int wrong = 0;
      for (int q = 0; q < n; ++q) {
        for (int k = 0; k < n; ++k) {
          const int want = !causal || k <= q ? 1 : 0;
          if (count[static_cast<size_t>(q * n + k)] != want && wrong++ < 5) {
            ADD_FAILURE() << "pair (" << q << ", " << k << ") computed " << count[static_cast<size_t>(q * n + k)]
                          << " times, want " << want;
          }
        }
      }
      EXPECT_EQ(wrong, 0);
      EXPECT_GT(calls, 0);
    }
  }
}

// Zigzag balances causal work: every rank computes the same number of
// (query, key) pairs.
TEST(CpSchedule, CausalWorkIsBalanced) {
  const int c = 4;
  for (int world = 2; world <= 8; ++world) {
    std::vector<long> pairs(static_cast<size_t>(world), 0);
    for (int rank = 0; rank < world; ++rank) {
      for (int step = 0; step < world; ++step) {
        for (const Part& part : parts_of_step(rank, world, step, true)) {
          const long keys = part.keys * c;
          pairs[static_cast<size_t>(rank)] += part.causal ? c * keys - c * (c - 1) / 2 : c * keys;
        }
      }
    }
    for (int rank = 1; rank < world; ++rank) EXPECT_EQ(pairs[static_cast<size_t>(rank)], pairs[0]) << world;
  }
}

}  // namespace
