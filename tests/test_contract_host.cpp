// Contract holes found by fuzzing and stress (issue 24), one test each:
// scales whose folded constants overflow float32, sizes and grids the decode
// kernel cannot launch, outputs overlapping the int32 arrays the kernels
// read, garbage enum and bool bytes through the C API, strides filled from
// out-of-range sizes, and an autotune cache path naming a FIFO. Pure host:
// the pointers are fake (16-byte aligned, 1 TiB apart, never dereferenced)
// and every call here is rejected before the GPU or launches nothing.
#include <gtest/gtest.h>

#include <cfloat>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <initializer_list>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_params.h"
#include "flash/flash.h"
#include "flash/flash.hpp"
#include "kernels/decode/api.h"
#include "src/autotune/tune_cache.h"

// In flash::test: flash's names, and fake_ptr() and valid_params() (a valid
// GQA call on fake pointers) of fake_params.h.
namespace flash::test {
namespace {

// validate() and a (rejected, so GPU-free) attention_forward() both return
// `code` with a message naming every word.
::testing::AssertionResult rejected(const AttentionParams& p, StatusCode code,
                                    std::initializer_list<const char*> words) {
  for (int entry = 0; entry < 2; ++entry) {
    const Status s = entry == 0 ? flash::validate(p) : flash::attention_forward(p, nullptr);
    const char* name = entry == 0 ? "validate" : "attention_forward";
    if (s.code != code) {
      return ::testing::AssertionFailure() << name << " returned code " << static_cast<int>(s.code) << " (\""
                                           << s.message << "\"), expected " << static_cast<int>(code);
    }
    for (const char* word : words) {
      if (std::strstr(s.message, word) == nullptr) {
        return ::testing::AssertionFailure() << name << ": \"" << s.message << "\" does not name \"" << word << "\"";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Item 2: scales whose folded constants overflow float32 ----

TEST(Contract, SoftmaxScaleAboveTheLimitIsRejectedWithTheLimit) {
  for (const float scale : {FLT_MAX, 1e30f, 3e24f}) {
    AttentionParams p = valid_params();
    p.softmax_scale = scale;
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"softmax_scale", "1e24"})) << scale;
  }
  for (const float scale : {1e24f, 1e10f, 1.f, 1e-30f, FLT_TRUE_MIN}) {
    AttentionParams p = valid_params();
    p.softmax_scale = scale;
    EXPECT_TRUE(flash::validate(p).ok()) << scale << ": " << flash::validate(p).message;
  }
}

TEST(Contract, SoftcapAboveTheLimitIsRejectedWithTheLimit) {
  for (const float cap : {3e38f, 1e30f, 2e6f}) {
    AttentionParams p = valid_params();
    p.softcap = cap;
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"softcap", "1e6"})) << cap;
  }
  for (const float cap : {1e6f, 50.f, 1e-6f}) {
    AttentionParams p = valid_params();
    p.softcap = cap;
    EXPECT_TRUE(flash::validate(p).ok()) << cap << ": " << flash::validate(p).message;
  }
}

// ---- Item 3: sizes and grids the decode kernel cannot launch ----

// The repro: the split workspace's size wrapped size_t, and a
// 256-byte workspace was accepted.
TEST(Contract, SplitWhoseWorkspaceSizeWouldWrapIsUnsupported) {
  AttentionParams p = valid_params();
  p.lse = nullptr;
  p.batch = 1024;
  p.seqlen_q = int64_t{1} << 30;
  p.seqlen_k = 4096;
  p.heads_q = p.heads_kv = 32768;
  p.head_dim = 32;
  p.set_contiguous_bnhd();
  // Q and O span 2^51 bytes: regions 2^52 apart keep every tensor apart.
  const auto far_ptr = [](int index) { return reinterpret_cast<void*>(static_cast<uintptr_t>(index + 1) << 52); };
  p.q = far_ptr(0);
  p.k = far_ptr(1);
  p.v = far_ptr(2);
  p.o = far_ptr(3);
  p.cu_seqlens_q = static_cast<const int32_t*>(far_ptr(4));
  p.num_splits = 128;
  p.workspace = far_ptr(5);
  p.workspace_bytes = 256;
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"2^31"}));
  p.num_splits = 8;  // a grid that fits, but the combine's one CTA per row does not
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"num_splits 8", "2^31"}));
}

TEST(Contract, DecodeRowsPast32BitsAreUnsupported) {
  AttentionParams p = valid_params();
  p.lse = nullptr;
  p.batch = 1;
  p.seqlen_q = int64_t{1} << 25;  // * 64 query heads per K/V head = 2^31 packed rows
  p.heads_q = 64;
  p.heads_kv = 1;
  p.set_contiguous_bnhd();
  p.backend = Backend::kDecode;
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"decode", "2147483648", "2^31 - 16"}));
  p.seqlen_q = (int64_t{1} << 25) - 1;  // 2^31 - 64 rows: within the limit
  p.set_contiguous_bnhd();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

TEST(Contract, DecodeGridPastGridDimXIsUnsupported) {
  AttentionParams p = valid_params();
  p.lse = nullptr;
  p.batch = 1;
  p.seqlen_q = int64_t{1} << 24;  // 2^30 rows in 2^26 blocks, times 128 splits = 2^33 CTAs
  p.heads_q = 64;
  p.heads_kv = 1;
  p.set_contiguous_bnhd();
  p.num_splits = 128;
  p.workspace = fake_ptr(7);
  p.workspace_bytes = size_t{1} << 50;
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"CTAs", "2^31 - 1", "splits"}));
  p.num_splits = 32;  // 2^31 CTAs: one too many
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"CTAs"}));
  p.num_splits = 31;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

#if defined(FLASH_TEST_HAS_HEAD_DIM_64)
// The launcher checks its grids in 64-bit arithmetic before any CUDA call:
// too large gives cudaErrorInvalidConfiguration with or without a GPU, and
// launches nothing.
TEST(Contract, DecodeLauncherRefusesGridsPastTheHardwareLimits) {
  const auto run_bf16 = flash::decode::run_decode<DType::kBFloat16, 64>;
  const auto run_fp16 = flash::decode::run_decode<DType::kFloat16, 64>;
  flash::detail::FwdParams f{};
  f.batch = 1;
  f.seqlen_q = 1 << 25;
  f.heads_q = 64;
  f.heads_kv = 1;
  f.q_per_kv = 64;
  f.num_splits = 1;
  EXPECT_EQ(run_bf16(f, 0, nullptr), cudaErrorInvalidConfiguration);
  f.seqlen_q = 1 << 24;  // 2^30 rows: fits one split, not 128
  f.num_splits = 128;
  EXPECT_EQ(run_fp16(f, 0, nullptr), cudaErrorInvalidConfiguration);
  f.seqlen_q = 1;
  f.q_per_kv = 1;
  f.heads_q = f.heads_kv = 65536;  // gridDim.y
  f.num_splits = 1;
  EXPECT_EQ(run_bf16(f, 0, nullptr), cudaErrorInvalidConfiguration);
  f.heads_q = f.heads_kv = 1;
  f.batch = 65536;  // gridDim.z
  EXPECT_EQ(run_bf16(f, 0, nullptr), cudaErrorInvalidConfiguration);
  f.batch = 32768;  // the combine grid: 32768 * 65536 * 1 rows
  f.heads_q = f.q_per_kv = 65536;
  f.num_splits = 2;
  EXPECT_EQ(run_bf16(f, 0, nullptr), cudaErrorInvalidConfiguration);
}
#endif

// The decode launchers' variants (candidate indices): one a kernel does not
// have is refused before any CUDA call, with or without a GPU, as is the
// append-writing form on the two-stage variant (which has none).
TEST(Contract, DecodeLaunchersRefuseVariantsTheyDoNotHave) {
  flash::detail::FwdParams f{};
  f.batch = f.seqlen_q = f.heads_q = f.heads_kv = f.q_per_kv = f.num_splits = 1;
  EXPECT_EQ(flash::decode::run_mla<DType::kBFloat16>(f, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(flash::decode::run_mla<DType::kFloat16>(f, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(flash::decode::run_wide<DType::kBFloat16>(f, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(flash::decode::run_wide<DType::kFloat16>(f, 2, nullptr), cudaErrorInvalidValue);
#if defined(FLASH_TEST_HAS_HEAD_DIM_64)
  EXPECT_EQ((flash::decode::run_decode<DType::kBFloat16, 64>(f, 1, nullptr)), cudaErrorInvalidValue);
  EXPECT_EQ((flash::decode::run_decode_fp8<DType::kBFloat16, 64>(f, 1, nullptr)), cudaErrorInvalidValue);
#endif
#if defined(FLASH_TEST_HAS_HEAD_DIM_128)
  EXPECT_EQ((flash::decode::run_decode<DType::kFloat16, 128>(f, 2, nullptr)), cudaErrorInvalidValue);
  f.append.writes = true;
  EXPECT_EQ((flash::decode::run_decode<DType::kBFloat16, 128>(f, 1, nullptr)), cudaErrorInvalidValue);
#endif
}

// ---- Item 4: outputs overlapping the int32 arrays the kernels read ----

TEST(Contract, OutputsMustNotOverlapTheIndexArrays) {
  // The repro: cu_seqlens_q inside O.
  {
    AttentionParams p = valid_params();
    p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(3, 64));
    p.total_q = 200;
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"o overlaps cu_seqlens_q"}));
  }
  {
    AttentionParams p = valid_params();
    p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(4, 4 * 100));  // inside the LSE (2*8*100 floats)
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"lse overlaps cu_seqlens_k"}));
  }
  {
    AttentionParams p = valid_params();
    p.seqused_k = static_cast<const int32_t*>(fake_ptr(4, -4));  // its 2 entries end inside the LSE
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"lse overlaps seqused_k"}));
    p.seqused_k = static_cast<const int32_t*>(fake_ptr(4, -8));  // ends where the LSE starts
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  }
  {
    // The sinks (heads_q floats) are read too.
    AttentionParams p = valid_params();
    p.sinks = static_cast<const float*>(fake_ptr(4, -4 * p.heads_q + 4));  // the last sink inside the LSE
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"lse overlaps sinks"}));
    p.sinks = static_cast<const float*>(fake_ptr(4, -4 * p.heads_q));  // ends where the LSE starts
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
    p.sinks = nullptr;
    p.alibi_slopes = static_cast<const float*>(fake_ptr(3, 4 * 100));  // inside O
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"o overlaps alibi_slopes"}));
  }
  {
    AttentionParams p = valid_params();
    p.block_table = static_cast<const int32_t*>(fake_ptr(5));
    p.page_size = 16;
    p.num_pages = 64;
    p.max_pages_per_seq = 16;
    p.block_table_batch_stride = 1000;  // the table spans (1 * 1000 + 16) entries
    p.k_batch_stride = p.v_batch_stride = p.page_size * p.k_seq_stride;
    p.workspace = fake_ptr(5, -256);
    p.workspace_bytes = 256;
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
    p.workspace_bytes = 260;
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"workspace overlaps block_table"}));
    p.workspace_bytes = 256;
    p.o = fake_ptr(5, 4 * 1008);  // inside the second sequence's row
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"o overlaps block_table"}));
    p.o = fake_ptr(5, 4 * 1016);  // just past the table
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  }
}

// ---- Item 5: garbage through the C API, out-of-range sizes ----

// The same call through the C API, without an LSE.
flash_attention_params valid_c_params_without_lse() {
  flash_attention_params c = valid_c_params();
  c.lse = nullptr;
  return c;
}

TEST(Contract, CApiRejectsABoolByteOtherThanZeroOrOne) {
  flash_attention_params c = valid_c_params_without_lse();
  ASSERT_EQ(flash_validate(&c), FLASH_SUCCESS) << flash_last_error_message();
  const unsigned char garbage = 0x5A;
  std::memcpy(&c.causal, &garbage, 1);
  EXPECT_EQ(flash_validate(&c), FLASH_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(flash_last_error_message(), "causal"), nullptr) << flash_last_error_message();
  EXPECT_NE(std::strstr(flash_last_error_message(), "90"), nullptr) << flash_last_error_message();
  EXPECT_EQ(flash_attention_forward(&c, nullptr), FLASH_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(flash_last_error_message(), "causal"), nullptr) << flash_last_error_message();
  size_t bytes = 1;
  EXPECT_EQ(flash_attention_workspace_size(&c, &bytes), FLASH_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
}

// The bytes are read as integers, never loaded as the enum type (undefined
// behaviour, which the fuzz test's UBSan build reports).
TEST(Contract, CApiPassesUnknownEnumValuesToTheChecks) {
  for (const int32_t value : {2, -1, 0x7FFFFFFF, static_cast<int32_t>(0x80000000u)}) {
    flash_attention_params c = valid_c_params_without_lse();
    std::memcpy(&c.dtype, &value, sizeof(value));
    EXPECT_EQ(flash_validate(&c), FLASH_INVALID_ARGUMENT) << value;
    EXPECT_NE(std::strstr(flash_last_error_message(), "dtype"), nullptr) << flash_last_error_message();
    c = valid_c_params_without_lse();
    std::memcpy(&c.backend, &value, sizeof(value));
    if (value >= 0 && value <= 3) continue;
    EXPECT_EQ(flash_validate(&c), FLASH_INVALID_ARGUMENT) << value;
    EXPECT_NE(std::strstr(flash_last_error_message(), "backend"), nullptr) << flash_last_error_message();
  }
}

// flash_set_contiguous_* fills the strides from the sizes and touches
// nothing else, garbage included.
TEST(Contract, CApiSetContiguousLeavesOtherFieldsAlone) {
  flash_attention_params c = valid_c_params_without_lse();
  const unsigned char garbage = 0x5A;
  std::memcpy(&c.causal, &garbage, 1);
  const int32_t bad = 77;
  std::memcpy(&c.dtype, &bad, sizeof(bad));
  c.autotune = 5;
  flash_set_contiguous_bhnd(&c);
  EXPECT_EQ(std::memcmp(&c.causal, &garbage, 1), 0);
  EXPECT_EQ(std::memcmp(&c.dtype, &bad, sizeof(bad)), 0);
  EXPECT_EQ(c.autotune, 5);
  EXPECT_EQ(c.q_seq_stride, 128);
  EXPECT_EQ(c.q_head_stride, 100 * 128);
}

// Sizes far out of range saturate the strides instead of overflowing; the
// checks then reject the sizes themselves.
TEST(Contract, SetContiguousSaturatesOutOfRangeSizes) {
  for (const bool bhnd : {false, true}) {
    AttentionParams p = valid_params();
    p.seqlen_q = p.seqlen_k = INT64_MAX / 2;
    p.heads_q = p.heads_kv = INT64_MAX / 3;
    p.head_dim = INT64_MAX / 5;
    bhnd ? p.set_contiguous_bhnd() : p.set_contiguous_bnhd();
    EXPECT_EQ(p.q_batch_stride, INT64_MAX) << bhnd;
    EXPECT_EQ(p.k_batch_stride, INT64_MAX) << bhnd;
    EXPECT_FALSE(flash::validate(p).ok());
    p.seqlen_q = p.heads_q = INT64_MIN;
    p.head_dim = 1 << 20;
    bhnd ? p.set_contiguous_bhnd() : p.set_contiguous_bnhd();
    EXPECT_EQ(p.q_batch_stride, INT64_MAX) << bhnd;  // a negative size times a negative one
    EXPECT_TRUE(rejected(p, StatusCode::kInvalidArgument, {"seqlen_q"}));
  }
}

// ---- Item 6: an autotune cache path naming a FIFO ----

TEST(Contract, AutotuneCacheNamingAFifoIsIgnoredWithoutBlocking) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("flash_contract_fifo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / "cache.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);

  flash::detail::TuneCache cache;
  flash::detail::CacheFileHeader header;
  header.flash_version = flash::version();
  std::string warning;
  auto load = std::async(std::launch::async, [&] { return cache.load_file(fifo.string(), header, &warning); });
  const bool finished = load.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!finished) {
    // Release the blocked reader (a writer that opens and closes gives it
    // end-of-file) so the test ends, failed.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  const bool loaded = load.get();
  EXPECT_TRUE(finished) << "load_file blocked on a FIFO";
  EXPECT_FALSE(loaded);
  EXPECT_NE(warning.find("not a regular file"), std::string::npos) << warning;
  EXPECT_EQ(cache.size(), 0u);

  // Saving never replaces the FIFO either.
  cache.store("key", flash::detail::CacheEntry{"sm80 128x64 4w 2st", 1.0});
  std::string error;
  auto save = std::async(std::launch::async, [&] { return cache.save_file(fifo.string(), header, &error); });
  ASSERT_EQ(save.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "save_file blocked on a FIFO";
  EXPECT_FALSE(save.get());
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  struct stat info {};
  ASSERT_EQ(::stat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
}  // namespace flash::test
