// The C API of flash/flash.h, called from C++. Pure host: the pointers are
// fake (16-byte aligned, 1 TiB apart, never dereferenced), so this runs on
// machines without a GPU. Pins: defaults from flash_attention_params_init,
// the set_contiguous stride helpers, that every rejection of the C++ API
// comes back through flash_validate and flash_attention_forward with the
// same code and a message naming the field, null params, the thread-local
// message, status names and the version macros.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "flash/flash.h"
#include "flash/flash.hpp"
#include "flash/version.h"

namespace {

void* fake_ptr(int index, int64_t byte_offset = 0) {
  return reinterpret_cast<void*>((uintptr_t{1} << 40) * static_cast<uintptr_t>(index + 1) +
                                 static_cast<uintptr_t>(byte_offset));
}

// A valid GQA call on fake pointers, as tests/test_validate.cpp's valid_params().
flash_attention_params valid_params() {
  flash_attention_params p;
  flash_attention_params_init(&p);
  p.q = fake_ptr(0);
  p.k = fake_ptr(1);
  p.v = fake_ptr(2);
  p.o = fake_ptr(3);
  p.lse = static_cast<float*>(fake_ptr(4));
  p.dtype = FLASH_DTYPE_BFLOAT16;
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 200;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  flash_set_contiguous_bnhd(&p);
  return p;
}

// Both C entry points return `code` for `p`, and the thread's message names
// every word. (A rejected call touches no GPU, so this is safe without one.)
::testing::AssertionResult rejected(const flash_attention_params& p, flash_status_code code,
                                    const std::vector<const char*>& words) {
  const struct {
    const char* name;
    flash_status_code (*call)(const flash_attention_params*);
  } entries[] = {{"flash_validate", [](const flash_attention_params* q) { return flash_validate(q); }},
                 {"flash_attention_forward",
                  [](const flash_attention_params* q) { return flash_attention_forward(q, /*stream=*/nullptr); }}};
  for (const auto& entry : entries) {
    const flash_status_code got = entry.call(&p);
    const std::string message = flash_last_error_message();
    if (got != code) {
      return ::testing::AssertionFailure() << entry.name << " returned " << flash_status_string(got) << " (\""
                                           << message << "\"), expected " << flash_status_string(code);
    }
    for (const char* word : words) {
      if (message.find(word) == std::string::npos) {
        return ::testing::AssertionFailure()
               << entry.name << " message \"" << message << "\" does not name \"" << word << "\"";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CApi, InitGivesTheCppDefaults) {
  flash_attention_params p;
  std::memset(&p, 0x5A, sizeof(p));  // garbage, as an uninitialised struct would hold
  flash_attention_params_init(&p);
  const flash::AttentionParams cpp;
  EXPECT_EQ(p.q, nullptr);
  EXPECT_EQ(p.k, nullptr);
  EXPECT_EQ(p.v, nullptr);
  EXPECT_EQ(p.o, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.dtype, FLASH_DTYPE_BFLOAT16);
  EXPECT_EQ(static_cast<int>(p.dtype), static_cast<int>(cpp.dtype));
  for (int64_t value :
       {p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, p.q_batch_stride, p.q_seq_stride,
        p.q_head_stride, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, p.v_batch_stride, p.v_seq_stride,
        p.v_head_stride, p.o_batch_stride, p.o_seq_stride, p.o_head_stride}) {
    EXPECT_EQ(value, 0);
  }
  for (int64_t value : {p.q_dim_stride, p.k_dim_stride, p.v_dim_stride, p.o_dim_stride}) EXPECT_EQ(value, 1);
  EXPECT_FALSE(p.causal);
  EXPECT_EQ(p.softmax_scale, 0.f);
  EXPECT_EQ(p.backend, FLASH_BACKEND_AUTO);
  EXPECT_EQ(p.autotune, 0);
  EXPECT_EQ(p.autotune != 0, cpp.autotune);

  flash_attention_params_init(nullptr);  // ignored, no crash
}

TEST(CApi, ValidCallsSucceedAndClearTheMessage) {
  flash_attention_params p = valid_params();
  p.head_dim = 80;  // leave a message behind first
  ASSERT_EQ(flash_validate(&p), FLASH_INVALID_ARGUMENT);
  ASSERT_STRNE(flash_last_error_message(), "");

  p = valid_params();
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  EXPECT_STREQ(flash_last_error_message(), "");

  flash_set_contiguous_bhnd(&p);
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  p.causal = true;
  p.softmax_scale = 0.25f;
  p.lse = nullptr;
  for (flash_backend backend : {FLASH_BACKEND_AUTO, FLASH_BACKEND_SM80, FLASH_BACKEND_SM90}) {
    p.backend = backend;
    EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  }
  p.dtype = FLASH_DTYPE_FLOAT16;
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
}

TEST(CApi, SetContiguousMatchesTheCppHelpers) {
  using Setter = void (*)(flash_attention_params*);
  const struct {
    Setter c;
    void (flash::AttentionParams::*cpp)() noexcept;
  } helpers[] = {{flash_set_contiguous_bnhd, &flash::AttentionParams::set_contiguous_bnhd},
                 {flash_set_contiguous_bhnd, &flash::AttentionParams::set_contiguous_bhnd}};
  for (const auto& helper : helpers) {
    flash_attention_params p;
    flash_attention_params_init(&p);
    p.batch = 3, p.seqlen_q = 5, p.seqlen_k = 7, p.heads_q = 4, p.heads_kv = 2, p.head_dim = 64;
    p.q_dim_stride = p.k_dim_stride = p.v_dim_stride = p.o_dim_stride = 9;
    p.causal = true;
    p.softmax_scale = 0.5f;
    p.autotune = 1;
    p.q = fake_ptr(0);
    helper.c(&p);

    flash::AttentionParams cpp;
    cpp.batch = 3, cpp.seqlen_q = 5, cpp.seqlen_k = 7, cpp.heads_q = 4, cpp.heads_kv = 2, cpp.head_dim = 64;
    (cpp.*helper.cpp)();
    EXPECT_EQ(p.q_batch_stride, cpp.q_batch_stride);
    EXPECT_EQ(p.q_seq_stride, cpp.q_seq_stride);
    EXPECT_EQ(p.q_head_stride, cpp.q_head_stride);
    EXPECT_EQ(p.k_batch_stride, cpp.k_batch_stride);
    EXPECT_EQ(p.k_seq_stride, cpp.k_seq_stride);
    EXPECT_EQ(p.k_head_stride, cpp.k_head_stride);
    EXPECT_EQ(p.v_batch_stride, cpp.v_batch_stride);
    EXPECT_EQ(p.v_seq_stride, cpp.v_seq_stride);
    EXPECT_EQ(p.v_head_stride, cpp.v_head_stride);
    EXPECT_EQ(p.o_batch_stride, cpp.o_batch_stride);
    EXPECT_EQ(p.o_seq_stride, cpp.o_seq_stride);
    EXPECT_EQ(p.o_head_stride, cpp.o_head_stride);
    for (int64_t value : {p.q_dim_stride, p.k_dim_stride, p.v_dim_stride, p.o_dim_stride}) EXPECT_EQ(value, 1);
    // Everything else is left alone.
    EXPECT_EQ(p.batch, 3);
    EXPECT_EQ(p.head_dim, 64);
    EXPECT_TRUE(p.causal);
    EXPECT_EQ(p.softmax_scale, 0.5f);
    EXPECT_EQ(p.autotune, 1);
    EXPECT_EQ(p.q, fake_ptr(0));
    helper.c(nullptr);  // ignored, no crash
  }
  // The [B, N, H, D] values spelled out once.
  flash_attention_params p;
  flash_attention_params_init(&p);
  p.batch = 3, p.seqlen_q = 5, p.seqlen_k = 7, p.heads_q = 4, p.heads_kv = 2, p.head_dim = 64;
  flash_set_contiguous_bnhd(&p);
  EXPECT_EQ(p.q_head_stride, 64);
  EXPECT_EQ(p.q_seq_stride, 4 * 64);
  EXPECT_EQ(p.q_batch_stride, 5 * 4 * 64);
  EXPECT_EQ(p.k_seq_stride, 2 * 64);
  EXPECT_EQ(p.k_batch_stride, 7 * 2 * 64);
  flash_set_contiguous_bhnd(&p);
  EXPECT_EQ(p.q_seq_stride, 64);
  EXPECT_EQ(p.q_head_stride, 5 * 64);
  EXPECT_EQ(p.v_head_stride, 7 * 64);
  EXPECT_EQ(p.v_batch_stride, 2 * 7 * 64);
}

TEST(CApi, NullParamsIsInvalidArgument) {
  EXPECT_EQ(flash_validate(nullptr), FLASH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flash_last_error_message()).find("params is null"), std::string::npos)
      << flash_last_error_message();
  flash_attention_params p = valid_params();
  ASSERT_EQ(flash_validate(&p), FLASH_SUCCESS);
  EXPECT_EQ(flash_attention_forward(nullptr, nullptr), FLASH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flash_last_error_message()).find("params is null"), std::string::npos)
      << flash_last_error_message();
}

// One rejection: how to break a valid call, the expected code and the words
// its message must contain.
struct Rejection {
  const char* what;
  std::function<void(flash_attention_params&)> breaks;
  flash_status_code code;
  std::vector<const char*> words;
};

std::vector<Rejection> rejections() {
  const int64_t huge = std::numeric_limits<int64_t>::max() / 16 * 8;
  return {
      {"null q", [](flash_attention_params& p) { p.q = nullptr; }, FLASH_INVALID_ARGUMENT, {"q is null"}},
      {"null k", [](flash_attention_params& p) { p.k = nullptr; }, FLASH_INVALID_ARGUMENT, {"k is null"}},
      {"null v", [](flash_attention_params& p) { p.v = nullptr; }, FLASH_INVALID_ARGUMENT, {"v is null"}},
      {"null o", [](flash_attention_params& p) { p.o = nullptr; }, FLASH_INVALID_ARGUMENT, {"o is null"}},
      {"dtype",
       [](flash_attention_params& p) { p.dtype = static_cast<flash_dtype>(7); },
       FLASH_INVALID_ARGUMENT,
       {"dtype", "7"}},
      {"backend",
       [](flash_attention_params& p) { p.backend = static_cast<flash_backend>(9); },
       FLASH_INVALID_ARGUMENT,
       {"backend", "9"}},
      {"head_dim 80",
       [](flash_attention_params& p) {
         p.head_dim = 80;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_INVALID_ARGUMENT,
       {"head_dim 80", "32, 64, 96, 128, 256"}},
      {"heads ratio",
       [](flash_attention_params& p) {
         p.heads_q = 6, p.heads_kv = 4;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_INVALID_ARGUMENT,
       {"heads_q", "heads_kv", "multiple"}},
      {"heads_q 0", [](flash_attention_params& p) { p.heads_q = 0; }, FLASH_INVALID_ARGUMENT, {"heads_q"}},
      {"batch -1", [](flash_attention_params& p) { p.batch = -1; }, FLASH_INVALID_ARGUMENT, {"batch is -1"}},
      {"seqlen_q -1", [](flash_attention_params& p) { p.seqlen_q = -1; }, FLASH_INVALID_ARGUMENT, {"seqlen_q is -1"}},
      {"seqlen_k -1", [](flash_attention_params& p) { p.seqlen_k = -1; }, FLASH_INVALID_ARGUMENT, {"seqlen_k is -1"}},
      {"heads_kv -1", [](flash_attention_params& p) { p.heads_kv = -1; }, FLASH_INVALID_ARGUMENT, {"heads_kv is -1"}},
      {"head_dim -1", [](flash_attention_params& p) { p.head_dim = -1; }, FLASH_INVALID_ARGUMENT, {"head_dim is -1"}},
      {"q_dim_stride",
       [](flash_attention_params& p) { p.q_dim_stride = 2; },
       FLASH_INVALID_ARGUMENT,
       {"dim_stride", "must be 1"}},
      {"k_dim_stride",
       [](flash_attention_params& p) { p.k_dim_stride = 0; },
       FLASH_INVALID_ARGUMENT,
       {"dim_stride", "must be 1"}},
      {"v_dim_stride",
       [](flash_attention_params& p) { p.v_dim_stride = -1; },
       FLASH_INVALID_ARGUMENT,
       {"dim_stride", "must be 1"}},
      {"o_dim_stride",
       [](flash_attention_params& p) { p.o_dim_stride = 3; },
       FLASH_INVALID_ARGUMENT,
       {"dim_stride", "must be 1"}},
      {"softmax_scale NaN",
       [](flash_attention_params& p) { p.softmax_scale = std::numeric_limits<float>::quiet_NaN(); },
       FLASH_INVALID_ARGUMENT,
       {"softmax_scale"}},
      {"softmax_scale < 0",
       [](flash_attention_params& p) { p.softmax_scale = -0.125f; },
       FLASH_INVALID_ARGUMENT,
       {"softmax_scale"}},
      {"q misaligned",
       [](flash_attention_params& p) { p.q = fake_ptr(0, 2); },
       FLASH_INVALID_ARGUMENT,
       {"q (", "16-byte aligned"}},
      {"o misaligned",
       [](flash_attention_params& p) { p.o = fake_ptr(3, 8); },
       FLASH_INVALID_ARGUMENT,
       {"o (", "16-byte aligned"}},
      {"lse misaligned",
       [](flash_attention_params& p) { p.lse = static_cast<float*>(fake_ptr(4, 2)); },
       FLASH_INVALID_ARGUMENT,
       {"lse", "4-byte aligned"}},
      {"q_seq_stride % 8",
       [](flash_attention_params& p) { p.q_seq_stride += 4; },
       FLASH_INVALID_ARGUMENT,
       {"q_seq_stride", "multiples of 8"}},
      {"k_head_stride % 8",
       [](flash_attention_params& p) { p.k_head_stride += 4; },
       FLASH_INVALID_ARGUMENT,
       {"k_head_stride", "multiples of 8"}},
      {"v_batch_stride < 0",
       [](flash_attention_params& p) { p.v_batch_stride = -p.v_batch_stride; },
       FLASH_INVALID_ARGUMENT,
       {"v_batch_stride", ">= 0"}},
      {"o_seq_stride < 0",
       [](flash_attention_params& p) { p.o_seq_stride = -p.o_seq_stride; },
       FLASH_INVALID_ARGUMENT,
       {"o_seq_stride", ">= 0"}},
      {"k overflow",
       [huge](flash_attention_params& p) { p.k_batch_stride = huge; },
       FLASH_INVALID_ARGUMENT,
       {"k:", "overflow"}},
      {"o overlaps q",
       [](flash_attention_params& p) { p.o = fake_ptr(0, 1024 * 2); },
       FLASH_INVALID_ARGUMENT,
       {"o overlaps q"}},
      {"lse overlaps o",
       [](flash_attention_params& p) { p.lse = static_cast<float*>(p.o); },
       FLASH_INVALID_ARGUMENT,
       {"lse overlaps o"}},
      {"o rows alias",
       [](flash_attention_params& p) { p.o_seq_stride = 0; },
       FLASH_INVALID_ARGUMENT,
       {"o strides", "overlap"}},
      {"seqlen_q too long",
       [](flash_attention_params& p) {
         p.seqlen_q = (int64_t{1} << 30) + 1;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_UNSUPPORTED,
       {"seqlen_q"}},
      {"batch too large",
       [](flash_attention_params& p) {
         p.batch = 70000;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_UNSUPPORTED,
       {"batch"}},
  };
}

TEST(CApi, EveryRejectionOfTheCppApiComesBackThroughC) {
  for (const Rejection& r : rejections()) {
    flash_attention_params p = valid_params();
    r.breaks(p);
    EXPECT_TRUE(rejected(p, r.code, r.words)) << r.what;
  }
}

// The C entry points return exactly what the C++ ones do, message included.
TEST(CApi, MessagesAreTheCppMessages) {
  flash_attention_params p = valid_params();
  p.head_dim = 80;
  flash::AttentionParams cpp;
  cpp.q = p.q, cpp.k = p.k, cpp.v = p.v, cpp.o = p.o, cpp.lse = p.lse;
  cpp.batch = p.batch, cpp.seqlen_q = p.seqlen_q, cpp.seqlen_k = p.seqlen_k;
  cpp.heads_q = p.heads_q, cpp.heads_kv = p.heads_kv, cpp.head_dim = 80;
  cpp.set_contiguous_bnhd();
  const flash::Status expected = flash::validate(cpp);
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(static_cast<int>(flash_validate(&p)), static_cast<int>(expected.code));
  EXPECT_STREQ(flash_last_error_message(), expected.message);
  EXPECT_EQ(static_cast<int>(flash_attention_forward(&p, nullptr)), static_cast<int>(expected.code));
  EXPECT_STREQ(flash_last_error_message(), expected.message);
}

// Empty work needs no GPU and touches no memory, as in the C++ API.
TEST(CApi, EmptyWorkSucceedsWithoutGpu) {
  flash_attention_params p = valid_params();
  p.batch = 0;
  p.q = p.k = p.v = nullptr;
  p.o = nullptr;
  p.lse = nullptr;
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  EXPECT_EQ(flash_attention_forward(&p, nullptr), FLASH_SUCCESS) << flash_last_error_message();
  EXPECT_STREQ(flash_last_error_message(), "");
}

TEST(CApi, LastErrorMessageIsPerThreadAndStable) {
  flash_attention_params p = valid_params();
  p.head_dim = 80;
  ASSERT_EQ(flash_validate(&p), FLASH_INVALID_ARGUMENT);
  const char* message = flash_last_error_message();
  const std::string saved = message;
  ASSERT_NE(saved.find("head_dim 80"), std::string::npos) << saved;

  // Another thread's calls neither see nor change this thread's message.
  std::string other_initial;
  std::string other_after;
  std::thread other([&] {
    other_initial = flash_last_error_message();
    flash_attention_params q = valid_params();
    q.heads_kv = 3;
    flash_validate(&q);
    other_after = flash_last_error_message();
  });
  other.join();
  EXPECT_EQ(other_initial, "");
  EXPECT_NE(other_after.find("heads_q"), std::string::npos) << other_after;
  EXPECT_EQ(std::string(flash_last_error_message()), saved);

  // Calls that report no status leave it alone.
  flash_attention_params scratch;
  flash_attention_params_init(&scratch);
  flash_set_contiguous_bnhd(&scratch);
  (void)flash_status_string(FLASH_SUCCESS);
  (void)flash_version();
  EXPECT_EQ(flash_last_error_message(), message);  // same buffer
  EXPECT_EQ(std::string(message), saved);
}

TEST(CApi, StatusStrings) {
  EXPECT_STREQ(flash_status_string(FLASH_SUCCESS), "success");
  EXPECT_STREQ(flash_status_string(FLASH_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(flash_status_string(FLASH_UNSUPPORTED), "unsupported");
  EXPECT_STREQ(flash_status_string(FLASH_CUDA_ERROR), "CUDA error");
  EXPECT_STREQ(flash_status_string(static_cast<flash_status_code>(42)), "unknown status code");
}

TEST(CApi, VersionMacrosAgreeWithTheLibrary) {
  const std::string from_macros = std::to_string(FLASH_VERSION_MAJOR) + "." + std::to_string(FLASH_VERSION_MINOR) +
                                  "." + std::to_string(FLASH_VERSION_PATCH);
  EXPECT_EQ(from_macros, FLASH_VERSION_STRING);
  EXPECT_STREQ(flash_version(), FLASH_VERSION_STRING);
  EXPECT_STREQ(flash::version(), FLASH_VERSION_STRING);
  EXPECT_STREQ(flash_version(), FLASH_TEST_EXPECTED_VERSION);
  EXPECT_EQ(FLASH_VERSION, FLASH_VERSION_MAJOR * 10000 + FLASH_VERSION_MINOR * 100 + FLASH_VERSION_PATCH);
}

}  // namespace
