// The plain parts of the public API: defaults of AttentionParams and
// Status, the set_contiguous_* stride helpers, and flash::version(). Pure host.
#include <gtest/gtest.h>

#include <cstdint>

#include "flash/flash.hpp"

namespace {

using flash::AttentionParams;
using flash::Backend;
using flash::Status;

TEST(Params, DefaultsAreInert) {
  const AttentionParams p;
  EXPECT_EQ(p.q_dim_stride, 1);
  EXPECT_EQ(p.o_dim_stride, 1);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.softmax_scale, 0.f);
  EXPECT_EQ(p.backend, Backend::kAuto);
  EXPECT_EQ(p.lse, nullptr);
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message[0], '\0');
}

TEST(Params, SetContiguousBnhd) {
  AttentionParams p;
  p.batch = 3, p.seqlen_q = 5, p.seqlen_k = 7, p.heads_q = 4, p.heads_kv = 2, p.head_dim = 64;
  p.q_dim_stride = p.k_dim_stride = p.v_dim_stride = p.o_dim_stride = 9;
  p.set_contiguous_bnhd();
  EXPECT_EQ(p.q_head_stride, 64);
  EXPECT_EQ(p.q_seq_stride, 4 * 64);
  EXPECT_EQ(p.q_batch_stride, 5 * 4 * 64);
  EXPECT_EQ(p.o_head_stride, 64);
  EXPECT_EQ(p.o_seq_stride, 4 * 64);
  EXPECT_EQ(p.o_batch_stride, 5 * 4 * 64);
  for (const int64_t* s : {&p.k_head_stride, &p.v_head_stride}) EXPECT_EQ(*s, 64);
  for (const int64_t* s : {&p.k_seq_stride, &p.v_seq_stride}) EXPECT_EQ(*s, 2 * 64);
  for (const int64_t* s : {&p.k_batch_stride, &p.v_batch_stride}) EXPECT_EQ(*s, 7 * 2 * 64);
  for (const int64_t* s : {&p.q_dim_stride, &p.k_dim_stride, &p.v_dim_stride, &p.o_dim_stride}) EXPECT_EQ(*s, 1);
}

TEST(Params, SetContiguousBhnd) {
  AttentionParams p;
  p.batch = 3, p.seqlen_q = 5, p.seqlen_k = 7, p.heads_q = 4, p.heads_kv = 2, p.head_dim = 64;
  p.q_dim_stride = p.k_dim_stride = p.v_dim_stride = p.o_dim_stride = 9;
  p.set_contiguous_bhnd();
  EXPECT_EQ(p.q_seq_stride, 64);
  EXPECT_EQ(p.q_head_stride, 5 * 64);
  EXPECT_EQ(p.q_batch_stride, 4 * 5 * 64);
  EXPECT_EQ(p.o_seq_stride, 64);
  EXPECT_EQ(p.o_head_stride, 5 * 64);
  EXPECT_EQ(p.o_batch_stride, 4 * 5 * 64);
  for (const int64_t* s : {&p.k_seq_stride, &p.v_seq_stride}) EXPECT_EQ(*s, 64);
  for (const int64_t* s : {&p.k_head_stride, &p.v_head_stride}) EXPECT_EQ(*s, 7 * 64);
  for (const int64_t* s : {&p.k_batch_stride, &p.v_batch_stride}) EXPECT_EQ(*s, 2 * 7 * 64);
  for (const int64_t* s : {&p.q_dim_stride, &p.k_dim_stride, &p.v_dim_stride, &p.o_dim_stride}) EXPECT_EQ(*s, 1);
}

TEST(Version, MatchesTheBuild) {
  ASSERT_NE(flash::version(), nullptr);
  EXPECT_STREQ(flash::version(), FLASH_TEST_EXPECTED_VERSION);
}

}  // namespace
