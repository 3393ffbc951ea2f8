// The sm90 kernel's padded tile numbering (kernels/sm90/unit_map.h), checked
// on the host for both forms (UnitMapT<false>, the kernel's, and
// UnitMapT<true>, which pairs two heads' middle blocks; off): every (head, query block) tile belongs to
// exactly one unit, and under a mask a unit pairs query blocks whose key
// counts add up to the same (M + 1, counting block m as m + 1 key blocks of
// a square causal call), except a lone middle block when M is odd.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sm90/unit_map.h"

namespace flash {
namespace {

template <bool kPair>
void check_numbering() {
  for (bool masked : {false, true}) {
    for (int m = 1; m <= 40; ++m) {
      for (int bh = 1; bh <= 9; ++bh) {
        SCOPED_TRACE(::testing::Message() << (kPair ? "paired middles, " : "") << (masked ? "masked" : "unmasked")
                                          << " M " << m << " heads " << bh);
        const sm90::UnitMapT<kPair> map{m, bh, masked};
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
        // Lone middle blocks: one a head, or with paired middles only a last head without a partner.
        const int expected_lone = masked && m % 2 == 1 ? (kPair ? bh % 2 : bh) : 0;
        EXPECT_EQ(lone, expected_lone);
      }
    }
  }
}

TEST(UnitMap, EveryTileOnceAndPairedUnitsCostTheSame) { check_numbering<false>(); }
TEST(UnitMap, PairedMiddlesEveryTileOnce) { check_numbering<true>(); }

// What pairing the middle blocks is for: 192-row tiles at 2k keys (11
// blocks), 8 x 32 heads, 132 CTAs walking units c, c + 132, ...: with lone
// middles a sixth of the CTAs get only those (half the others' work); paired,
// every CTA's blocks are within one unit of every other's.
TEST(UnitMap, PairedMiddlesBalanceTheRoundRobin) {
  auto spread = [](auto map) {
    const int ctas = 132;
    std::vector<int> load(ctas, 0);
    for (int u = 0; u < map.num_units(); ++u) {
      int h, mb;
      const int tiles = map.locate(u, 0, &h, &mb);
      for (int k = 0; k < tiles; ++k) {
        map.locate(u, k, &h, &mb);
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
  EXPECT_LE(spread(sm90::UnitMapT<true>{11, 8 * 32, true}), 12);
  EXPECT_GE(spread(sm90::UnitMapT<false>{11, 8 * 32, true}), 60);  // the premise
}

// The kernel's numbering gives a short masked call (one query block a head)
// a unit per head, so it runs on as many CTAs as it has heads: pairing the
// middle blocks at M = 1 puts two heads in one unit and halves them
// (unit_map.h, kPairMiddles; found in review). Also, launch.cuh sizes the
// grid from this count, so it must not be below the varlen ranked walk's
// count, which is unpaired: (M + 1) / 2 units a head.
TEST(UnitMap, KernelNumberingKeepsAUnitPerHeadAndCoversTheRankedWalk) {
  for (int heads = 1; heads <= 300; ++heads) {
    EXPECT_EQ((sm90::UnitMap{1, heads, true}.num_units()), heads) << heads << " heads";
    for (int m = 1; m <= 40; ++m) {
      EXPECT_GE((sm90::UnitMap{m, heads, true}.num_units()), (sm90::UnitMapT<false>{m, heads, true}.num_units()))
          << "M " << m << ", " << heads << " heads";
    }
  }
}

}  // namespace
}  // namespace flash
