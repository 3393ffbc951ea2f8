// The C API of flash/flash.h, called from C++. Pure host: the pointers are
// fake (16-byte aligned, 1 TiB apart, never dereferenced), so this runs on
// machines without a GPU. Pins: defaults from flash_attention_params_init,
// the set_contiguous stride helpers, that every rejection of the C++ API
// comes back through flash_validate and flash_attention_forward with the
// same code and a message naming the field, null params, the thread-local
// message, status names and the version macros; for the inference-engine
// fields (varlen and its total_q / total_k, paged KV, window, softcap,
// split-KV workspace): their defaults, that they survive the C/C++
// conversions, that the C API gives the C++ API's answers for them, and
// flash_attention_workspace_size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "fake_params.h"
#include "flash/flash.h"
#include "flash/flash.hpp"
#include "flash/version.h"

namespace {

using flash::test::fake_ptr;

// A valid GQA call on fake pointers: tests/test_validate_host.cpp's
// valid_params(), through the C API.
flash_attention_params valid_params() { return flash::test::valid_c_params(); }

// A valid paged-KV decode call on fake pointers: 2 sequences, one query
// each, K/V in 40 pages of 16 keys, up to 16 pages (256 keys) per sequence,
// seqused_k and a split-KV workspace.
flash_attention_params valid_paged_decode_params() {
  flash_attention_params p = valid_params();
  p.lse = nullptr;
  p.seqlen_q = 1;
  p.seqlen_k = 256;
  flash_set_contiguous_bnhd(&p);
  p.page_size = 16;
  p.num_pages = 40;
  p.max_pages_per_seq = 16;
  p.block_table = static_cast<const int32_t*>(fake_ptr(5));
  p.block_table_batch_stride = 16;
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(6));
  p.k_batch_stride = p.v_batch_stride = p.page_size * p.heads_kv * p.head_dim;  // between pages
  p.workspace = fake_ptr(7);
  p.workspace_bytes = size_t{1} << 20;
  return p;
}

// The C++ parameters a C caller means by `c`, converted field by field here
// (independently of src/c_api.cpp's own conversion).
flash::AttentionParams as_cpp(const flash_attention_params& c) {
  flash::AttentionParams p;
  p.q = c.q, p.k = c.k, p.v = c.v, p.o = c.o, p.lse = c.lse;
  p.dtype = static_cast<flash::DType>(c.dtype);
  p.batch = c.batch, p.seqlen_q = c.seqlen_q, p.seqlen_k = c.seqlen_k;
  p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.head_dim = c.head_dim;
  p.q_batch_stride = c.q_batch_stride, p.q_seq_stride = c.q_seq_stride, p.q_head_stride = c.q_head_stride;
  p.k_batch_stride = c.k_batch_stride, p.k_seq_stride = c.k_seq_stride, p.k_head_stride = c.k_head_stride;
  p.v_batch_stride = c.v_batch_stride, p.v_seq_stride = c.v_seq_stride, p.v_head_stride = c.v_head_stride;
  p.o_batch_stride = c.o_batch_stride, p.o_seq_stride = c.o_seq_stride, p.o_head_stride = c.o_head_stride;
  p.q_dim_stride = c.q_dim_stride, p.k_dim_stride = c.k_dim_stride;
  p.v_dim_stride = c.v_dim_stride, p.o_dim_stride = c.o_dim_stride;
  p.causal = c.causal;
  p.softmax_scale = c.softmax_scale;
  p.backend = static_cast<flash::Backend>(c.backend);
  p.autotune = c.autotune != 0;
  p.cu_seqlens_q = c.cu_seqlens_q;
  p.cu_seqlens_k = c.cu_seqlens_k;
  p.seqused_k = c.seqused_k;
  p.block_table = c.block_table;
  p.block_table_batch_stride = c.block_table_batch_stride;
  p.max_pages_per_seq = c.max_pages_per_seq;
  p.page_size = c.page_size;
  p.num_pages = c.num_pages;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.num_splits = c.num_splits;
  p.workspace = c.workspace;
  p.workspace_bytes = c.workspace_bytes;
  p.total_q = c.total_q;
  p.total_k = c.total_k;
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

  // The inference-engine fields: all off.
  EXPECT_EQ(p.cu_seqlens_q, nullptr);
  EXPECT_EQ(p.cu_seqlens_k, nullptr);
  EXPECT_EQ(p.seqused_k, nullptr);
  EXPECT_EQ(p.block_table, nullptr);
  for (int64_t value : {p.block_table_batch_stride, p.max_pages_per_seq, p.page_size, p.num_pages}) {
    EXPECT_EQ(value, 0);
  }
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.window_right, -1);
  EXPECT_EQ(p.softcap, 0.f);
  EXPECT_EQ(p.num_splits, 0);
  EXPECT_EQ(p.workspace, nullptr);
  EXPECT_EQ(p.workspace_bytes, size_t{0});
  EXPECT_EQ(p.total_q, 0);
  EXPECT_EQ(p.total_k, 0);
  // ... and the C++ defaults, field by field.
  EXPECT_EQ(p.cu_seqlens_q, cpp.cu_seqlens_q);
  EXPECT_EQ(p.cu_seqlens_k, cpp.cu_seqlens_k);
  EXPECT_EQ(p.seqused_k, cpp.seqused_k);
  EXPECT_EQ(p.block_table, cpp.block_table);
  EXPECT_EQ(p.block_table_batch_stride, cpp.block_table_batch_stride);
  EXPECT_EQ(p.max_pages_per_seq, cpp.max_pages_per_seq);
  EXPECT_EQ(p.page_size, cpp.page_size);
  EXPECT_EQ(p.num_pages, cpp.num_pages);
  EXPECT_EQ(p.window_left, cpp.window_left);
  EXPECT_EQ(p.window_right, cpp.window_right);
  EXPECT_EQ(p.softcap, cpp.softcap);
  EXPECT_EQ(p.num_splits, cpp.num_splits);
  EXPECT_EQ(p.workspace, cpp.workspace);
  EXPECT_EQ(p.workspace_bytes, cpp.workspace_bytes);
  EXPECT_EQ(p.total_q, cpp.total_q);
  EXPECT_EQ(p.total_k, cpp.total_k);

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
    // Inference-engine fields, every one away from its default.
    p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
    p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(6));
    p.seqused_k = static_cast<const int32_t*>(fake_ptr(7));
    p.block_table = static_cast<const int32_t*>(fake_ptr(8));
    p.block_table_batch_stride = 11, p.max_pages_per_seq = 10, p.page_size = 32, p.num_pages = 99;
    p.window_left = 256, p.window_right = 3;
    p.softcap = 30.f;
    p.num_splits = 5;
    p.workspace = fake_ptr(9);
    p.workspace_bytes = 12345;
    p.total_q = 4321, p.total_k = (int64_t{1} << 40) + 3;  // past 32 bits: no narrowing on the way
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
    // The helpers go through the C++ parameters and back, so this also pins
    // that every inference-engine field survives both conversions.
    EXPECT_EQ(p.cu_seqlens_q, fake_ptr(5));
    EXPECT_EQ(p.cu_seqlens_k, fake_ptr(6));
    EXPECT_EQ(p.seqused_k, fake_ptr(7));
    EXPECT_EQ(p.block_table, fake_ptr(8));
    EXPECT_EQ(p.block_table_batch_stride, 11);
    EXPECT_EQ(p.max_pages_per_seq, 10);
    EXPECT_EQ(p.page_size, 32);
    EXPECT_EQ(p.num_pages, 99);
    EXPECT_EQ(p.window_left, 256);
    EXPECT_EQ(p.window_right, 3);
    EXPECT_EQ(p.softcap, 30.f);
    EXPECT_EQ(p.num_splits, 5);
    EXPECT_EQ(p.workspace, fake_ptr(9));
    EXPECT_EQ(p.workspace_bytes, size_t{12345});
    EXPECT_EQ(p.total_q, 4321);
    EXPECT_EQ(p.total_k, (int64_t{1} << 40) + 3);
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

// One call using the inference-engine fields: how to set them on a valid
// call (valid_params, or valid_paged_decode_params when `paged`), and what
// validation answers (FLASH_SUCCESS, or a rejection whose message names
// every word).
struct InferenceCase {
  const char* what;
  bool paged;
  std::function<void(flash_attention_params&)> set;
  flash_status_code code;
  std::vector<const char*> words;
};

std::vector<InferenceCase> inference_cases() {
  const auto page_size_256 = [](flash_attention_params& p) {
    p.page_size = 256, p.num_pages = 4, p.max_pages_per_seq = 1, p.block_table_batch_stride = 1;
    p.k_batch_stride = p.v_batch_stride = 256 * p.heads_kv * p.head_dim;
  };
  return {
      {"paged decode", true, [](flash_attention_params&) {}, FLASH_SUCCESS, {}},
      {"paged decode, forced decode backend",
       true,
       [](flash_attention_params& p) { p.backend = FLASH_BACKEND_DECODE; },
       FLASH_SUCCESS,
       {}},
      {"paged decode, 4 splits", true, [](flash_attention_params& p) { p.num_splits = 4; }, FLASH_SUCCESS, {}},
      {"paged decode, no split, no workspace",
       true,
       [](flash_attention_params& p) {
         p.num_splits = 1;
         p.workspace = nullptr;
         p.workspace_bytes = 0;
       },
       FLASH_SUCCESS,
       {}},
      {"paged decode, page_size 256", true, page_size_256, FLASH_SUCCESS, {}},
      {"varlen q and k",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
         p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(6));
       },
       FLASH_SUCCESS,
       {}},
      {"varlen q and k with total_q / total_k",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
         p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(6));
         p.total_q = 300, p.total_k = 500;
       },
       FLASH_SUCCESS,
       {}},
      {"varlen q, total_q only",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
         p.total_q = 150;
       },
       FLASH_SUCCESS,
       {}},
      {"total_q -1",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
         p.total_q = -1;
       },
       FLASH_INVALID_ARGUMENT,
       {"total_q"}},
      {"total_k -1",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(6));
         p.total_k = -1;
       },
       FLASH_INVALID_ARGUMENT,
       {"total_k"}},
      {"varlen o past max_seqlen_q rows but inside total_q rows of q",
       false,
       [](flash_attention_params& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5));
         p.total_q = 300;
         p.o = fake_ptr(0, p.seqlen_q * p.q_seq_stride * 2);
       },
       FLASH_INVALID_ARGUMENT,
       {"o overlaps q"}},
      {"dense seqused_k",
       false,
       [](flash_attention_params& p) { p.seqused_k = static_cast<const int32_t*>(fake_ptr(6)); },
       FLASH_SUCCESS,
       {}},
      {"sliding window",
       false,
       [](flash_attention_params& p) { p.window_left = 64, p.window_right = 0; },
       FLASH_SUCCESS,
       {}},
      {"causal window",
       false,
       [](flash_attention_params& p) {
         p.causal = true;
         p.window_left = 32;
         p.window_right = 0;
       },
       FLASH_SUCCESS,
       {}},
      {"softcap", false, [](flash_attention_params& p) { p.softcap = 50.f; }, FLASH_SUCCESS, {}},
      {"window_left -2",
       false,
       [](flash_attention_params& p) { p.window_left = -2; },
       FLASH_INVALID_ARGUMENT,
       {"window_left"}},
      {"window_right -7",
       false,
       [](flash_attention_params& p) { p.window_right = -7; },
       FLASH_INVALID_ARGUMENT,
       {"window_right"}},
      {"causal with window_right 4",
       false,
       [](flash_attention_params& p) {
         p.causal = true;
         p.window_right = 4;
       },
       FLASH_INVALID_ARGUMENT,
       {"window_right"}},
      {"softcap NaN",
       false,
       [](flash_attention_params& p) { p.softcap = std::numeric_limits<float>::quiet_NaN(); },
       FLASH_INVALID_ARGUMENT,
       {"softcap"}},
      {"softcap < 0", false, [](flash_attention_params& p) { p.softcap = -1.f; }, FLASH_INVALID_ARGUMENT, {"softcap"}},
      {"num_splits -1",
       true,
       [](flash_attention_params& p) { p.num_splits = -1; },
       FLASH_INVALID_ARGUMENT,
       {"num_splits"}},
      {"num_splits 129",
       true,
       [](flash_attention_params& p) { p.num_splits = 129; },
       FLASH_INVALID_ARGUMENT,
       {"num_splits"}},
      {"page_size -8", true, [](flash_attention_params& p) { p.page_size = -8; }, FLASH_INVALID_ARGUMENT, {"page_size"}},
      {"page_size 0", true, [](flash_attention_params& p) { p.page_size = 0; }, FLASH_INVALID_ARGUMENT, {"page_size"}},
      {"paged and varlen k",
       true,
       [](flash_attention_params& p) { p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(8)); },
       FLASH_INVALID_ARGUMENT,
       {"block_table"}},
      {"workspace misaligned",
       true,
       [](flash_attention_params& p) { p.workspace = fake_ptr(7, 64); },
       FLASH_INVALID_ARGUMENT,
       {"workspace"}},
  };
}

flash_attention_params inference_params(const InferenceCase& c) {
  flash_attention_params p = c.paged ? valid_paged_decode_params() : valid_params();
  c.set(p);
  return p;
}

// flash_validate and flash_attention_workspace_size give the C++ API's
// answers (code, message, size) for calls that use the new fields, valid or
// not: so every field reaches the C++ parameters as the C caller set it.
TEST(CApi, InferenceFieldsGiveTheCppAnswers) {
  for (const InferenceCase& c : inference_cases()) {
    SCOPED_TRACE(c.what);
    const flash_attention_params p = inference_params(c);
    const flash::AttentionParams cpp = as_cpp(p);

    const flash::Status expected = flash::validate(cpp);
    EXPECT_EQ(static_cast<int>(flash_validate(&p)), static_cast<int>(expected.code));
    EXPECT_STREQ(flash_last_error_message(), expected.message);

    size_t expected_bytes = 0;
    const flash::Status expected_ws = flash::attention_workspace_size(cpp, &expected_bytes);
    size_t bytes = 7;
    EXPECT_EQ(static_cast<int>(flash_attention_workspace_size(&p, &bytes)), static_cast<int>(expected_ws.code));
    EXPECT_STREQ(flash_last_error_message(), expected_ws.message);
    EXPECT_EQ(bytes, expected_ws.ok() ? expected_bytes : size_t{0});
  }
}

// Valid uses of the new fields pass validation (no GPU needed); invalid ones
// are rejected through both C entry points with a message naming the field.
// These pin the validation of the inference-engine fields as seen from C.
TEST(CApi, InferenceCallsValidateOrAreRejected) {
  for (const InferenceCase& c : inference_cases()) {
    const flash_attention_params p = inference_params(c);
    if (c.code == FLASH_SUCCESS) {
      EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << c.what << ": " << flash_last_error_message();
    } else {
      EXPECT_TRUE(rejected(p, c.code, c.words)) << c.what;
    }
  }
}

TEST(CApi, WorkspaceSizeNullArguments) {
  size_t bytes = 99;
  EXPECT_EQ(flash_attention_workspace_size(nullptr, &bytes), FLASH_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, size_t{0});
  EXPECT_NE(std::string(flash_last_error_message()).find("params is null"), std::string::npos)
      << flash_last_error_message();
  const flash_attention_params p = valid_paged_decode_params();
  EXPECT_EQ(flash_attention_workspace_size(&p, nullptr), FLASH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flash_last_error_message()).find("bytes is null"), std::string::npos)
      << flash_last_error_message();
  EXPECT_EQ(flash_attention_workspace_size(nullptr, nullptr), FLASH_INVALID_ARGUMENT);
}

// A rejected call reports no workspace.
TEST(CApi, WorkspaceSizeOfARejectedCallIsZero) {
  flash_attention_params p = valid_paged_decode_params();
  p.head_dim = 80;
  size_t bytes = 99;
  EXPECT_EQ(flash_attention_workspace_size(&p, &bytes), FLASH_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, size_t{0});
  EXPECT_NE(std::string(flash_last_error_message()).find("head_dim 80"), std::string::npos)
      << flash_last_error_message();
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
