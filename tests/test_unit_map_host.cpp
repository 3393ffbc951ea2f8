// The sm90 kernel's padded tile numbering (kernels/sm90/unit_map.h), checked
// on the host: every (head, query block) tile belongs to exactly one unit;
// under a mask a unit pairs query blocks whose key counts add up to the same
// (M + 1, counting block m as m + 1 key blocks of a square causal call),
// except a head's lone middle block when M is odd, and those come last.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sm90/unit_map.h"

namespace flash {
namespace {

void check_numbering() {
  for (bool masked : {false, true}) {
    for (int m = 1; m <= 40; ++m) {
      for (int bh = 1; bh <= 9; ++bh) {
        SCOPED_TRACE(::testing::Message() << (masked ? "masked" : "unmasked") << " M " << m << " heads " << bh);
        const sm90::UnitMap map{m, bh, masked};
        std::vector<int> seen(static_cast<size_t>(m * bh), 0);
        int lone = 0;
        for (int u = 0; u < map.num_units(); ++u) {
          int h = -1, mb = -1;
          const int tiles = map.locate(u, 0, &h, &mb);
          ASSERT_TRUE(tiles == 1 || tiles == 2) << "unit " << u;
          ASSERT_TRUE(masked || tiles == 1) << "unit " << u;
          int cost = 0;
          for (int k = 0; k < tiles; ++k) {
            map.locate(u, k, &h, &mb);
            ASSERT_GE(h, 0) << "unit " << u;
            ASSERT_LT(h, bh) << "unit " << u;
            ASSERT_GE(mb, 0) << "unit " << u;
            ASSERT_LT(mb, m) << "unit " << u;
            ++seen[static_cast<size_t>(h * m + mb)];
            cost += mb + 1;
          }
          if (masked && tiles == 2) {
            EXPECT_EQ(cost, m + 1) << "unit " << u;
            // A head's pairs are consecutive units (its K/V stays in L2 while they run).
            EXPECT_EQ(h, u / (m / 2)) << "unit " << u;
          }
          if (masked && tiles == 1) {
            EXPECT_EQ(m % 2, 1) << "unit " << u;
            EXPECT_EQ(mb, m / 2) << "unit " << u;
            EXPECT_GE(u, m / 2 * bh) << "a middle block before the last pair";
            ++lone;
          }
        }
        for (size_t x = 0; x < seen.size(); ++x) {
          ASSERT_EQ(seen[x], 1) << "tile (head " << x / m << ", block " << x % m << ") covered " << seen[x] << " times";
        }
        EXPECT_EQ(lone, masked && m % 2 == 1 ? bh : 0);  // one middle block a head
      }
    }
  }
}

TEST(UnitMap, EveryTileOnceAndPairedUnitsCostTheSame) { check_numbering(); }

// What numbering the middle blocks last is for: 192-row tiles at 2k keys
// (11 blocks), 8 x 32 heads, 132 CTAs walking units c, c + 132, ...
// Numbered within each head (6 units: 5 pairs, then the middle), the middles
// all fall on the CTAs c = 5 mod 6, which then do half the others' work;
// numbered last, every CTA's key blocks are within one pair's of every
// other's.
TEST(UnitMap, MiddleBlocksLastBalanceTheRoundRobin) {
  const int ctas = 132, m = 11, heads = 8 * 32;
  auto spread = [&](auto locate, int units) {
    std::vector<int> load(ctas, 0);
    for (int u = 0; u < units; ++u) {
      int h, mb;
      const int tiles = locate(u, 0, &h, &mb);
      for (int k = 0; k < tiles; ++k) {
        locate(u, k, &h, &mb);
        load[static_cast<size_t>(u % ctas)] += mb + 1;
      }
    }
    int lo = load[0], hi = load[0];
    for (int l : load) {
      lo = l < lo ? l : lo;
      hi = l > hi ? l : hi;
    }
    return hi - lo;
  };
  const sm90::UnitMap map{m, heads, true};
  EXPECT_LE(spread([&](int u, int k, int* h, int* mb) { return map.locate(u, k, h, mb); }, map.num_units()), m + 1);
  // The premise: the same units numbered within each head.
  const int per_head = (m + 1) / 2;
  auto within_head = [&](int u, int k, int* h, int* mb) {
    *h = u / per_head;
    const int j = u % per_head;
    *mb = k == 0 ? m - 1 - j : j;
    return m - 1 - j != j ? 2 : 1;
  };
  EXPECT_GE(spread(within_head, per_head * heads), 60);
}

// The unit count, from which launch.cuh sizes the grid, is (M + 1) / 2 a
// head under a mask: a short masked call (one query block a head) gets a
// CTA per head, and the grid covers the varlen ranked walk, whose units
// are numbered per sequence with the same count (tile_scheduler.cuh).
TEST(UnitMap, UnitCountIsHalfTheBlocksRoundedUpAHead) {
  for (int heads = 1; heads <= 300; ++heads) {
    for (int m = 1; m <= 40; ++m) {
      EXPECT_EQ((sm90::UnitMap{m, heads, true}.num_units()), (m + 1) / 2 * heads) << "M " << m << ", " << heads << " heads";
      EXPECT_EQ((sm90::UnitMap{m, heads, false}.num_units()), m * heads) << "M " << m << ", " << heads << " heads";
    }
  }
}

}  // namespace
}  // namespace flash
