// The sm90 kernel's padded tile numbering (kernels/sm90/unit_map.h), checked
// on the host: every (head, query block) tile belongs to exactly one unit;
// under a mask a unit pairs query blocks whose key counts add up to the same
// (M + 1, counting block m as m + 1 key blocks of a square causal call),
// except a head's lone middle block when M is odd, and those come last.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/fast_divmod.h"
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

// Longest first (UnitMap::section > 0): one tile a unit, every tile once,
// whatever the grid, the section or a short last section and last round.
TEST(UnitMap, LongestFirstCoversEveryTileOnce) {
  for (int m : {1, 2, 7, 22, 43}) {
    for (int bh : {1, 3, 8, 32, 37}) {
      for (int section : {1, 2, 5, 8, 64}) {
        for (int grid : {1, 7, 132}) {
          SCOPED_TRACE(::testing::Message() << "M " << m << " heads " << bh << " section " << section << " grid " << grid);
          const sm90::UnitMap map{m, bh, true, section, grid};
          ASSERT_EQ(map.num_units(), m * bh);
          std::vector<int> seen(static_cast<size_t>(m * bh), 0);
          for (int u = 0; u < map.num_units(); ++u) {
            int h = -1, mb = -1;
            ASSERT_EQ(map.locate(u, 0, &h, &mb), 1) << "unit " << u;
            ASSERT_GE(h, 0) << "unit " << u;
            ASSERT_LT(h, bh) << "unit " << u;
            ASSERT_GE(mb, 0) << "unit " << u;
            ASSERT_LT(mb, m) << "unit " << u;
            ++seen[static_cast<size_t>(h * m + mb)];
          }
          for (size_t x = 0; x < seen.size(); ++x) ASSERT_EQ(seen[x], 1) << "tile " << x;
        }
      }
    }
  }
}

// What longest first is for: hd64 causal at 16k tokens (86 blocks of 192
// rows, 32 heads, 132 CTAs; block m costs m + 1). Causal pairs end with
// 1376 equal units over 132 CTAs, 10.4 rounds: the busiest CTA 5.5% over
// the mean. Longest first in sections of 4 heads (the launcher's choice
// there) ends 1.0% over it, in one section 0.2% (the host model,
// scripts/sched-balance-model.py, counts the same); the last section runs
// longest first, so the call ends on short tiles.
TEST(UnitMap, LongestFirstBalancesALongCausalCall) {
  const int ctas = 132, m = 86, heads = 32;
  auto busiest_over_mean = [&](const sm90::UnitMap& map) {
    std::vector<long> load(ctas, 0);
    long total = 0;
    for (int u = 0; u < map.num_units(); ++u) {
      int h, mb;
      const int tiles = map.locate(u, 0, &h, &mb);
      for (int k = 0; k < tiles; ++k) {
        map.locate(u, k, &h, &mb);
        load[static_cast<size_t>(u % ctas)] += mb + 1;
        total += mb + 1;
      }
    }
    long hi = 0;
    for (long l : load) hi = l > hi ? l : hi;
    return static_cast<double>(hi) * ctas / static_cast<double>(total);
  };
  EXPECT_GT(busiest_over_mean(sm90::UnitMap{m, heads, true}), 1.04);
  EXPECT_LT(busiest_over_mean(sm90::UnitMap{m, heads, true, 4, ctas}), 1.011);
  EXPECT_LT(busiest_over_mean(sm90::UnitMap{m, heads, true, heads, ctas}), 1.003);
  int h, mb;
  sm90::UnitMap{m, heads, true, 4, ctas}.locate(m * heads - 1, 0, &h, &mb);
  EXPECT_LE(mb, 1) << "the last slot holds one of the shortest tiles";
}

// Which calls run longest first (the launcher's rule): 192-row tiles with
// at least 22 query blocks a head, sections of a power of two of heads
// whose K/V stay within 25 MiB.
TEST(UnitMap, LongestFirstSectionRule) {
  const long long per_head = 16384LL * 128 * 2;  // 16k keys, K and V of 64 columns, bf16
  EXPECT_EQ(sm90::longest_first_section(192, 86, 32, per_head, 1), 4);   // 25 MiB / 4 MiB, down to a power of two
  EXPECT_EQ(sm90::longest_first_section(192, 86, 32, per_head, 4), 16);  // GQA: 4 query heads a K/V head
  EXPECT_EQ(sm90::longest_first_section(192, 86, 4, per_head, 4), 4);    // at most every head
  EXPECT_EQ(sm90::longest_first_section(192, 21, 32, per_head, 1), 0);   // too few blocks: pairs
  EXPECT_EQ(sm90::longest_first_section(128, 128, 32, per_head, 1), 0);  // 128-row tiles: pairs
  EXPECT_EQ(sm90::longest_first_section(192, 86, 32, 64LL << 20, 1), 1); // a head alone past the budget
}


// FastDivmod against the division operator: every divisor up to 2048 on
// the numerators around its multiples, near 2^31 and at random; powers of
// two and their neighbours; random divisors up to 2^31 - 1.
TEST(FastDivmod, MatchesTheDivisionOperator) {
  std::mt19937_64 rng(7);
  int64_t failures = 0;
  const auto check = [&](int d, int64_t n) {
    if (n < 0 || n > INT32_MAX) return;
    const FastDivmod f = FastDivmod::make(d);
    int q = -1, r = -1;
    f.divmod(static_cast<int>(n), &q, &r);
    if (q != n / d || r != n % d) {
      if (failures++ < 10) ADD_FAILURE() << n << " / " << d << " gave " << q << " r " << r;
    }
  };
  for (int d = 1; d <= 2048; ++d) {
    for (int64_t n = 0; n < 3 * d + 2; ++n) check(d, n);
    const int64_t top = int64_t{INT32_MAX} / d * d;
    for (int64_t e = -2 * d - 1; e <= d; ++e) check(d, top + e);
    for (int i = 0; i < 200; ++i) check(d, static_cast<int64_t>(rng() & INT32_MAX));
  }
  for (int s = 1; s < 31; ++s) {
    for (int e = -2; e <= 2; ++e) {
      const int64_t d = (int64_t{1} << s) + e;
      if (d < 1 || d > INT32_MAX) continue;
      for (int64_t n : {int64_t{0}, d - 1, d, d + 1, int64_t{INT32_MAX} / d * d - 1, int64_t{INT32_MAX} / d * d,
                        int64_t{INT32_MAX}}) {
        check(static_cast<int>(d), n);
      }
      for (int i = 0; i < 2000; ++i) check(static_cast<int>(d), static_cast<int64_t>(rng() & INT32_MAX));
    }
  }
  for (int i = 0; i < 200000; ++i) {
    const int d = 1 + static_cast<int>(rng() % INT32_MAX);
    const int64_t n = static_cast<int64_t>(rng() & INT32_MAX);
    check(d, n);
    check(d, n - n % d);
    check(d, n - n % d - 1);
  }
  EXPECT_EQ(failures, 0);
}

// The kernel's locate() through the launcher's FastDivmod numbers every
// unit as the plain division does.
TEST(UnitMap, LocateWithAFastDivmodMatchesThePlainDivision) {
  for (bool masked : {false, true}) {
    for (int m = 1; m <= 40; ++m) {
      for (int bh : {1, 2, 3, 7, 64, 1000}) {
        const sm90::UnitMap map{m, bh, masked};
        const FastDivmod div = FastDivmod::make(map.unit_divisor());
        for (int u = 0; u < map.num_units(); ++u) {
          for (int k = 0; k < 2; ++k) {
            int h1 = -1, b1 = -1, h2 = -2, b2 = -2;
            const int t1 = map.locate(u, k, &h1, &b1);
            const int t2 = map.locate(u, k, &h2, &b2, div);
            if (k >= t1) continue;
            ASSERT_EQ(t1, t2) << "M " << m << " heads " << bh << " unit " << u;
            ASSERT_EQ(h1, h2) << "M " << m << " heads " << bh << " unit " << u << " tile " << k;
            ASSERT_EQ(b1, b2) << "M " << m << " heads " << bh << " unit " << u << " tile " << k;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace flash
