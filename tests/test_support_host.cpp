// Host pieces of the test support library that every GPU comparison relies
// on: fp16/bf16 <-> float conversion. Pure host; always runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "device_tensor.h"

namespace {

using flash::DType;
using flash::ref::from_float;
using flash::ref::to_float;

TEST(HostConversion, KnownValues) {
  EXPECT_EQ(from_float(1.f, DType::kFloat16), 0x3C00);
  EXPECT_EQ(from_float(1.f, DType::kBFloat16), 0x3F80);
  EXPECT_EQ(from_float(-2.f, DType::kFloat16), 0xC000);
  EXPECT_EQ(from_float(-2.f, DType::kBFloat16), 0xC000);
  EXPECT_EQ(to_float(0x3555, DType::kFloat16), 0.333251953125f);
  EXPECT_EQ(to_float(0x3EAB, DType::kBFloat16), 0.333984375f);
  EXPECT_EQ(to_float(0x0001, DType::kFloat16), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(to_float(from_float(65520.f, DType::kFloat16), DType::kFloat16)));
}

TEST(HostConversion, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between the bf16 neighbours 1 and 1 + 2^-7: even is 1.
  EXPECT_EQ(from_float(1.f + std::ldexp(1.f, -8), DType::kBFloat16), 0x3F80);
  EXPECT_EQ(from_float(1.f + 3 * std::ldexp(1.f, -8), DType::kBFloat16), 0x3F82);
  EXPECT_EQ(from_float(1.f + std::ldexp(1.f, -11), DType::kFloat16), 0x3C00);
  EXPECT_EQ(from_float(1.f + 3 * std::ldexp(1.f, -11), DType::kFloat16), 0x3C02);
}

TEST(HostConversion, PoisonPatternIsNaN) {
  EXPECT_TRUE(std::isnan(to_float(0xFFFF, DType::kFloat16)));
  EXPECT_TRUE(std::isnan(to_float(0xFFFF, DType::kBFloat16)));
}

TEST(HostConversion, EveryNonNaNBitPatternRoundTrips) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    int mismatches = 0;
    for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const float x = to_float(static_cast<uint16_t>(bits), dtype);
      if (std::isnan(x)) continue;
      mismatches += from_float(x, dtype) != bits;
    }
    EXPECT_EQ(mismatches, 0) << (dtype == DType::kFloat16 ? "fp16" : "bf16");
  }
}

}  // namespace
