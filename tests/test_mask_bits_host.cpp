// The per-element mask's bit words (kernels/common/mask_bits.h) against the
// rule they encode: thread column t of a row (key col0 + 2 (lane % 4) +
// 8 (t / 2) + t % 2) is visible iff begin <= key < limit. Exhaustive over
// the fragment widths the kernels use and intervals around the fragment.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/common/mask_bits.h"

namespace {

template <int kN>
void check_width() {
  constexpr int kT = 2 * kN;
  int checked = 0;
  for (int col0 : {0, 64, 1000}) {
    for (int quad = 0; quad < 4; ++quad) {
      const int first_col = col0 + 2 * quad;
      for (int begin = col0 - 12; begin <= col0 + 8 * kN + 12; ++begin) {
        for (int limit = begin - 3; limit <= col0 + 8 * kN + 12; ++limit) {
          const int seen_begin = flash::mask_bits::below<kN>(begin - first_col);
          const int seen_end = flash::mask_bits::below<kN>(limit - first_col);
          for (int t = 0; t < kT; ++t) {
            const uint32_t word = flash::mask_bits::word(seen_begin, seen_end, t / 32);
            const int key = first_col + 8 * (t / 2) + t % 2;
            const bool visible = begin <= key && key < limit;
            ASSERT_EQ(((word >> (t % 32)) & 1u) != 0, visible)
                << "kN " << kN << " col0 " << col0 << " lane % 4 " << quad << " begin " << begin << " limit "
                << limit << " t " << t;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(MaskBits, MatchTheColumnRule) {
  // kBlockN / 8 of every sm90 tile whose kernels mask with the words
  // (causal and right-window calls without a KV cache; the FP8 prefill's
  // 192-key blocks among them), and 17 for a second word of one bit pair.
  check_width<8>();   // 64-key blocks
  check_width<10>();  // 80
  check_width<12>();  // 96
  check_width<14>();  // 112
  check_width<16>();  // 128: exactly one word a row
  check_width<17>();  // 136
  check_width<20>();  // 160
  check_width<22>();  // 176
  check_width<24>();  // 192
}

TEST(MaskBits, FirstBitsClampsItsCount) {
  EXPECT_EQ(flash::mask_bits::first_bits(-5), 0u);
  EXPECT_EQ(flash::mask_bits::first_bits(0), 0u);
  EXPECT_EQ(flash::mask_bits::first_bits(1), 1u);
  EXPECT_EQ(flash::mask_bits::first_bits(31), 0x7fffffffu);
  EXPECT_EQ(flash::mask_bits::first_bits(32), 0xffffffffu);
  EXPECT_EQ(flash::mask_bits::first_bits(40), 0xffffffffu);
}

}  // namespace
