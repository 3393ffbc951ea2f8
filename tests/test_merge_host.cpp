// flash::validate(MergeParams) and merge_states' rejections, no GPU: every
// rejection has a message and launches nothing; in-place merges into one
// of the states are accepted, every other overlap is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "flash/flash.hpp"

namespace flash {
namespace {

// Addresses are only compared and checked for alignment: nothing is
// dereferenced. Each fake buffer lives 2^40 bytes from the next.
void* fake(int slot) { return reinterpret_cast<void*>(static_cast<uintptr_t>(slot + 1) << 40); }

MergeParams valid_params(int64_t states = 3) {
  MergeParams p;
  p.dtype = DType::kBFloat16;
  p.num_states = states;
  p.batch = 2;
  p.seqlen_q = 5;
  p.heads = 4;
  p.head_dim = 128;
  p.set_contiguous();
  p.o_states = fake(0);
  p.lse_states = static_cast<const float*>(fake(1));
  p.o = fake(2);
  p.lse = static_cast<float*>(fake(3));
  return p;
}

void expect_invalid(const MergeParams& p, const char* substring) {
  const Status s = validate(p);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
  EXPECT_NE(s.message[0], '\0');
  if (substring != nullptr) {
    EXPECT_NE(std::strstr(s.message, substring), nullptr) << s.message;
  }
  // merge_states rejects it the same way, before touching the GPU.
  const Status m = merge_states(p, nullptr);
  EXPECT_EQ(m.code, s.code);
  EXPECT_STREQ(m.message, s.message);
}

TEST(MergeValidate, AcceptsContiguousStates) {
  for (int64_t n : {1, 2, 128}) EXPECT_TRUE(validate(valid_params(n)).ok()) << n;
  MergeParams no_lse = valid_params();
  no_lse.lse = nullptr;
  EXPECT_TRUE(validate(no_lse).ok());
}

TEST(MergeValidate, SetContiguousPacksStatesOneAfterAnother) {
  const MergeParams p = valid_params();
  EXPECT_EQ(p.o_head_stride, 128);
  EXPECT_EQ(p.o_seq_stride, 4 * 128);
  EXPECT_EQ(p.o_batch_stride, 5 * 4 * 128);
  EXPECT_EQ(p.o_states_batch_stride, p.o_batch_stride);
  EXPECT_EQ(p.o_state_stride, 2 * 5 * 4 * 128);
  EXPECT_EQ(p.lse_state_stride, 2 * 4 * 5);
}

TEST(MergeValidate, RejectsBadSizes) {
  MergeParams p = valid_params();
  p.num_states = 0;
  expect_invalid(p, "num_states");
  p.num_states = 129;
  expect_invalid(p, "num_states");
  p = valid_params();
  p.head_dim = 84;
  expect_invalid(p, "head_dim");
  p = valid_params();
  p.dtype = static_cast<DType>(7);
  expect_invalid(p, "dtype");
  p = valid_params();
  p.heads = -1;
  expect_invalid(p, "heads");
  p = valid_params();
  p.batch = 1 << 20;
  p.seqlen_q = 1 << 20;
  expect_invalid(p, "2^31");
}

TEST(MergeValidate, EmptyCallNeedsNoPointers) {
  MergeParams p = valid_params();
  p.seqlen_q = 0;
  p.o_states = nullptr;
  p.lse_states = nullptr;
  p.o = nullptr;
  EXPECT_TRUE(validate(p).ok());
  EXPECT_TRUE(merge_states(p, nullptr).ok());  // nothing to launch
}

TEST(MergeValidate, RejectsNullAndMisalignedPointers) {
  MergeParams p = valid_params();
  p.o = nullptr;
  expect_invalid(p, "null");
  p = valid_params();
  p.lse_states = reinterpret_cast<const float*>(static_cast<const char*>(fake(1)) + 2);
  expect_invalid(p, "aligned");
  p = valid_params();
  p.o = static_cast<char*>(fake(2)) + 1;
  expect_invalid(p, "aligned");
}

TEST(MergeValidate, RejectsNegativeStridesAndOverlappingOutputRows) {
  MergeParams p = valid_params();
  p.o_seq_stride = -8;
  expect_invalid(p, "stride");
  p = valid_params();
  p.o_head_stride = 64;  // heads 64 apart, each 128 wide
  expect_invalid(p, "overlap");
  p = valid_params();
  p.o_state_stride = int64_t{1} << 62;
  expect_invalid(p, "overflow");
}

TEST(MergeValidate, InPlaceIntoOneStateIsAccepted) {
  for (int64_t k : {0, 1, 2}) {
    MergeParams p = valid_params();
    p.o = static_cast<char*>(const_cast<void*>(p.o_states)) + k * p.o_state_stride * 2;
    p.lse = const_cast<float*>(p.lse_states) + k * p.lse_state_stride;
    EXPECT_TRUE(validate(p).ok()) << k << ": " << validate(p).message;
  }
}

TEST(MergeValidate, RejectsOtherOverlaps) {
  MergeParams p = valid_params();
  p.o = static_cast<char*>(const_cast<void*>(p.o_states)) + 64;  // inside state 0, not at a state's start
  expect_invalid(p, "o overlaps");
  p = valid_params();
  p.o = const_cast<void*>(p.o_states);
  p.o_head_stride = 256;  // state 0's address with other strides
  p.o_seq_stride = 4 * 256;
  p.o_batch_stride = 5 * 4 * 256;
  expect_invalid(p, "o overlaps");
  p = valid_params();
  p.o_state_stride = 128;  // states interleaved along the head: no in-place output
  p.o_states_head_stride = 3 * 128;
  p.o_states_seq_stride = 4 * 3 * 128;
  p.o_states_batch_stride = 5 * 4 * 3 * 128;
  p.o = const_cast<void*>(p.o_states);
  p.o_head_stride = 3 * 128;
  p.o_seq_stride = p.o_states_seq_stride;
  p.o_batch_stride = p.o_states_batch_stride;
  expect_invalid(p, "o overlaps");
  p = valid_params();
  p.lse = const_cast<float*>(p.lse_states) + 1;
  expect_invalid(p, "lse overlaps");
  p = valid_params();
  p.o = const_cast<float*>(p.lse_states);
  expect_invalid(p, "overlaps");
  p = valid_params();
  p.lse = static_cast<float*>(const_cast<void*>(p.o_states));
  expect_invalid(p, "overlaps");
  p = valid_params();
  p.lse = static_cast<float*>(p.o);
  expect_invalid(p, "overlaps");
}

}  // namespace
}  // namespace flash
