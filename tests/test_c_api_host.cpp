// The C API of flash/flash.h, called from C++. Pure host: the pointers are
// fake (16-byte aligned, 1 TiB apart, never dereferenced), so this runs on
// machines without a GPU. Pins: defaults from flash_attention_params_init,
// the set_contiguous stride helpers, that every rejection of the C++ API
// comes back through flash_validate and flash_attention_forward with the
// same code and a message naming the field, null params, the thread-local
// message, status names and the version macros; for the inference-engine
// fields (varlen and its total_q / total_k, paged KV, window, softcap,
// split-KV workspace, the fp8 KV cache): their defaults, that they survive the C/C++
// conversions, that the C API gives the C++ API's answers for them, and
// flash_attention_workspace_size; and struct_size: a caller compiled against
// an older, shorter struct gets the answers of the full struct with defaults
// for the fields it lacks, while a struct_size that is not set, too small or
// larger than the library knows is rejected with a message. And the same for
// flash_merge_params (flash::merge_states): defaults, the stride helper,
// flash_validate_merge and flash_merge_states giving flash::validate's code
// and message, null params, a struct without lse and unreadable struct_sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
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
  p.sinks = c.sinks;
  p.alibi_slopes = c.alibi_slopes;
  p.head_dim_v = c.head_dim_v;
  p.k_new = c.k_new, p.v_new = c.v_new, p.seqlen_new = c.seqlen_new, p.cu_seqlens_k_new = c.cu_seqlens_k_new;
  p.k_new_batch_stride = c.k_new_batch_stride, p.k_new_seq_stride = c.k_new_seq_stride;
  p.k_new_head_stride = c.k_new_head_stride;
  p.v_new_batch_stride = c.v_new_batch_stride, p.v_new_seq_stride = c.v_new_seq_stride;
  p.v_new_head_stride = c.v_new_head_stride;
  p.rotary_cos = c.rotary_cos, p.rotary_sin = c.rotary_sin, p.rotary_dim = c.rotary_dim;
  p.rotary_positions = c.rotary_positions, p.rotary_interleaved = c.rotary_interleaved != 0;
  int32_t kv_dtype;
  std::memcpy(&kv_dtype, &c.kv_dtype, sizeof(kv_dtype));  // the bytes, which may be no enumerator
  p.kv_dtype = static_cast<flash::KvDType>(kv_dtype);
  p.k_descale = c.k_descale, p.v_descale = c.v_descale, p.descale_head_stride = c.descale_head_stride;
  int32_t q_dtype;
  std::memcpy(&q_dtype, &c.q_dtype, sizeof(q_dtype));
  p.q_dtype = static_cast<flash::KvDType>(q_dtype);
  p.q_descale = c.q_descale;
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
  EXPECT_EQ(p.struct_size, sizeof(flash_attention_params));
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
  EXPECT_EQ(p.sinks, nullptr);
  EXPECT_EQ(p.alibi_slopes, nullptr);
  EXPECT_EQ(p.kv_dtype, FLASH_KV_DTYPE_SAME);
  EXPECT_EQ(p.k_descale, nullptr);
  EXPECT_EQ(p.v_descale, nullptr);
  EXPECT_EQ(p.descale_head_stride, 0);
  EXPECT_EQ(p.q_dtype, FLASH_KV_DTYPE_SAME);
  EXPECT_EQ(p.q_descale, nullptr);
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
  EXPECT_EQ(p.sinks, cpp.sinks);
  EXPECT_EQ(p.alibi_slopes, cpp.alibi_slopes);
  EXPECT_EQ(static_cast<int>(p.kv_dtype), static_cast<int>(cpp.kv_dtype));
  EXPECT_EQ(p.k_descale, cpp.k_descale);
  EXPECT_EQ(p.v_descale, cpp.v_descale);
  EXPECT_EQ(p.descale_head_stride, cpp.descale_head_stride);
  EXPECT_EQ(static_cast<int>(p.q_dtype), static_cast<int>(cpp.q_dtype));
  EXPECT_EQ(p.q_descale, cpp.q_descale);

  flash_attention_params_init(nullptr);  // ignored, no crash
}

TEST(CApi, ValidCallsSucceedAndClearTheMessage) {
  flash_attention_params p = valid_params();
  p.head_dim = 84;  // leave a message behind first
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
    p.sinks = static_cast<const float*>(fake_ptr(10));
    p.alibi_slopes = static_cast<const float*>(fake_ptr(11));
    p.head_dim_v = 40;
    p.k_new = fake_ptr(12), p.v_new = fake_ptr(13), p.seqlen_new = 3;
    p.cu_seqlens_k_new = static_cast<const int32_t*>(fake_ptr(14));
    p.k_new_batch_stride = 1, p.k_new_seq_stride = 2, p.k_new_head_stride = 3;
    p.v_new_batch_stride = 4, p.v_new_seq_stride = 5, p.v_new_head_stride = 6;
    p.rotary_cos = static_cast<const float*>(fake_ptr(15));
    p.rotary_sin = static_cast<const float*>(fake_ptr(16));
    p.rotary_dim = 32, p.rotary_positions = 77, p.rotary_interleaved = 1;
    p.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
    p.k_descale = static_cast<const float*>(fake_ptr(17));
    p.v_descale = static_cast<const float*>(fake_ptr(18));
    p.descale_head_stride = 1;
    helper.c(&p);

    flash::AttentionParams cpp;
    cpp.batch = 3, cpp.seqlen_q = 5, cpp.seqlen_k = 7, cpp.heads_q = 4, cpp.heads_kv = 2, cpp.head_dim = 64;
    cpp.head_dim_v = 40;
    cpp.seqlen_new = 3;
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
    EXPECT_EQ(p.sinks, fake_ptr(10));
    EXPECT_EQ(p.alibi_slopes, fake_ptr(11));
    EXPECT_EQ(p.head_dim_v, 40);
    EXPECT_EQ(p.k_new, fake_ptr(12));
    EXPECT_EQ(p.v_new, fake_ptr(13));
    EXPECT_EQ(p.seqlen_new, 3);
    EXPECT_EQ(p.cu_seqlens_k_new, fake_ptr(14));
    // k_new's and v_new's strides are filled too (from seqlen_new 3).
    EXPECT_EQ(p.k_new_batch_stride, cpp.k_new_batch_stride);
    EXPECT_EQ(p.k_new_seq_stride, cpp.k_new_seq_stride);
    EXPECT_EQ(p.k_new_head_stride, cpp.k_new_head_stride);
    EXPECT_EQ(p.v_new_batch_stride, cpp.v_new_batch_stride);
    EXPECT_EQ(p.v_new_seq_stride, cpp.v_new_seq_stride);
    EXPECT_EQ(p.v_new_head_stride, cpp.v_new_head_stride);
    EXPECT_NE(p.v_new_head_stride * p.v_new_seq_stride, 0);
    EXPECT_EQ(p.rotary_cos, fake_ptr(15));
    EXPECT_EQ(p.rotary_sin, fake_ptr(16));
    EXPECT_EQ(p.rotary_dim, 32);
    EXPECT_EQ(p.rotary_positions, 77);
    EXPECT_EQ(p.rotary_interleaved, 1);
    EXPECT_EQ(p.kv_dtype, FLASH_KV_DTYPE_FLOAT8_E4M3);
    EXPECT_EQ(p.k_descale, fake_ptr(17));
    EXPECT_EQ(p.v_descale, fake_ptr(18));
    EXPECT_EQ(p.descale_head_stride, 1);
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
      {"head_dim 84",
       [](flash_attention_params& p) {
         p.head_dim = 84;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_INVALID_ARGUMENT,
       {"head_dim 84", "a multiple of 8 from 8 to 256"}},
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
  p.head_dim = 84;
  flash::AttentionParams cpp;
  cpp.q = p.q, cpp.k = p.k, cpp.v = p.v, cpp.o = p.o, cpp.lse = p.lse;
  cpp.batch = p.batch, cpp.seqlen_q = p.seqlen_q, cpp.seqlen_k = p.seqlen_k;
  cpp.heads_q = p.heads_q, cpp.heads_kv = p.heads_kv, cpp.head_dim = 84;
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
  // An fp8 (e4m3) K/V cache with one K and one V factor per K/V head.
  const auto fp8_cache = [](flash_attention_params& p) {
    p.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
    p.k_descale = static_cast<const float*>(fake_ptr(9));
    p.v_descale = static_cast<const float*>(fake_ptr(10));
    p.descale_head_stride = 1;
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
      {"fp8 KV cache, per-head descales", false, fp8_cache, FLASH_SUCCESS, {}},
      {"fp8 KV cache, paged decode", true, fp8_cache, FLASH_SUCCESS, {}},
      {"fp8 KV cache, no descales",
       false,
       [](flash_attention_params& p) { p.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3; },
       FLASH_SUCCESS,
       {}},
      {"fp8 KV cache, forced decode backend",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.backend = FLASH_BACKEND_DECODE;
       },
       FLASH_SUCCESS,
       {}},
      {"kv_dtype 7",
       false,
       [](flash_attention_params& p) { p.kv_dtype = static_cast<flash_kv_dtype>(7); },
       FLASH_INVALID_ARGUMENT,
       {"kv_dtype 7"}},
      {"k_descale without an fp8 cache",
       false,
       [](flash_attention_params& p) { p.k_descale = static_cast<const float*>(fake_ptr(9)); },
       FLASH_INVALID_ARGUMENT,
       {"k_descale", "kv_dtype"}},
      {"v_descale without an fp8 cache",
       false,
       [](flash_attention_params& p) { p.v_descale = static_cast<const float*>(fake_ptr(10)); },
       FLASH_INVALID_ARGUMENT,
       {"v_descale", "kv_dtype"}},
      {"descale_head_stride without an fp8 cache",
       false,
       [](flash_attention_params& p) { p.descale_head_stride = 1; },
       FLASH_INVALID_ARGUMENT,
       {"descale_head_stride", "kv_dtype"}},
      {"fp8 KV cache, descale_head_stride 2",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.descale_head_stride = 2;
       },
       FLASH_INVALID_ARGUMENT,
       {"descale_head_stride is 2"}},
      {"fp8 KV cache, k_descale misaligned",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.k_descale = static_cast<const float*>(fake_ptr(9, 2));
       },
       FLASH_INVALID_ARGUMENT,
       {"k_descale", "4-byte aligned"}},
      {"fp8 KV cache, v_descale misaligned",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.v_descale = static_cast<const float*>(fake_ptr(10, 1));
       },
       FLASH_INVALID_ARGUMENT,
       {"v_descale", "4-byte aligned"}},
      {"fp8 KV cache, head_dim 72",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.head_dim = 72;
         flash_set_contiguous_bnhd(&p);
       },
       FLASH_INVALID_ARGUMENT,
       {"fp8", "head_dim (72)", "multiples of 16"}},
      {"fp8 KV cache, k_seq_stride 8 elements off",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.k_seq_stride += 8;  // fine for 2-byte K, half a 16-byte chunk for 1-byte K
       },
       FLASH_INVALID_ARGUMENT,
       {"k_seq_stride", "multiples of 16 elements"}},
      {"fp8 KV cache with k_new (the append quantises)",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.k_new = fake_ptr(12), p.v_new = fake_ptr(13);
         p.seqused_k = static_cast<const int32_t*>(fake_ptr(15));
         p.seqlen_new = 1;
         p.k_new_head_stride = p.v_new_head_stride = p.head_dim;
         p.k_new_seq_stride = p.v_new_seq_stride = p.k_new_batch_stride = p.v_new_batch_stride =
             p.heads_kv * p.head_dim;
         p.workspace = fake_ptr(14);
         p.workspace_bytes = size_t{1} << 20;
       },
       FLASH_SUCCESS,
       {}},
      {"FP8 prefill",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.q_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
         p.q_descale = static_cast<const float*>(fake_ptr(11));
         p.workspace = fake_ptr(12);
         p.workspace_bytes = size_t{1} << 30;
       },
       FLASH_SUCCESS,
       {}},
      {"FP8 prefill without a workspace",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.q_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
       },
       FLASH_INVALID_ARGUMENT,
       {"FP8 prefill needs a workspace"}},
      {"q_descale without an fp8 Q",
       false,
       [](flash_attention_params& p) { p.q_descale = static_cast<const float*>(fake_ptr(11)); },
       FLASH_INVALID_ARGUMENT,
       {"q_descale", "q_dtype"}},
      {"q_dtype 5",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.q_dtype = static_cast<flash_kv_dtype>(5);
       },
       FLASH_INVALID_ARGUMENT,
       {"q_dtype 5"}},
      {"fp8 KV cache, forced sm80 backend",
       false,
       [fp8_cache](flash_attention_params& p) {
         fp8_cache(p);
         p.backend = FLASH_BACKEND_SM80;
       },
       FLASH_UNSUPPORTED,
       {"fp8", "decode kernel"}},
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

// The fp8 KV cache's fields reach the C++ parameters as the C caller set
// them: descale_head_stride's value comes back in the message (all 64
// bits), each descale pointer's presence and low bits decide the answer on
// their own, and kv_dtype sets the size of K's and V's elements, which the
// stride rule follows. Every answer is also flash::validate's for the
// parameters the caller means.
TEST(CApi, Fp8KvCacheFieldsReachTheCppParams) {
  const auto expect_cpp_answer = [](const flash_attention_params& p) {
    const flash::Status expected = flash::validate(as_cpp(p));
    EXPECT_EQ(static_cast<int>(flash_validate(&p)), static_cast<int>(expected.code));
    EXPECT_STREQ(flash_last_error_message(), expected.message);
  };
  // An fp8 cache with one K and one V factor per K/V head.
  flash_attention_params fp8 = valid_params();
  fp8.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
  fp8.k_descale = static_cast<const float*>(fake_ptr(9));
  fp8.v_descale = static_cast<const float*>(fake_ptr(10));
  fp8.descale_head_stride = 1;
  ASSERT_EQ(flash_validate(&fp8), FLASH_SUCCESS) << flash_last_error_message();
  expect_cpp_answer(fp8);

  for (const int64_t stride : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{-1}, (int64_t{1} << 40) + 1}) {
    SCOPED_TRACE(stride);
    flash_attention_params p = fp8;
    p.descale_head_stride = stride;
    if (stride == 0 || stride == 1) {
      EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
    } else {
      const std::string word = "descale_head_stride is " + std::to_string(stride);
      EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {word.c_str()}));
    }
    expect_cpp_answer(p);
  }

  for (const bool is_k : {true, false}) {
    for (int offset = 0; offset <= 4; ++offset) {
      SCOPED_TRACE(std::string(is_k ? "k_descale" : "v_descale") + " + " + std::to_string(offset));
      flash_attention_params p = fp8;
      (is_k ? p.k_descale : p.v_descale) = static_cast<const float*>(fake_ptr(is_k ? 9 : 10, offset));
      if (offset % 4 == 0) {
        EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
      } else {
        EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"4-byte aligned"}));
      }
      expect_cpp_answer(p);
      // Null reads as 1; without an fp8 cache a descale is rejected.
      (is_k ? p.k_descale : p.v_descale) = nullptr;
      EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
      p = valid_params();
      (is_k ? p.k_descale : p.v_descale) = static_cast<const float*>(fake_ptr(is_k ? 9 : 10, offset * 4));
      EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"need an fp8 cache"}));
      expect_cpp_answer(p);
    }
  }

  // A K or V stride 8 elements off a multiple of 16: whole 16-byte rows for
  // 2-byte elements, half of one for e4m3 bytes.
  for (const bool is_k : {true, false}) {
    SCOPED_TRACE(is_k ? "k_batch_stride" : "v_batch_stride");
    flash_attention_params p = valid_params();
    (is_k ? p.k_batch_stride : p.v_batch_stride) += 8;
    EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
    p.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
    EXPECT_TRUE(
        rejected(p, FLASH_INVALID_ARGUMENT, {is_k ? "k_batch_stride" : "v_batch_stride", "multiples of 16 elements"}));
    expect_cpp_answer(p);
  }
}

// A kv_dtype that is neither FLASH_KV_DTYPE_SAME nor
// FLASH_KV_DTYPE_FLOAT8_E4M3, as whatever int32 bytes the caller left there,
// is rejected by every entry point with a message naming kv_dtype and its
// value; no workspace is reported.
TEST(CApi, AnUnknownKvDTypeIsRejected) {
  for (const int32_t value : {2, 7, -1, INT32_MAX, INT32_MIN}) {
    SCOPED_TRACE(value);
    flash_attention_params p = valid_params();
    std::memcpy(&p.kv_dtype, &value, sizeof(value));  // the bytes, never loaded as the enum
    const std::string word = "kv_dtype " + std::to_string(value) + " is not valid";
    EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {word.c_str()}));
    size_t bytes = 7;
    EXPECT_EQ(flash_attention_workspace_size(&p, &bytes), FLASH_INVALID_ARGUMENT);
    EXPECT_EQ(bytes, size_t{0});
    EXPECT_NE(std::string(flash_last_error_message()).find(word), std::string::npos) << flash_last_error_message();
  }
  // The two values there are.
  for (const flash_kv_dtype value : {FLASH_KV_DTYPE_SAME, FLASH_KV_DTYPE_FLOAT8_E4M3}) {
    flash_attention_params p = valid_params();
    p.kv_dtype = value;
    EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << value << ": " << flash_last_error_message();
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
  p.head_dim = 84;
  size_t bytes = 99;
  EXPECT_EQ(flash_attention_workspace_size(&p, &bytes), FLASH_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, size_t{0});
  EXPECT_NE(std::string(flash_last_error_message()).find("head_dim 84"), std::string::npos)
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
  p.head_dim = 84;
  ASSERT_EQ(flash_validate(&p), FLASH_INVALID_ARGUMENT);
  const char* message = flash_last_error_message();
  const std::string saved = message;
  ASSERT_NE(saved.find("head_dim 84"), std::string::npos) << saved;

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

// ---- struct_size ----

// flash_attention_params as a caller compiled against a first, shorter
// flash.h declares it: the fields of the core call, through autotune, and
// none of the inference-engine fields. Declared here on its own, as that
// caller's header would have it.
struct ParamsV1 {
  size_t struct_size;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  flash_dtype dtype;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t q_dim_stride, k_dim_stride, v_dim_stride, o_dim_stride;
  bool causal;
  float softmax_scale;
  flash_backend backend;
  int autotune;
};
// A prefix of today's struct, ending where its first inference-engine field
// starts.
static_assert(offsetof(ParamsV1, q) == offsetof(flash_attention_params, q), "ParamsV1 layout");
static_assert(offsetof(ParamsV1, dtype) == offsetof(flash_attention_params, dtype), "ParamsV1 layout");
static_assert(offsetof(ParamsV1, o_dim_stride) == offsetof(flash_attention_params, o_dim_stride), "ParamsV1 layout");
static_assert(offsetof(ParamsV1, causal) == offsetof(flash_attention_params, causal), "ParamsV1 layout");
static_assert(offsetof(ParamsV1, autotune) == offsetof(flash_attention_params, autotune), "ParamsV1 layout");
static_assert(sizeof(ParamsV1) == offsetof(flash_attention_params, cu_seqlens_q), "ParamsV1 ends where v2 grows");

// A ParamsV1 followed by 0xFF bytes up to the size of today's struct. Were
// the library to read past the v1 struct it would see non-null, misaligned
// cu_seqlens_q/k, seqused_k and block_table, a NaN softcap, num_splits -1
// and total_q -1, and reject the call or answer differently.
struct PoisonedV1 {
  ParamsV1 v1;
  unsigned char poison[sizeof(flash_attention_params) - sizeof(ParamsV1)];

  PoisonedV1() { std::memset(this, 0xFF, sizeof(*this)); }
  // The v1 struct as the C API takes it: a C caller's pointer to its own,
  // shorter struct.
  flash_attention_params* c() { return reinterpret_cast<flash_attention_params*>(&v1); }
  bool poison_intact() const {
    for (unsigned char byte : poison) {
      if (byte != 0xFF) return false;
    }
    return true;
  }
};
static_assert(offsetof(PoisonedV1, poison) == sizeof(ParamsV1), "the poison follows the v1 struct");

// The core fields of `c` in a v1 struct, field by field, as its caller
// would set them.
void copy_to_v1(const flash_attention_params& c, ParamsV1* v1) {
  v1->q = c.q, v1->k = c.k, v1->v = c.v, v1->o = c.o, v1->lse = c.lse;
  std::memcpy(&v1->dtype, &c.dtype, sizeof(c.dtype));  // the bytes, which may be no enumerator
  v1->batch = c.batch, v1->seqlen_q = c.seqlen_q, v1->seqlen_k = c.seqlen_k;
  v1->heads_q = c.heads_q, v1->heads_kv = c.heads_kv, v1->head_dim = c.head_dim;
  v1->q_batch_stride = c.q_batch_stride, v1->q_seq_stride = c.q_seq_stride, v1->q_head_stride = c.q_head_stride;
  v1->k_batch_stride = c.k_batch_stride, v1->k_seq_stride = c.k_seq_stride, v1->k_head_stride = c.k_head_stride;
  v1->v_batch_stride = c.v_batch_stride, v1->v_seq_stride = c.v_seq_stride, v1->v_head_stride = c.v_head_stride;
  v1->o_batch_stride = c.o_batch_stride, v1->o_seq_stride = c.o_seq_stride, v1->o_head_stride = c.o_head_stride;
  v1->q_dim_stride = c.q_dim_stride, v1->k_dim_stride = c.k_dim_stride;
  v1->v_dim_stride = c.v_dim_stride, v1->o_dim_stride = c.o_dim_stride;
  std::memcpy(&v1->causal, &c.causal, sizeof(c.causal));
  v1->softmax_scale = c.softmax_scale;
  std::memcpy(&v1->backend, &c.backend, sizeof(c.backend));
  v1->autotune = c.autotune;
}

// What one C entry point answered: its code, message and workspace size.
struct Answer {
  int code;
  std::string message;
  size_t bytes = 0;
};

Answer validate_answer(const flash_attention_params* p) {
  const int code = flash_validate(p);
  return {code, flash_last_error_message()};
}

Answer forward_answer(const flash_attention_params* p) {
  const int code = flash_attention_forward(p, /*stream=*/nullptr);
  return {code, flash_last_error_message()};
}

Answer workspace_answer(const flash_attention_params* p) {
  size_t bytes = 7;
  const int code = flash_attention_workspace_size(p, &bytes);
  return {code, flash_last_error_message(), bytes};
}

void expect_same(const Answer& v1, const Answer& full, const char* entry) {
  EXPECT_EQ(v1.code, full.code) << entry << ": \"" << v1.message << "\" vs \"" << full.message << "\"";
  EXPECT_EQ(v1.message, full.message) << entry;
  EXPECT_EQ(v1.bytes, full.bytes) << entry;
}

// An older caller's flash_attention_params_init writes its own struct and
// nothing past it, with the defaults of today's (the same, field by field).
TEST(CApiStructSize, InitOfAShorterStructWritesOnlyIt) {
  PoisonedV1 buffer;
  flash_attention_params_init_sized(buffer.c(), sizeof(ParamsV1));
  EXPECT_TRUE(buffer.poison_intact());
  flash_attention_params full;
  flash_attention_params_init(&full);
  EXPECT_EQ(buffer.v1.struct_size, sizeof(ParamsV1));
  EXPECT_EQ(std::memcmp(&buffer.v1.q, &full.q, sizeof(ParamsV1) - sizeof(size_t)), 0)
      << "the core fields' defaults differ";

  // And today's init zeroes the padding (after causal), so structs compare
  // equal byte for byte.
  flash_attention_params garbage;
  std::memset(&garbage, 0x5A, sizeof(garbage));
  flash_attention_params_init(&garbage);
  EXPECT_EQ(std::memcmp(&garbage, &full, sizeof(full)), 0);
}

// A caller compiled against the v1 struct gets, from every entry point, the
// answers of today's struct with the inference-engine fields at their
// defaults: valid calls, each rejection of the C++ API, empty work.
TEST(CApiStructSize, AnOlderShorterStructGivesTheAnswersOfTheFullOne) {
  // The v1 caller's own set-up: its init, its fields, the stride helper.
  PoisonedV1 buffer;
  flash_attention_params_init_sized(buffer.c(), sizeof(ParamsV1));
  flash::test::set_valid_gqa_call(buffer.v1);
  buffer.v1.dtype = FLASH_DTYPE_BFLOAT16;
  flash_set_contiguous_bnhd(buffer.c());
  ASSERT_TRUE(buffer.poison_intact());
  EXPECT_EQ(validate_answer(buffer.c()).code, FLASH_SUCCESS) << flash_last_error_message();
  // ... the same struct as today's valid_params() builds.
  ParamsV1 expected;
  std::memset(&expected, 0, sizeof(expected));
  copy_to_v1(valid_params(), &expected);
  expected.struct_size = sizeof(ParamsV1);
  EXPECT_EQ(std::memcmp(&buffer.v1, &expected, sizeof(ParamsV1)), 0);

  struct Case {
    std::string what;
    flash_attention_params full;
  };
  std::vector<Case> cases;
  cases.push_back({"valid", valid_params()});
  {
    flash_attention_params p = valid_params();
    flash_set_contiguous_bhnd(&p);
    p.causal = true, p.softmax_scale = 0.25f, p.dtype = FLASH_DTYPE_FLOAT16, p.backend = FLASH_BACKEND_SM80;
    p.autotune = 1;
    cases.push_back({"valid, every core field changed", p});
  }
  {
    flash_attention_params p = valid_params();
    p.batch = 0, p.q = p.k = p.v = nullptr, p.o = nullptr, p.lse = nullptr;
    cases.push_back({"empty work", p});
  }
  {
    flash_attention_params p = valid_params();
    const unsigned char garbage = 0x5A;
    std::memcpy(&p.causal, &garbage, 1);
    cases.push_back({"causal byte 0x5A", p});
  }
  for (const Rejection& r : rejections()) {
    flash_attention_params p = valid_params();
    r.breaks(p);
    cases.push_back({r.what, p});
  }

  int forward_calls = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    PoisonedV1 v1;
    copy_to_v1(c.full, &v1.v1);
    v1.v1.struct_size = sizeof(ParamsV1);

    const Answer full_validate = validate_answer(&c.full);
    expect_same(validate_answer(v1.c()), full_validate, "flash_validate");
    expect_same(workspace_answer(v1.c()), workspace_answer(&c.full), "flash_attention_workspace_size");
    // A call validate accepts would reach the GPU with fake pointers: forward
    // only the rejected ones and empty work, which launch nothing.
    if (full_validate.code != FLASH_SUCCESS || c.full.batch == 0) {
      ++forward_calls;
      expect_same(forward_answer(v1.c()), forward_answer(&c.full), "flash_attention_forward");
    }
    EXPECT_TRUE(v1.poison_intact());
  }
  EXPECT_GT(forward_calls, 30);
}

// The library reads the fields within struct_size, every one of them, and
// none past it: a window_left of -2 (rejected) counts only when struct_size
// covers it, and a NaN softcap just past it never does.
TEST(CApiStructSize, ReadsExactlyTheFieldsWithinStructSize) {
  flash_attention_params p = valid_params();
  p.window_left = -2;
  p.softcap = std::numeric_limits<float>::quiet_NaN();
  p.struct_size = offsetof(flash_attention_params, window_left);
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  p.struct_size = offsetof(flash_attention_params, softcap);  // through window_left and window_right
  EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"window_left"}));
  p.window_left = 64;
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  p.struct_size = sizeof(p);
  EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"softcap"}));

  // The fields past a v1 struct, each set where struct_size ends before it:
  // ignored, so the call is the valid default one.
  const flash_attention_params base = valid_params();
  p = base;
  p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(5, 2));
  p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(6, 2));
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(7, 2));
  p.block_table = static_cast<const int32_t*>(fake_ptr(8, 2));
  p.page_size = -1, p.window_right = -9, p.num_splits = -1, p.total_q = p.total_k = -1;
  p.sinks = static_cast<const float*>(fake_ptr(10, 2));
  p.alibi_slopes = static_cast<const float*>(fake_ptr(11, 2));
  p.head_dim_v = 12;
  p.k_new = fake_ptr(12, 2);
  p.v_new = fake_ptr(13, 2);
  p.seqlen_new = -3;
  p.rotary_dim = 7;
  p.rotary_interleaved = 1;
  for (size_t size = sizeof(ParamsV1); size < sizeof(p); size += 8) {
    flash_attention_params cut = base;
    std::memcpy(&cut, &p, size);  // today's whole struct: p up to `size`, the defaults after it
    cut.struct_size = sizeof(cut);
    p.struct_size = size;
    SCOPED_TRACE(size);
    expect_same(validate_answer(&p), validate_answer(&cut), "flash_validate");
    expect_same(workspace_answer(&p), workspace_answer(&cut), "flash_attention_workspace_size");
  }
}

// The stride helpers read head_dim_v only from a struct that has it: an
// older caller's V and O are head_dim wide, whatever lies past its struct.
TEST(CApiStructSize, SetContiguousReadsHeadDimVOnlyWithinStructSize) {
  flash_attention_params p = valid_params();  // head_dim 128
  p.head_dim_v = 64;
  p.struct_size = offsetof(flash_attention_params, head_dim_v);
  flash_set_contiguous_bnhd(&p);
  EXPECT_EQ(p.v_head_stride, 128);
  EXPECT_EQ(p.o_seq_stride, 8 * 128);
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  p.struct_size = sizeof(p);
  flash_set_contiguous_bnhd(&p);
  EXPECT_EQ(p.q_head_stride, 128);
  EXPECT_EQ(p.v_head_stride, 64);
  EXPECT_EQ(p.o_seq_stride, 8 * 64);
  EXPECT_EQ(flash_validate(&p), FLASH_SUCCESS) << flash_last_error_message();
  p.head_dim_v = 12;
  EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"head_dim_v 12"}));
}

// The stride helpers write k_new's and v_new's strides only into a struct
// that has them, and read seqlen_new only from one that has it.
TEST(CApiStructSize, SetContiguousWritesNewRowStridesOnlyWithinStructSize) {
  struct Padded {
    flash_attention_params p;
    unsigned char guard[8];
  } buffer;
  std::memset(&buffer, 0x5A, sizeof(buffer));
  flash_attention_params& p = buffer.p;
  flash_attention_params_init(&p);
  flash::test::set_valid_gqa_call(p);
  p.seqlen_new = 2;
  p.struct_size = offsetof(flash_attention_params, k_new);  // the struct before append and rotary
  const flash_attention_params before = p;
  flash_set_contiguous_bnhd(&p);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(&p) + offsetof(flash_attention_params, k_new),
                        reinterpret_cast<const char*>(&before) + offsetof(flash_attention_params, k_new),
                        sizeof(p) - offsetof(flash_attention_params, k_new)),
            0);
  p.struct_size = sizeof(p);
  flash_set_contiguous_bnhd(&p);
  EXPECT_EQ(p.k_new_head_stride, 128);
  EXPECT_EQ(p.k_new_seq_stride, 2 * 128);
  EXPECT_EQ(p.k_new_batch_stride, 2 * 2 * 128);
  for (unsigned char g : buffer.guard) EXPECT_EQ(g, 0x5A);
}

// A caller compiled against the struct before the fp8 KV cache (its
// struct_size ends at rotary_interleaved) gets kv_dtype FLASH_KV_DTYPE_SAME,
// null descales and descale_head_stride 0, whatever lies past its struct;
// init and the stride helpers write nothing there. The same bytes within
// struct_size are read.
TEST(CApiStructSize, AStructBeforeTheFp8FieldsTakesTheirDefaults) {
  constexpr size_t kBefore = offsetof(flash_attention_params, kv_dtype);
  constexpr size_t kAfter = offsetof(flash_attention_params, descale_head_stride) + sizeof(int64_t);
  static_assert(kBefore % 8 == 0 && kAfter == kBefore + 32, "the fp8 fields: 4 + 4 (padding) + 8 + 8 + 8 bytes");
  const auto tail_is_ff = [&](const flash_attention_params& p) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
    for (size_t i = kBefore; i < sizeof(p); ++i) {
      if (bytes[i] != 0xFF) return false;
    }
    return true;
  };
  const flash_attention_params full = valid_params();

  // The older caller's set-up over 0xFF bytes, which read as the fp8 fields
  // would be kv_dtype -1, misaligned descales and descale_head_stride -1.
  flash_attention_params p;
  std::memset(&p, 0xFF, sizeof(p));
  flash_attention_params_init_sized(&p, kBefore);
  EXPECT_EQ(p.struct_size, kBefore);
  EXPECT_TRUE(tail_is_ff(p)) << "init wrote past struct_size";
  flash::test::set_valid_gqa_call(p);
  p.dtype = FLASH_DTYPE_BFLOAT16;
  flash_set_contiguous_bnhd(&p);
  flash_set_contiguous_bhnd(&p);
  flash_set_contiguous_bnhd(&p);
  EXPECT_TRUE(tail_is_ff(p)) << "a stride helper wrote past struct_size";
  EXPECT_EQ(std::memcmp(&p.q, &full.q, kBefore - sizeof(size_t)), 0);
  EXPECT_EQ(validate_answer(&p).code, FLASH_SUCCESS) << flash_last_error_message();
  expect_same(validate_answer(&p), validate_answer(&full), "flash_validate");
  expect_same(workspace_answer(&p), workspace_answer(&full), "flash_attention_workspace_size");
  // The same bytes within struct_size.
  p.struct_size = sizeof(p);
  EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"kv_dtype -1"}));

  // Each field on its own, at a value that changes the answer: ignored past
  // struct_size, read within it.
  const struct {
    const char* what;
    std::function<void(flash_attention_params&)> set;
    const char* word;
  } fields[] = {
      {"kv_dtype 7", [](flash_attention_params& q) { q.kv_dtype = static_cast<flash_kv_dtype>(7); }, "kv_dtype 7"},
      {"k_descale", [](flash_attention_params& q) { q.k_descale = static_cast<const float*>(fake_ptr(9)); },
       "k_descale"},
      {"v_descale", [](flash_attention_params& q) { q.v_descale = static_cast<const float*>(fake_ptr(10)); },
       "v_descale"},
      {"descale_head_stride 1", [](flash_attention_params& q) { q.descale_head_stride = 1; }, "descale_head_stride"},
  };
  for (const auto& field : fields) {
    SCOPED_TRACE(field.what);
    flash_attention_params q = valid_params();
    field.set(q);
    q.struct_size = kBefore;
    expect_same(validate_answer(&q), validate_answer(&full), "flash_validate");
    expect_same(workspace_answer(&q), workspace_answer(&full), "flash_attention_workspace_size");
    q.struct_size = sizeof(q);
    EXPECT_TRUE(rejected(q, FLASH_INVALID_ARGUMENT, {field.word}));
  }

  // Each struct_size across the fp8 fields reads exactly those within it:
  // the answers of today's struct with the fields past it at their defaults.
  flash_attention_params q = valid_params();
  q.k_batch_stride += 8;  // fine for bf16 K, not for e4m3 K
  q.kv_dtype = FLASH_KV_DTYPE_FLOAT8_E4M3;
  q.k_descale = static_cast<const float*>(fake_ptr(9));
  q.v_descale = static_cast<const float*>(fake_ptr(10, 2));  // misaligned
  q.descale_head_stride = 5;                                 // checked before the descales
  const char* const expected[] = {nullptr, "k_batch_stride", "k_batch_stride", "4-byte aligned",
                                  "descale_head_stride is 5"};
  for (size_t size = kBefore; size <= kAfter; size += 8) {
    SCOPED_TRACE(size);
    flash_attention_params cut = full;
    std::memcpy(&cut, &q, size);  // today's whole struct: q up to `size`, the defaults after it
    cut.struct_size = sizeof(cut);
    q.struct_size = size;
    expect_same(validate_answer(&q), validate_answer(&cut), "flash_validate");
    expect_same(workspace_answer(&q), workspace_answer(&cut), "flash_attention_workspace_size");
    const char* const word = expected[(size - kBefore) / 8];
    if (word == nullptr) {
      EXPECT_EQ(validate_answer(&q).code, FLASH_SUCCESS) << flash_last_error_message();
    } else {
      EXPECT_TRUE(rejected(q, FLASH_INVALID_ARGUMENT, {word}));
    }
  }
}

// A caller compiled against the struct before the FP8 prefill (its
// struct_size ends at descale_head_stride) gets q_dtype FLASH_KV_DTYPE_SAME
// and a null q_descale, whatever lies past its struct; the same bytes
// within struct_size are read.
TEST(CApiStructSize, AStructBeforeTheFp8PrefillFieldsTakesTheirDefaults) {
  constexpr size_t kBefore = offsetof(flash_attention_params, q_dtype);
  static_assert(kBefore % 8 == 0 && sizeof(flash_attention_params) == kBefore + 16,
                "the FP8 prefill's fields: 4 + 4 (padding) + 8 bytes");
  const flash_attention_params full = valid_params();
  flash_attention_params p;
  std::memset(&p, 0xFF, sizeof(p));
  flash_attention_params_init_sized(&p, kBefore);
  EXPECT_EQ(p.struct_size, kBefore);
  flash::test::set_valid_gqa_call(p);
  p.dtype = FLASH_DTYPE_BFLOAT16;
  flash_set_contiguous_bnhd(&p);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = kBefore; i < sizeof(p); ++i) EXPECT_EQ(bytes[i], 0xFF) << "written past struct_size at " << i;
  EXPECT_EQ(validate_answer(&p).code, FLASH_SUCCESS) << flash_last_error_message();
  expect_same(validate_answer(&p), validate_answer(&full), "flash_validate");
  expect_same(workspace_answer(&p), workspace_answer(&full), "flash_attention_workspace_size");
  // The same bytes within struct_size: q_dtype -1.
  p.struct_size = sizeof(p);
  EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, {"q_dtype -1"}));
}

// A struct_size the library cannot read is rejected by every entry point,
// with a message that says what is wrong; stride helpers leave it alone.
TEST(CApiStructSize, UnreadableStructSizesAreRejected) {
  const size_t full = sizeof(flash_attention_params);
  const char* const init_advice = "start the struct with flash_attention_params_init";
  const char* const newer_advice = "link the library of the headers you compile with";
  const struct {
    size_t size;
    std::vector<const char*> words;
    const char* advice;  // how the message ends: it fits the buffer whole
  } cases[] = {
      {0, {"struct_size is 0"}, init_advice},
      {8, {"struct_size 8 is below"}, init_advice},
      {sizeof(ParamsV1) - 8, {"is below", "the fields through autotune"}, init_advice},
      {sizeof(ParamsV1) + 4, {"not a multiple of 8"}, init_advice},
      {full - 1, {"not a multiple of 8"}, init_advice},
      {full + 8, {"is larger than this library's", "newer flash/flash.h"}, newer_advice},
      {full + 1, {"is larger than this library's"}, newer_advice},
      {full + 8 * 1000, {"is larger than this library's", FLASH_VERSION_STRING}, newer_advice},
      // Uninitialised memory: no struct has that size.
      {0x5A5A5A5A5A5A5A5Aull, {"struct_size 6510615555426900570 is the size of no"}, init_advice},
      {SIZE_MAX, {"is the size of no", std::to_string(full).c_str()}, init_advice},
      {size_t{1} << 16, {"is the size of no"}, init_advice},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.size);
    flash_attention_params p = valid_params();
    p.struct_size = c.size;
    EXPECT_TRUE(rejected(p, FLASH_INVALID_ARGUMENT, c.words));
    const std::string message = flash_last_error_message();
    const std::string advice = c.advice;
    EXPECT_TRUE(message.size() >= advice.size() &&
                message.compare(message.size() - advice.size(), advice.size(), advice) == 0)
        << message;
    size_t bytes = 7;
    EXPECT_EQ(flash_attention_workspace_size(&p, &bytes), FLASH_INVALID_ARGUMENT);
    EXPECT_EQ(bytes, size_t{0});
    EXPECT_NE(std::string(flash_last_error_message()).find("struct_size"), std::string::npos);

    const flash_attention_params before = p;
    flash_set_contiguous_bhnd(&p);
    flash_set_contiguous_bnhd(&p);
    EXPECT_EQ(std::memcmp(&p, &before, sizeof(p)), 0) << "a stride helper wrote to an unreadable struct";
  }
}

// A program compiled against a newer flash.h (one more field) on this
// library: refused, since the library cannot honour the new field; init
// records the size, touching nothing else.
TEST(CApiStructSize, ANewerLongerStructIsRefused) {
  struct ParamsNext {
    flash_attention_params today;
    int64_t new_field;
  };
  ParamsNext next;
  std::memset(&next, 0xFF, sizeof(next));
  auto* c = reinterpret_cast<flash_attention_params*>(&next);
  flash_attention_params_init_sized(c, sizeof(next));
  EXPECT_EQ(next.today.struct_size, sizeof(next));
  EXPECT_EQ(next.today.batch, -1) << "init wrote fields of a struct it rejects";
  EXPECT_EQ(next.new_field, -1);

  next.today = valid_params();
  next.today.struct_size = sizeof(next);
  next.new_field = 0;
  EXPECT_TRUE(rejected(next.today, FLASH_INVALID_ARGUMENT,
                       {"struct_size", std::to_string(sizeof(next)).c_str(), "newer flash/flash.h"}));
}

// init with sizes it does not accept writes only struct_size, or nothing when
// that does not fit; a null struct is ignored.
TEST(CApiStructSize, InitWithAnUnreadableSizeWritesOnlyTheSize) {
  for (const size_t size : {size_t{0}, size_t{4}, size_t{8}, sizeof(ParamsV1) - 8, sizeof(ParamsV1) + 4}) {
    SCOPED_TRACE(size);
    PoisonedV1 buffer;
    flash_attention_params_init_sized(buffer.c(), size);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&buffer);
    const size_t written = size >= sizeof(size_t) ? sizeof(size_t) : 0;
    if (written != 0) {
      EXPECT_EQ(buffer.v1.struct_size, size);
    }
    for (size_t i = written; i < sizeof(buffer); ++i) ASSERT_EQ(bytes[i], 0xFF) << "byte " << i;
  }
  flash_attention_params_init_sized(nullptr, sizeof(flash_attention_params));  // ignored, no crash
}

// ---- flash_merge_params: the C API of flash::merge_states ----

// A valid merge on fake pointers: 3 states of 2 sequences, 5 queries and 4
// heads at head_dim 128, contiguous, the states' O and LSE and the outputs
// each in their own region (0 to 3).
flash_merge_params valid_merge_params() {
  flash_merge_params p;
  flash_merge_params_init(&p);
  p.dtype = FLASH_DTYPE_BFLOAT16;
  p.num_states = 3, p.batch = 2, p.seqlen_q = 5, p.heads = 4, p.head_dim = 128;
  flash_merge_set_contiguous(&p);
  p.o_states = fake_ptr(0);
  p.lse_states = static_cast<const float*>(fake_ptr(1));
  p.o = fake_ptr(2);
  p.lse = static_cast<float*>(fake_ptr(3));
  return p;
}

// The C++ parameters a C caller means by `c`, converted field by field here
// (independently of src/c_api.cpp's own conversion). dtype goes through as
// its bytes, which may be no enumerator.
flash::MergeParams as_cpp(const flash_merge_params& c) {
  flash::MergeParams p;
  int32_t dtype;
  std::memcpy(&dtype, &c.dtype, sizeof(dtype));
  p.dtype = static_cast<flash::DType>(dtype);
  p.num_states = c.num_states, p.batch = c.batch, p.seqlen_q = c.seqlen_q, p.heads = c.heads;
  p.head_dim = c.head_dim;
  p.o_states = c.o_states, p.o_state_stride = c.o_state_stride;
  p.o_states_batch_stride = c.o_states_batch_stride, p.o_states_seq_stride = c.o_states_seq_stride;
  p.o_states_head_stride = c.o_states_head_stride;
  p.lse_states = c.lse_states, p.lse_state_stride = c.lse_state_stride;
  p.o = c.o, p.o_batch_stride = c.o_batch_stride, p.o_seq_stride = c.o_seq_stride;
  p.o_head_stride = c.o_head_stride;
  p.lse = c.lse;
  return p;
}

bool same_merge_params(const flash::MergeParams& a, const flash::MergeParams& b) {
  return a.dtype == b.dtype && a.num_states == b.num_states && a.batch == b.batch && a.seqlen_q == b.seqlen_q &&
         a.heads == b.heads && a.head_dim == b.head_dim && a.o_states == b.o_states &&
         a.o_state_stride == b.o_state_stride && a.o_states_batch_stride == b.o_states_batch_stride &&
         a.o_states_seq_stride == b.o_states_seq_stride && a.o_states_head_stride == b.o_states_head_stride &&
         a.lse_states == b.lse_states && a.lse_state_stride == b.lse_state_stride && a.o == b.o &&
         a.o_batch_stride == b.o_batch_stride && a.o_seq_stride == b.o_seq_stride &&
         a.o_head_stride == b.o_head_stride && a.lse == b.lse;
}

Answer validate_merge_answer(const flash_merge_params* p) {
  const int code = flash_validate_merge(p);
  return {code, flash_last_error_message()};
}

Answer merge_answer(const flash_merge_params* p) {
  const int code = flash_merge_states(p, /*stream=*/nullptr);
  return {code, flash_last_error_message()};
}

// flash_validate_merge answers `c` as flash::validate answers `cpp`: the
// same code and message; and when that is a rejection (or empty work, which
// launches nothing), so does flash_merge_states, without touching the GPU.
void expect_merge_answers(const flash_merge_params& c, const flash::MergeParams& cpp) {
  const flash::Status expected = flash::validate(cpp);
  const Answer want{static_cast<int>(expected.code), expected.message};
  expect_same(validate_merge_answer(&c), want, "flash_validate_merge");
  if (!expected.ok() || cpp.batch == 0 || cpp.seqlen_q == 0 || cpp.heads == 0) {
    expect_same(merge_answer(&c), want, "flash_merge_states");
  }
}

TEST(CApiMerge, InitGivesTheCppDefaults) {
  flash_merge_params p;
  std::memset(&p, 0x5A, sizeof(p));  // garbage, as an uninitialised struct would hold
  flash_merge_params_init(&p);
  const flash::MergeParams cpp;
  EXPECT_EQ(p.struct_size, sizeof(flash_merge_params));
  EXPECT_EQ(p.dtype, FLASH_DTYPE_BFLOAT16);
  EXPECT_EQ(static_cast<int>(p.dtype), static_cast<int>(cpp.dtype));
  for (int64_t value : {p.num_states, p.batch, p.seqlen_q, p.heads, p.head_dim, p.o_state_stride,
                        p.o_states_batch_stride, p.o_states_seq_stride, p.o_states_head_stride, p.lse_state_stride,
                        p.o_batch_stride, p.o_seq_stride, p.o_head_stride}) {
    EXPECT_EQ(value, 0);
  }
  EXPECT_EQ(p.o_states, nullptr);
  EXPECT_EQ(p.lse_states, nullptr);
  EXPECT_EQ(p.o, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  // ... the C++ defaults, field by field.
  EXPECT_TRUE(same_merge_params(as_cpp(p), cpp));

  // The padding (after dtype) is zeroed: inits of different garbage agree
  // byte for byte.
  flash_merge_params other;
  std::memset(&other, 0xA5, sizeof(other));
  flash_merge_params_init(&other);
  EXPECT_EQ(std::memcmp(&p, &other, sizeof(p)), 0);

  flash_merge_params_init(nullptr);  // ignored, no crash
}

TEST(CApiMerge, SetContiguousMatchesTheCppHelper) {
  flash_merge_params p;
  flash_merge_params_init(&p);
  p.dtype = FLASH_DTYPE_FLOAT16;
  p.num_states = 3, p.batch = 2, p.seqlen_q = 5, p.heads = 4, p.head_dim = 64;
  p.o_states = fake_ptr(0);
  p.lse_states = static_cast<const float*>(fake_ptr(1));
  p.o = fake_ptr(2);
  p.lse = static_cast<float*>(fake_ptr(3));
  p.o_state_stride = p.o_states_batch_stride = p.o_states_seq_stride = p.o_states_head_stride = 9;
  p.lse_state_stride = p.o_batch_stride = p.o_seq_stride = p.o_head_stride = 9;
  flash_merge_set_contiguous(&p);

  flash::MergeParams cpp;
  cpp.num_states = 3, cpp.batch = 2, cpp.seqlen_q = 5, cpp.heads = 4, cpp.head_dim = 64;
  cpp.set_contiguous();
  EXPECT_EQ(p.o_state_stride, cpp.o_state_stride);
  EXPECT_EQ(p.o_states_batch_stride, cpp.o_states_batch_stride);
  EXPECT_EQ(p.o_states_seq_stride, cpp.o_states_seq_stride);
  EXPECT_EQ(p.o_states_head_stride, cpp.o_states_head_stride);
  EXPECT_EQ(p.lse_state_stride, cpp.lse_state_stride);
  EXPECT_EQ(p.o_batch_stride, cpp.o_batch_stride);
  EXPECT_EQ(p.o_seq_stride, cpp.o_seq_stride);
  EXPECT_EQ(p.o_head_stride, cpp.o_head_stride);
  // The values spelled out once.
  EXPECT_EQ(p.o_head_stride, 64);
  EXPECT_EQ(p.o_seq_stride, 4 * 64);
  EXPECT_EQ(p.o_batch_stride, 5 * 4 * 64);
  EXPECT_EQ(p.o_states_batch_stride, 5 * 4 * 64);
  EXPECT_EQ(p.o_state_stride, 2 * 5 * 4 * 64);
  EXPECT_EQ(p.lse_state_stride, 2 * 4 * 5);
  // Everything else is left alone.
  EXPECT_EQ(p.dtype, FLASH_DTYPE_FLOAT16);
  EXPECT_EQ(p.num_states, 3);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.o_states, fake_ptr(0));
  EXPECT_EQ(p.lse_states, fake_ptr(1));
  EXPECT_EQ(p.o, fake_ptr(2));
  EXPECT_EQ(p.lse, fake_ptr(3));
  EXPECT_EQ(flash_validate_merge(&p), FLASH_SUCCESS) << flash_last_error_message();

  flash_merge_set_contiguous(nullptr);  // ignored, no crash
}

// flash_validate_merge and flash_merge_states give flash::validate's answer,
// code and message, for valid calls and for each kind of rejection.
TEST(CApiMerge, ValidateAgreesWithTheCppValidate) {
  flash_merge_params p = valid_merge_params();
  p.head_dim = 84;  // leave a message behind first
  ASSERT_EQ(flash_validate_merge(&p), FLASH_INVALID_ARGUMENT);
  ASSERT_STRNE(flash_last_error_message(), "");
  p = valid_merge_params();
  EXPECT_EQ(flash_validate_merge(&p), FLASH_SUCCESS) << flash_last_error_message();
  EXPECT_STREQ(flash_last_error_message(), "");

  struct Case {
    const char* what;
    std::function<void(flash_merge_params&)> change;
    bool valid;
  };
  const int64_t state_bytes = valid_merge_params().o_state_stride * 2;
  const int64_t lse_state_bytes = valid_merge_params().lse_state_stride * 4;
  const Case cases[] = {
      {"valid", [](flash_merge_params&) {}, true},
      {"no lse", [](flash_merge_params& m) { m.lse = nullptr; }, true},
      {"fp16, one state",
       [](flash_merge_params& m) {
         m.dtype = FLASH_DTYPE_FLOAT16;
         m.num_states = 1;
       },
       true},
      {"in place into state 1",
       [&](flash_merge_params& m) {
         m.o = fake_ptr(0, state_bytes);
         m.lse = static_cast<float*>(fake_ptr(1, lse_state_bytes));
       },
       true},
      {"empty work, no pointers",
       [](flash_merge_params& m) {
         m.batch = 0;
         m.o_states = m.lse_states = nullptr;
         m.o = m.lse = nullptr;
       },
       true},
      {"num_states 0", [](flash_merge_params& m) { m.num_states = 0; }, false},
      {"num_states 129", [](flash_merge_params& m) { m.num_states = 129; }, false},
      {"head_dim 84", [](flash_merge_params& m) { m.head_dim = 84; }, false},
      {"dtype 7", [](flash_merge_params& m) { m.dtype = static_cast<flash_dtype>(7); }, false},
      {"dtype bytes 0x5A5A5A5A", [](flash_merge_params& m) { std::memset(&m.dtype, 0x5A, sizeof(m.dtype)); }, false},
      {"heads -1", [](flash_merge_params& m) { m.heads = -1; }, false},
      {"rows over 2^31", [](flash_merge_params& m) { m.batch = 1 << 20, m.seqlen_q = 1 << 12; }, false},
      {"null o_states", [](flash_merge_params& m) { m.o_states = nullptr; }, false},
      {"null o", [](flash_merge_params& m) { m.o = nullptr; }, false},
      {"misaligned o", [](flash_merge_params& m) { m.o = fake_ptr(2, 1); }, false},
      {"misaligned lse", [](flash_merge_params& m) { m.lse = static_cast<float*>(fake_ptr(3, 2)); }, false},
      {"negative stride", [](flash_merge_params& m) { m.o_seq_stride = -1; }, false},
      {"overlapping output rows", [](flash_merge_params& m) { m.o_head_stride = 64; }, false},
      {"o overlaps a state", [](flash_merge_params& m) { m.o = fake_ptr(0, 2); }, false},
      {"lse overlaps a state's LSE", [](flash_merge_params& m) { m.lse = static_cast<float*>(fake_ptr(1, 4)); }, false},
      {"o overlaps the LSE states", [](flash_merge_params& m) { m.o = fake_ptr(1); }, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    flash_merge_params m = valid_merge_params();
    c.change(m);
    const flash::Status cpp = flash::validate(as_cpp(m));
    EXPECT_EQ(cpp.ok(), c.valid) << cpp.message;
    EXPECT_EQ(cpp.message[0] == '\0', c.valid) << cpp.message;
    expect_merge_answers(m, as_cpp(m));
  }
}

TEST(CApiMerge, NullParamsIsInvalidArgument) {
  for (const Answer& answer : {validate_merge_answer(nullptr), merge_answer(nullptr)}) {
    EXPECT_EQ(answer.code, FLASH_INVALID_ARGUMENT);
    EXPECT_NE(answer.message.find("params is null"), std::string::npos) << answer.message;
    EXPECT_NE(answer.message.find("flash_merge_params_init"), std::string::npos) << answer.message;
  }
}

// A caller compiled against a flash_merge_params without lse (struct_size
// at its offset) gets the answers of the full struct with lse null; the
// library reads nothing past its struct.
TEST(CApiMerge, AShorterStructTakesLseAsNull) {
  constexpr size_t kShort = offsetof(flash_merge_params, lse);
  // The short struct, with 0xFF bytes where today's lse would be: read, they
  // would be a misaligned lse and a rejection.
  flash_merge_params buffer;
  std::memset(&buffer, 0xFF, sizeof(buffer));
  flash_merge_params_init_sized(&buffer, kShort);
  EXPECT_EQ(buffer.struct_size, kShort);
  const auto* lse_bytes = reinterpret_cast<const unsigned char*>(&buffer) + kShort;
  for (size_t i = 0; i < sizeof(buffer) - kShort; ++i) ASSERT_EQ(lse_bytes[i], 0xFF) << "init wrote past struct_size";
  flash_merge_params full;
  flash_merge_params_init(&full);
  EXPECT_EQ(std::memcmp(&buffer.dtype, &full.dtype, kShort - sizeof(size_t)), 0) << "the defaults differ";

  const flash_merge_params valid = valid_merge_params();
  std::memcpy(&buffer.dtype, &valid.dtype, kShort - sizeof(size_t));  // the caller's own fields
  flash_merge_set_contiguous(&buffer);
  for (size_t i = 0; i < sizeof(buffer) - kShort; ++i) ASSERT_EQ(lse_bytes[i], 0xFF) << "set_contiguous wrote lse";
  EXPECT_EQ(validate_merge_answer(&buffer).code, FLASH_SUCCESS) << flash_last_error_message();
  EXPECT_STREQ(flash_last_error_message(), "");

  // Valid and rejected calls alike: the answers of today's struct, lse null.
  const std::function<void(flash_merge_params&)> changes[] = {
      [](flash_merge_params&) {},
      [](flash_merge_params& m) { m.o_states = nullptr; },
      [](flash_merge_params& m) { m.num_states = 0; },
      [](flash_merge_params& m) { m.o = fake_ptr(0, 2); },
      [](flash_merge_params& m) { m.batch = 0; },
  };
  for (const auto& change : changes) {
    flash_merge_params m = valid_merge_params();
    change(m);
    m.lse = nullptr;
    flash::MergeParams cpp = as_cpp(m);
    std::memcpy(&buffer, &m, kShort);
    buffer.struct_size = kShort;
    expect_merge_answers(buffer, cpp);
    flash_merge_params whole = m;
    expect_same(validate_merge_answer(&buffer), validate_merge_answer(&whole), "flash_validate_merge");
  }
  for (size_t i = 0; i < sizeof(buffer) - kShort; ++i) ASSERT_EQ(lse_bytes[i], 0xFF);
}

// A struct_size the library cannot read is rejected by both entry points
// with a message saying what is wrong; set_contiguous leaves the struct
// alone and init writes only the size.
TEST(CApiMerge, UnreadableStructSizesAreRejected) {
  const size_t full = sizeof(flash_merge_params);
  const size_t smallest = offsetof(flash_merge_params, lse);
  const char* const init_advice = "start the struct with flash_merge_params_init";
  const char* const newer_advice = "link the library of the headers you compile with";
  const struct {
    size_t size;
    std::vector<std::string> words;
    const char* advice;
  } cases[] = {
      {0, {"struct_size is 0", "sizeof(flash_merge_params)"}, init_advice},
      {8, {"struct_size 8 is below the smallest flash_merge_params"}, init_advice},
      {smallest - 8, {"is below", "the fields through o_head_stride", std::to_string(smallest)}, init_advice},
      {smallest + 4, {"not a multiple of 8"}, init_advice},
      {full - 1, {"not a multiple of 8"}, init_advice},
      {full + 8, {"is larger than this library's flash_merge_params", "newer flash/flash.h"}, newer_advice},
      {full + 1, {"is larger than this library's", FLASH_VERSION_STRING}, newer_advice},
      {0x5A5A5A5A5A5A5A5Aull, {"is the size of no flash_merge_params", std::to_string(full)}, init_advice},
      {SIZE_MAX, {"is the size of no"}, init_advice},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.size);
    flash_merge_params p = valid_merge_params();
    p.struct_size = c.size;
    for (const Answer& answer : {validate_merge_answer(&p), merge_answer(&p)}) {
      EXPECT_EQ(answer.code, FLASH_INVALID_ARGUMENT) << answer.message;
      for (const std::string& word : c.words) {
        EXPECT_NE(answer.message.find(word), std::string::npos) << answer.message << " lacks " << word;
      }
      const std::string advice = c.advice;
      EXPECT_TRUE(answer.message.size() >= advice.size() &&
                  answer.message.compare(answer.message.size() - advice.size(), advice.size(), advice) == 0)
          << answer.message;
    }
    const flash_merge_params before = p;
    flash_merge_set_contiguous(&p);
    EXPECT_EQ(std::memcmp(&p, &before, sizeof(p)), 0) << "set_contiguous wrote to an unreadable struct";

    // init of a struct of that size (as much of it as fits here): the size only.
    if (c.size <= full + 8) {
      unsigned char bytes[sizeof(flash_merge_params) + 8];
      std::memset(bytes, 0xFF, sizeof(bytes));
      flash_merge_params_init_sized(reinterpret_cast<flash_merge_params*>(bytes), c.size);
      const size_t written = c.size >= sizeof(size_t) ? sizeof(size_t) : 0;
      if (written != 0) {
        size_t size;
        std::memcpy(&size, bytes, sizeof(size));
        EXPECT_EQ(size, c.size);
      }
      for (size_t i = written; i < sizeof(bytes); ++i) ASSERT_EQ(bytes[i], 0xFF) << "byte " << i;
    }
  }
  flash_merge_params_init_sized(nullptr, sizeof(flash_merge_params));  // ignored, no crash
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
