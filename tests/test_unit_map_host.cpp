// The sm90 kernel's padded tile numbering (kernels/sm90/unit_map.h), checked
// on the host: every (head, query block) tile belongs to exactly one unit,
// the unit count the launch sizes its grid with is the one the walk uses,
// and under a mask a unit pairs query blocks whose key counts add up to the
// same (M + 1, counting block m as m + 1 key blocks of a square causal
// call), except a lone middle block when M is odd.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sm90/unit_map.h"

namespace flash {
namespace {

using sm90::UnitMap;

TEST(UnitMap, EveryTileOnceAndPairedUnitsCostTheSame) {
  for (bool masked : {false, true}) {
    for (int m = 1; m <= 40; ++m) {
      for (int bh = 1; bh <= 9; ++bh) {
        SCOPED_TRACE(::testing::Message() << (masked ? "masked" : "unmasked") << " M " << m << " heads " << bh);
        const UnitMap map{m, bh, masked};
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
          if (masked && tiles == 2) EXPECT_EQ(cost, m + 1) << "unit " << u;
          if (masked && tiles == 1) {
            EXPECT_EQ(m % 2, 1) << "unit " << u;
            EXPECT_EQ(mb, m / 2) << "unit " << u;
            ++lone;
          }
        }
        for (size_t x = 0; x < seen.size(); ++x) {
          ASSERT_EQ(seen[x], 1) << "tile (head " << x / m << ", block " << x % m << ") covered " << seen[x] << " times";
        }
        EXPECT_EQ(lone, masked && m % 2 == 1 ? bh : 0);
      }
    }
  }
}

}  // namespace
}  // namespace flash
