// fp8::fp16_row_exponent (kernels/common/fp16_row_scale.h) against its
// contract: over every finite bf16 value as a row's largest magnitude, the
// scaled largest lands in [2^14, 2^15) (or below, where e is capped), and
// every bf16 magnitude up to the largest and at least 2^-31 of it scales to
// a value fp16 holds exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/fp16_row_scale.h"

namespace {

double bf16_value(uint32_t bits) {
  const uint32_t u = bits << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Whether fp16 (1 sign, 5 exponent, 10 stored significand bits, subnormals
// down to 2^-24) holds x exactly.
bool fp16_exact(double x) {
  x = std::fabs(x);
  if (x == 0) return true;
  if (x > 65504) return false;
  if (x < 0x1p-14) return std::floor(x * 0x1p24) == x * 0x1p24;
  int exp2;
  std::frexp(x, &exp2);  // x in [2^(exp2 - 1), 2^exp2): 11 significant bits
  const double q = std::ldexp(x, 11 - exp2);
  return std::floor(q) == q;
}

TEST(Fp16RowScale, LargestLandsInRange) {
  int capped = 0;
  for (uint32_t largest = 0; largest < 0x7f80u; ++largest) {
    const int e = flash::fp8::fp16_row_exponent(largest);
    ASSERT_LE(e, 126) << largest;
    ASSERT_GE(e, -113) << largest;
    const double scaled = std::ldexp(bf16_value(largest), e);
    ASSERT_LT(scaled, 0x1p15) << largest;
    if (scaled < 0x1p14) {  // capped: only rows below 2^-112
      ASSERT_EQ(e, 126) << largest;
      ASSERT_LT(bf16_value(largest), 0x1p-112) << largest;
      ++capped;
    }
  }
  EXPECT_GT(capped, 0);
  // An infinity or a NaN as the largest: 2^e and 2^-e still normal floats.
  EXPECT_EQ(flash::fp8::fp16_row_exponent(0x7f80u), -114);
  EXPECT_EQ(flash::fp8::fp16_row_exponent(0x7fc0u), -114);
}

TEST(Fp16RowScale, ElementsAboveTheBoundAreExact) {
  int64_t exact = 0;
  for (uint32_t largest = 1; largest < 0x7f80u; largest += 37) {
    const int e = flash::fp8::fp16_row_exponent(largest);
    if (std::ldexp(bf16_value(largest), e) < 0x1p14) continue;  // capped
    const double bound = std::ldexp(bf16_value(largest), -31);
    for (uint32_t v = 0; v <= largest; ++v) {
      if (bf16_value(v) < bound) continue;
      ASSERT_TRUE(fp16_exact(std::ldexp(bf16_value(v), e))) << "largest " << largest << " element " << v;
      ++exact;
    }
  }
  EXPECT_GT(exact, 1000000);
}

}  // namespace
