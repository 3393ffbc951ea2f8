// Argument checks of flash::validate and flash::attention_forward. Pure host:
// the pointers are fake (16-byte aligned, 1 TiB apart, never dereferenced), so
// these run on machines without a GPU. Every rejection must come back from
// both entry points with the right code and a message naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "build_config.h"
#include "fake_params.h"
#include "flash/flash.hpp"

// In flash::test: flash's names, and fake_ptr() and valid_params() (a valid
// GQA call on fake pointers) of fake_params.h.
namespace flash::test {
namespace {

const char* code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kSuccess: return "kSuccess";
    case StatusCode::kInvalidArgument: return "kInvalidArgument";
    case StatusCode::kUnsupported: return "kUnsupported";
    case StatusCode::kCudaError: return "kCudaError";
  }
  return "unknown";
}

::testing::AssertionResult has(const char* entry, const Status& s, StatusCode code,
                               std::initializer_list<const char*> words) {
  if (s.code != code) {
    return ::testing::AssertionFailure() << entry << " returned " << code_name(s.code) << " (\"" << s.message
                                         << "\"), expected " << code_name(code);
  }
  for (const char* word : words) {
    if (std::string(s.message).find(word) == std::string::npos) {
      return ::testing::AssertionFailure() << entry << " message \"" << s.message << "\" does not name \"" << word
                                           << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// Both entry points reject `p` with `code`, naming every word. (A rejected
// attention_forward touches no GPU, so this is safe without one.)
::testing::AssertionResult rejected(const AttentionParams& p, StatusCode code,
                                    std::initializer_list<const char*> words) {
  const auto v = has("validate", flash::validate(p), code, words);
  if (!v) return v;
  return has("attention_forward", flash::attention_forward(p, nullptr), code, words);
}

::testing::AssertionResult invalid(const AttentionParams& p, std::initializer_list<const char*> words) {
  return rejected(p, StatusCode::kInvalidArgument, words);
}

TEST(Validate, AcceptsValidCalls) {
  AttentionParams p = valid_params();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  EXPECT_EQ(flash::validate(p).message[0], '\0');

  p.set_contiguous_bhnd();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  p = valid_params();
  p.lse = nullptr;  // LSE is optional
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  p = valid_params();
  p.heads_kv = 1;  // MQA
  p.set_contiguous_bnhd();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  // Every multiple of 8 to 256 (those between the compiled sizes run on the next one).
  for (int64_t head_dim : {8, 32, 40, 64, 80, 96, 112, 128, 160, 192, 224, 256}) {
    p = valid_params();
    p.head_dim = head_dim;
    p.set_contiguous_bnhd();
    EXPECT_TRUE(flash::validate(p).ok()) << "head_dim " << head_dim << ": " << flash::validate(p).message;
  }
  for (Backend backend : {Backend::kAuto, Backend::kSm80, Backend::kSm90, Backend::kDecode}) {
    p = valid_params();
    p.backend = backend;
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  }
  p = valid_params();
  p.seqlen_k = 0;  // valid: every row sees no key
  p.set_contiguous_bnhd();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  p = valid_params();
  p.softmax_scale = 0.25f;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

TEST(Validate, AcceptsOverlappingAndBroadcastInputs) {
  // Q, K and V as views of one packed [B, N, Hq + 2 Hkv, D] buffer.
  AttentionParams p = valid_params();
  p.seqlen_k = p.seqlen_q;
  const int64_t row = (p.heads_q + 2 * p.heads_kv) * p.head_dim;
  p.q = fake_ptr(0);
  p.k = fake_ptr(0, p.heads_q * p.head_dim * 2);
  p.v = fake_ptr(0, (p.heads_q + p.heads_kv) * p.head_dim * 2);
  p.q_seq_stride = p.k_seq_stride = p.v_seq_stride = row;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.seqlen_q * row;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.head_dim;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  // Inputs may broadcast (zero strides); only O must not alias itself.
  p = valid_params();
  p.k_batch_stride = p.k_seq_stride = 0;
  p.v_batch_stride = p.v_seq_stride = 0;
  p.q_batch_stride = 0;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

TEST(Validate, RejectsNullTensors) {
  for (const char* name : {"q", "k", "v", "o"}) {
    AttentionParams p = valid_params();
    if (name[0] == 'q') p.q = nullptr;
    if (name[0] == 'k') p.k = nullptr;
    if (name[0] == 'v') p.v = nullptr;
    if (name[0] == 'o') p.o = nullptr;
    const std::string expected = std::string(name) + " is null";
    EXPECT_TRUE(invalid(p, {expected.c_str()})) << name;
  }
}

TEST(Validate, RejectsBadDtypeAndBackend) {
  AttentionParams p = valid_params();
  p.dtype = static_cast<DType>(7);
  EXPECT_TRUE(invalid(p, {"dtype", "7"}));
  p = valid_params();
  p.backend = static_cast<Backend>(9);
  EXPECT_TRUE(invalid(p, {"backend", "9"}));
  p = valid_params();
  p.backend = static_cast<Backend>(4);  // the first value past kDecode
  EXPECT_TRUE(invalid(p, {"backend", "4"}));
  p = valid_params();
  p.backend = static_cast<Backend>(-1);
  EXPECT_TRUE(invalid(p, {"backend"}));
  p = valid_params();
  p.backend = static_cast<Backend>(3);  // Backend::kDecode
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

TEST(Validate, RejectsUnsupportedHeadDim) {
  for (int64_t head_dim : {4, 12, 81, 100, 264, 520, 576}) {
    AttentionParams p = valid_params();
    p.head_dim = head_dim;
    p.set_contiguous_bnhd();
    const std::string value = std::to_string(head_dim);
    EXPECT_TRUE(invalid(p, {"head_dim", value.c_str(), "a multiple of 8 from 8 to 256"})) << "head_dim " << head_dim;
  }
}

TEST(Validate, TakesAValueHeadDimOfItsOwn) {
  // DeepSeek-V2/V3 prefill: Q K^T over 192 columns, V and O 128 wide.
  AttentionParams p = valid_params();
  p.head_dim = 192;
  p.head_dim_v = 128;
  p.set_contiguous_bnhd();
  EXPECT_EQ(p.q_head_stride, 192);
  EXPECT_EQ(p.k_seq_stride, 2 * 192);
  EXPECT_EQ(p.v_head_stride, 128);
  EXPECT_EQ(p.v_batch_stride, 200 * 2 * 128);
  EXPECT_EQ(p.o_seq_stride, 8 * 128);
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  AttentionParams bhnd = p;
  bhnd.set_contiguous_bhnd();
  EXPECT_EQ(bhnd.v_head_stride, 200 * 128);
  EXPECT_EQ(bhnd.o_batch_stride, 8 * 100 * 128);
  EXPECT_EQ(bhnd.k_head_stride, 200 * 192);
  EXPECT_TRUE(flash::validate(bhnd).ok()) << flash::validate(bhnd).message;

  // V ends, and O may start, head_dim_v columns into V's last row: its
  // extent is measured at V's width, not Q K^T's.
  const int64_t v_bytes = 2 * 200 * 2 * 128 * 2;
  AttentionParams after_v = p;
  after_v.o = fake_ptr(2, v_bytes);
  EXPECT_TRUE(flash::validate(after_v).ok()) << flash::validate(after_v).message;
  after_v.o = fake_ptr(2, v_bytes - 16);
  EXPECT_TRUE(invalid(after_v, {"o overlaps v"}));

  // Wider V than Q K^T is a call too; 0 is head_dim.
  p.head_dim = 64;
  p.head_dim_v = 128;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  p.head_dim_v = 0;
  p.set_contiguous_bnhd();
  EXPECT_EQ(p.v_head_stride, 64);
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  for (int64_t dv : {4, 12, 100, 264}) {
    AttentionParams bad = valid_params();
    bad.head_dim_v = dv;
    bad.set_contiguous_bnhd();
    const std::string value = std::to_string(dv);
    EXPECT_TRUE(invalid(bad, {"head_dim_v", value.c_str(), "a multiple of 8 from 8 to 256"})) << "head_dim_v " << dv;
  }
  AttentionParams negative = valid_params();
  negative.head_dim_v = -8;
  EXPECT_TRUE(invalid(negative, {"head_dim_v", "-8", ">= 0"}));
}

// A valid append call: valid_params() on a cache of 200 keys with
// seqused_k, one new row per sequence, NeoX rotary over 64 columns, and a
// workspace.
AttentionParams append_params() {
  AttentionParams p = valid_params();
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(5));
  p.k_new = fake_ptr(6);
  p.v_new = fake_ptr(7);
  p.seqlen_new = 1;
  p.k_new_head_stride = p.v_new_head_stride = 128;
  p.k_new_seq_stride = p.v_new_seq_stride = 2 * 128;
  p.k_new_batch_stride = p.v_new_batch_stride = 2 * 128;
  p.rotary_cos = static_cast<const float*>(fake_ptr(9));
  p.rotary_sin = static_cast<const float*>(fake_ptr(10));
  p.rotary_dim = 64;
  p.rotary_positions = 4096;
  p.workspace = fake_ptr(8);
  p.workspace_bytes = size_t{1} << 30;
  return p;
}

TEST(Validate, ChecksAppendAndRotary) {
  EXPECT_TRUE(flash::validate(append_params()).ok()) << flash::validate(append_params()).message;
  {
    // set_contiguous_bnhd fills k_new's and v_new's strides from seqlen_new.
    AttentionParams p = append_params();
    p.seqlen_new = 3;
    p.k_new_head_stride = p.k_new_seq_stride = p.k_new_batch_stride = 0;
    p.set_contiguous_bnhd();
    EXPECT_EQ(p.k_new_batch_stride, 3 * 2 * 128);
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  }
  {
    AttentionParams p = append_params();
    p.rotary_cos = p.rotary_sin = nullptr;
    p.rotary_dim = 0;
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
    p.cu_seqlens_k_new = static_cast<const int32_t*>(fake_ptr(11));
    p.k_new_batch_stride = 12345;  // ignored with packed new rows
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  }
  struct Bad {
    const char* what;
    void (*breaks)(AttentionParams&);
    const char* word;
  };
  const Bad cases[] = {
      {"v_new null", [](AttentionParams& p) { p.v_new = nullptr; }, "k_new and v_new must both be set"},
      {"no seqused_k", [](AttentionParams& p) { p.seqused_k = nullptr; }, "k_new needs seqused_k"},
      {"cu_seqlens_k", [](AttentionParams& p) { p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(11)); },
       "cu_seqlens_k is not allowed"},
      {"seqlen_new < 0", [](AttentionParams& p) { p.seqlen_new = -1; }, "seqlen_new is -1"},
      {"k_new misaligned", [](AttentionParams& p) { p.k_new = fake_ptr(6, 8); }, "k_new"},
      {"v_new stride", [](AttentionParams& p) { p.v_new_seq_stride = 100; }, "v_new_seq_stride"},
      {"odd rotary_dim", [](AttentionParams& p) { p.rotary_dim = 63; }, "rotary_dim is 63"},
      {"rotary_dim > head_dim", [](AttentionParams& p) { p.rotary_dim = 130; }, "rotary_dim is 130"},
      {"sin null", [](AttentionParams& p) { p.rotary_sin = nullptr; }, "rotary_cos and rotary_sin"},
      {"no positions", [](AttentionParams& p) { p.rotary_positions = 0; }, "rotary_positions"},
      {"rotary_dim without tables",
       [](AttentionParams& p) {
         p.rotary_cos = p.rotary_sin = nullptr;
       },
       "rotary_dim is set"},
      {"rotary without k_new",
       [](AttentionParams& p) {
         p.k_new = p.v_new = nullptr;
       },
       "need k_new and v_new"},
      {"seqlen_new without k_new",
       [](AttentionParams& p) {
         p.k_new = p.v_new = nullptr;
         p.rotary_cos = p.rotary_sin = nullptr;
         p.rotary_dim = 0;
       },
       "seqlen_new and cu_seqlens_k_new need k_new"},
      {"no workspace", [](AttentionParams& p) { p.workspace = nullptr; }, "k_new needs a workspace"},
      {"small workspace", [](AttentionParams& p) { p.workspace_bytes = 256; }, "the rotated Q"},
      {"varlen Q without total_q",
       [](AttentionParams& p) {
         p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(11));
         p.q_batch_stride = p.o_batch_stride = 0;
       },
       "needs total_q"},
      {"k_new inside the cache", [](AttentionParams& p) { p.k_new = fake_ptr(1, 1024); }, "k_new overlaps k"},
      {"seqused_k inside V", [](AttentionParams& p) { p.seqused_k = static_cast<const int32_t*>(fake_ptr(2, 64)); },
       "seqused_k overlaps v"},
      {"no query rows", [](AttentionParams& p) { p.seqlen_q = 0; }, "k_new with seqlen_q 0"},
      {"k_new head stride 0", [](AttentionParams& p) { p.k_new_head_stride = 0; }, "k_new_head_stride is 0"},
      {"v_new batch stride 0", [](AttentionParams& p) { p.v_new_batch_stride = 0; }, "v_new_batch_stride is 0"},
      {"q inside the cache", [](AttentionParams& p) { p.q = fake_ptr(1, 4096); }, "q overlaps k"},
      {"k_new inside the workspace", [](AttentionParams& p) { p.k_new = fake_ptr(8, 4096); },
       "k_new overlaps workspace"},
      {"rotary_cos inside the workspace",
       [](AttentionParams& p) { p.rotary_cos = static_cast<const float*>(fake_ptr(8, 1024)); },
       "rotary_cos overlaps workspace"},
      // The append writes each new row into K and into V.
      {"v is k", [](AttentionParams& p) { p.v = p.k; }, "rows may share memory"},
      {"v one row into k", [](AttentionParams& p) { p.v = fake_ptr(1, 256 * 2); }, "rows may share memory"},
      {"k heads on one row", [](AttentionParams& p) { p.k_head_stride = 0; }, "k strides make different cache rows"},
      {"v sequences on one row", [](AttentionParams& p) { p.v_batch_stride = 0; },
       "v strides make different cache rows"},
      // The decode kernel may write O and the LSE while the append reads.
      {"lse in k_new", [](AttentionParams& p) { p.lse = static_cast<float*>(fake_ptr(6)); }, "lse overlaps k_new"},
      {"lse in rotary_sin", [](AttentionParams& p) { p.lse = static_cast<float*>(fake_ptr(10, 64)); },
       "lse overlaps rotary_sin"},
      {"o on rotary_cos", [](AttentionParams& p) { p.o = fake_ptr(9); }, "o overlaps rotary_cos"},
      {"cu_seqlens_k_new in o",
       [](AttentionParams& p) { p.cu_seqlens_k_new = static_cast<const int32_t*>(fake_ptr(3, 4096)); },
       "o overlaps cu_seqlens_k_new"},
  };
  for (const Bad& c : cases) {
    AttentionParams p = append_params();
    c.breaks(p);
    EXPECT_TRUE(invalid(p, {c.word})) << c.what;
  }
}

// K and V in one allocation, interleaved with the same strides, may take
// an append; rows that share bytes may not. A brute-force model of the
// written elements decides each random layout.
TEST(Validate, AppendTakesInterleavedKvRowsThatDoNotMeet) {
  {
    AttentionParams p = append_params();  // [B, N, 2, Hkv, D]: K's heads, then V's
    p.v = fake_ptr(1, 2 * 128 * 2);
    p.k_seq_stride = p.v_seq_stride = 2 * 2 * 128;
    p.k_batch_stride = p.v_batch_stride = 200 * p.k_seq_stride;
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
    p.k_head_stride = p.v_head_stride = 2 * 128;  // [B, N, Hkv, 2, D]: each head's K then V
    p.v = fake_ptr(1, 128 * 2);
    EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
    p.v = fake_ptr(1, 64 * 2);  // V half a row in: its rows run into the next K row
    EXPECT_TRUE(invalid(p, {"rows may share memory"}));
    p.v = fake_ptr(1, 128 * 2);
    p.v_batch_stride += 8;  // strides of their own whose extents meet: not decided, refused
    EXPECT_TRUE(invalid(p, {"rows may share memory"}));
  }
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&](int64_t n) {  // uniform in [0, n)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(n));
  };
  int checked = 0, overlapping = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    AttentionParams p = append_params();
    p.batch = 1 + next(2);
    p.seqlen_k = 1 + next(4);
    p.heads_kv = int64_t{1} << next(3);
    p.head_dim = 8 * (1 + next(4));
    p.rotary_dim = 0;
    p.rotary_cos = p.rotary_sin = nullptr;
    p.set_contiguous_bnhd();
    p.k_new_head_stride = p.v_new_head_stride = p.head_dim;
    p.k_new_seq_stride = p.v_new_seq_stride = p.heads_kv * p.head_dim;
    p.k_new_batch_stride = p.v_new_batch_stride = p.heads_kv * p.head_dim;
    const int64_t stride[3] = {8 * next(40), 8 * next(12), 8 * next(6)};  // batch, seq, head (elements)
    p.k_batch_stride = p.v_batch_stride = stride[0];
    p.k_seq_stride = p.v_seq_stride = stride[1];
    p.k_head_stride = p.v_head_stride = stride[2];
    const int64_t shift = 8 * (next(80) - 40);  // V's start from K's, elements
    p.k = fake_ptr(1, 1 << 20);
    p.v = fake_ptr(1, (1 << 20) + 2 * shift);
    // The elements each writes, and whether any repeat.
    const int64_t size[3] = {p.batch, p.seqlen_k, p.heads_kv};
    std::vector<int64_t> k_elems, v_elems;
    for (int64_t b = 0; b < size[0]; ++b) {
      for (int64_t n = 0; n < size[1]; ++n) {
        for (int64_t h = 0; h < size[2]; ++h) {
          for (int64_t c = 0; c < p.head_dim; ++c) {
            const int64_t e = b * stride[0] + n * stride[1] + h * stride[2] + c;
            k_elems.push_back(e);
            v_elems.push_back(e + shift);
          }
        }
      }
    }
    std::sort(k_elems.begin(), k_elems.end());
    std::sort(v_elems.begin(), v_elems.end());
    // The rule for rows written (as for O): sorted by stride, each
    // dimension steps past all the smaller ones cover. It implies distinct
    // rows; layouts outside it are refused even where rows would not meet.
    int order[3] = {0, 1, 2};
    std::sort(order, order + 3, [&](int a, int b) { return stride[a] < stride[b]; });
    bool nested = true;
    int64_t extent = p.head_dim;
    for (const int x : order) {
      if (size[x] <= 1) continue;
      nested = nested && stride[x] >= extent;
      extent += stride[x] * (size[x] - 1);
    }
    if (!nested) {
      EXPECT_TRUE(invalid(p, {"k strides make different cache rows"})) << "trial " << trial;
      continue;
    }
    ASSERT_EQ(std::adjacent_find(k_elems.begin(), k_elems.end()), k_elems.end()) << "trial " << trial;
    std::vector<int64_t> both;
    std::set_intersection(k_elems.begin(), k_elems.end(), v_elems.begin(), v_elems.end(), std::back_inserter(both));
    const Status s = flash::validate(p);
    ++checked;
    if (!both.empty()) {
      ++overlapping;
      EXPECT_TRUE(invalid(p, {"rows may share memory"})) << "trial " << trial << ": V shares " << both.size()
                                                    << " elements with K";
    } else {
      EXPECT_TRUE(s.ok()) << "trial " << trial << ": " << s.message;
    }
  }
  // Both outcomes occur often enough to matter.
  EXPECT_GT(overlapping, 100);
  EXPECT_GT(checked - overlapping, 100);
}

TEST(Validate, EmptyCallsRunNothingAndQuerySaysSo) {
  // attention_forward returns at once for an empty call, on any device (or
  // none, here); query_kernel_choice answers the same.
  for (const bool empty_batch : {true, false}) {
    AttentionParams p = valid_params();
    (empty_batch ? p.batch : p.seqlen_q) = 0;
    p.backend = Backend::kSm90;  // refused on a device without it, were anything to run
    EXPECT_TRUE(flash::attention_forward(p, nullptr).ok());
    KernelChoice choice;
    const Status s = flash::query_kernel_choice(p, &choice);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_STREQ(choice.name, "none (empty call)");
  }
}

TEST(Validate, RejectsHeadCounts) {
  AttentionParams p = valid_params();
  p.heads_q = 6;
  p.heads_kv = 4;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(invalid(p, {"heads_q", "heads_kv", "multiple"}));

  p = valid_params();
  p.heads_q = 0;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(invalid(p, {"heads_q"}));
  p = valid_params();
  p.heads_kv = 0;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(invalid(p, {"heads_kv"}));
}

TEST(Validate, RejectsEachNegativeSize) {
  const struct {
    const char* name;
    int64_t AttentionParams::*field;
  } sizes[] = {{"batch", &AttentionParams::batch},       {"seqlen_q", &AttentionParams::seqlen_q},
               {"seqlen_k", &AttentionParams::seqlen_k}, {"heads_q", &AttentionParams::heads_q},
               {"heads_kv", &AttentionParams::heads_kv}, {"head_dim", &AttentionParams::head_dim}};
  for (const auto& size : sizes) {
    AttentionParams p = valid_params();
    p.*size.field = -1;
    const std::string expected = std::string(size.name) + " is -1";
    EXPECT_TRUE(invalid(p, {expected.c_str()})) << size.name;
  }
}

TEST(Validate, RejectsNonContiguousLastDim) {
  int64_t AttentionParams::*const dim_strides[] = {&AttentionParams::q_dim_stride, &AttentionParams::k_dim_stride,
                                                   &AttentionParams::v_dim_stride, &AttentionParams::o_dim_stride};
  for (auto field : dim_strides) {
    for (int64_t stride : {0, 2, -1}) {
      AttentionParams p = valid_params();
      p.*field = stride;
      EXPECT_TRUE(invalid(p, {"dim_stride", "must be 1"})) << "stride " << stride;
    }
  }
}

TEST(Validate, RejectsMisalignedPointers) {
  // One element (2 bytes) past a 16-byte boundary.
  for (const char* name : {"q", "k", "v", "o"}) {
    AttentionParams p = valid_params();
    if (name[0] == 'q') p.q = fake_ptr(0, 2);
    if (name[0] == 'k') p.k = fake_ptr(1, 2);
    if (name[0] == 'v') p.v = fake_ptr(2, 2);
    if (name[0] == 'o') p.o = fake_ptr(3, 2);
    const std::string expected = std::string(name) + " (";
    EXPECT_TRUE(invalid(p, {expected.c_str(), "16-byte aligned"})) << name;
  }
  AttentionParams p = valid_params();
  p.lse = static_cast<float*>(fake_ptr(4, 2));
  EXPECT_TRUE(invalid(p, {"lse", "4-byte aligned"}));
  p = valid_params();
  p.sinks = static_cast<const float*>(fake_ptr(10, 2));
  EXPECT_TRUE(invalid(p, {"sinks", "4-byte aligned"}));
  p.sinks = static_cast<const float*>(fake_ptr(10, 4));
  EXPECT_TRUE(validate(p).ok()) << validate(p).message;
  p.alibi_slopes = static_cast<const float*>(fake_ptr(11, 2));
  EXPECT_TRUE(invalid(p, {"alibi_slopes", "4-byte aligned"}));
  p.alibi_slopes = static_cast<const float*>(fake_ptr(11, 4));
  EXPECT_TRUE(validate(p).ok()) << validate(p).message;
  p.softmax_scale = 1e-35f;  // 1 / scale, ALiBi's factor, would overflow
  EXPECT_TRUE(invalid(p, {"softmax_scale", "alibi_slopes"}));
  p.alibi_slopes = nullptr;
  EXPECT_TRUE(validate(p).ok()) << validate(p).message;
}

struct StrideField {
  const char* name;
  int64_t AttentionParams::*field;
};
const StrideField kStrides[] = {
    {"q_batch_stride", &AttentionParams::q_batch_stride}, {"q_seq_stride", &AttentionParams::q_seq_stride},
    {"q_head_stride", &AttentionParams::q_head_stride},   {"k_batch_stride", &AttentionParams::k_batch_stride},
    {"k_seq_stride", &AttentionParams::k_seq_stride},     {"k_head_stride", &AttentionParams::k_head_stride},
    {"v_batch_stride", &AttentionParams::v_batch_stride}, {"v_seq_stride", &AttentionParams::v_seq_stride},
    {"v_head_stride", &AttentionParams::v_head_stride},   {"o_batch_stride", &AttentionParams::o_batch_stride},
    {"o_seq_stride", &AttentionParams::o_seq_stride},     {"o_head_stride", &AttentionParams::o_head_stride},
};

TEST(Validate, RejectsStridesNotMultipleOf8) {
  for (const auto& s : kStrides) {
    AttentionParams p = valid_params();
    p.*s.field += 4;
    const std::string value = std::to_string(p.*s.field);
    EXPECT_TRUE(invalid(p, {s.name, value.c_str(), "multiples of 8"})) << s.name;
  }
}

TEST(Validate, RejectsNegativeStrides) {
  for (const auto& s : kStrides) {
    AttentionParams p = valid_params();
    p.*s.field = -(p.*s.field);
    EXPECT_TRUE(invalid(p, {s.name, ">= 0"})) << s.name;
  }
}

TEST(Validate, RejectsOffsetsOverflowingInt64) {
  const int64_t huge = std::numeric_limits<int64_t>::max() / 16 * 8;  // a multiple of 8, ~2^62
  for (const auto& s : kStrides) {
    AttentionParams p = valid_params();
    p.*s.field = huge;
    const std::string tensor = std::string(1, s.name[0]) + ":";
    EXPECT_TRUE(invalid(p, {tensor.c_str(), "overflow"})) << s.name;
  }
  // Each product fits, the sum does not.
  AttentionParams p = valid_params();
  p.batch = 3;
  p.k_batch_stride = int64_t{1} << 61;
  p.k_seq_stride = int64_t{1} << 55;
  EXPECT_TRUE(invalid(p, {"k:", "overflow"}));
}

TEST(Validate, RejectsOutputOverlappingInputs) {
  AttentionParams p = valid_params();
  p.o = fake_ptr(0, 1024 * 2);  // inside Q
  EXPECT_TRUE(invalid(p, {"o overlaps q"}));
  p = valid_params();
  p.o = const_cast<void*>(p.k);
  EXPECT_TRUE(invalid(p, {"o overlaps k"}));
  p = valid_params();
  p.o = fake_ptr(2, -16);  // O's first rows fine, its tail runs into V
  EXPECT_TRUE(invalid(p, {"o overlaps v"}));
}

TEST(Validate, RejectsLseOverlappingTensors) {
  AttentionParams p = valid_params();
  p.lse = static_cast<float*>(p.o);
  EXPECT_TRUE(invalid(p, {"lse overlaps o"}));
  p = valid_params();
  p.lse = static_cast<float*>(fake_ptr(1, 4096));
  EXPECT_TRUE(invalid(p, {"lse overlaps k"}));
  p = valid_params();
  p.lse = static_cast<float*>(fake_ptr(3, -4));  // last LSE element is O's first
  EXPECT_TRUE(invalid(p, {"lse overlaps o"}));
}

// A negative scale is rejected: the online softmax's running max of raw
// scores is the max of the scaled ones only for a positive scale.
TEST(Validate, RejectsNonFiniteOrNegativeSoftmaxScale) {
  for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), -0.125f, -std::numeric_limits<float>::min()}) {
    AttentionParams p = valid_params();
    p.softmax_scale = scale;
    EXPECT_TRUE(invalid(p, {"softmax_scale"})) << scale;
  }
}

TEST(Validate, RejectsOutputRowsThatAlias) {
  AttentionParams p = valid_params();
  p.o_seq_stride = 0;  // every query row onto the first
  EXPECT_TRUE(invalid(p, {"o strides", "overlap"}));
  p = valid_params();
  p.o_head_stride = p.head_dim / 2;  // heads overlap by half a row
  EXPECT_TRUE(invalid(p, {"o strides", "overlap"}));
  p = valid_params();
  p.o_batch_stride = p.o_seq_stride;  // batch b, row i+1 == batch b+1, row i
  EXPECT_TRUE(invalid(p, {"o strides", "overlap"}));
  // A zero stride over a size-1 dimension aliases nothing.
  p = valid_params();
  p.batch = 1;
  p.o_batch_stride = 0;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
}

TEST(Validate, ReportsUnsupportedLimits) {
  AttentionParams p = valid_params();
  p.seqlen_q = (int64_t{1} << 30) + 1;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"seqlen_q"}));
  p = valid_params();
  p.seqlen_k = (int64_t{1} << 30) + 1;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"seqlen_k"}));
  p = valid_params();
  p.batch = 70000;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"batch"}));
  p = valid_params();
  p.heads_q = 70000;
  p.heads_kv = 1;
  p.set_contiguous_bnhd();
  EXPECT_TRUE(rejected(p, StatusCode::kUnsupported, {"heads_q"}));
}

// Empty work touches no memory and needs no GPU: success even with null pointers.
TEST(Validate, EmptyWorkSucceedsWithoutGpu) {
  AttentionParams p = valid_params();
  p.batch = 0;
  p.q = p.k = p.v = nullptr;
  p.o = nullptr;
  p.lse = nullptr;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  Status s = flash::attention_forward(p, nullptr);
  EXPECT_TRUE(s.ok()) << s.message;

  p = valid_params();
  p.seqlen_q = 0;
  p.set_contiguous_bnhd();
  p.q = p.o = nullptr;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  s = flash::attention_forward(p, nullptr);
  EXPECT_TRUE(s.ok()) << s.message;
}

// ---------------------------------------------------------------- inference-engine features

// valid_params() with K and V as a paged cache: [num_pages, page_size,
// heads_kv, head_dim], 13 pages of 16 keys per sequence (208 >= seqlen_k 200).
AttentionParams paged_params() {
  AttentionParams p = valid_params();
  p.block_table = static_cast<const int32_t*>(fake_ptr(5));
  p.page_size = 16;
  p.max_pages_per_seq = 13;
  p.block_table_batch_stride = 13;
  p.num_pages = 26;
  p.k_seq_stride = p.v_seq_stride = p.heads_kv * p.head_dim;
  p.k_batch_stride = p.v_batch_stride = p.page_size * p.k_seq_stride;
  return p;
}

// A valid call is accepted by validate() (attention_forward needs a GPU).
::testing::AssertionResult valid(const AttentionParams& p) {
  const Status s = flash::validate(p);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "validate rejected a valid call: " << s.message;
}

TEST(Validate, AcceptsFeatureCalls) {
  AttentionParams p = valid_params();
  p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(6));  // varlen Q
  EXPECT_TRUE(valid(p));
  p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(7));  // and varlen K
  EXPECT_TRUE(valid(p));
  p.cu_seqlens_q = nullptr;  // varlen K alone
  EXPECT_TRUE(valid(p));

  p = valid_params();
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));  // dense cache with seqused_k
  EXPECT_TRUE(valid(p));

  p = paged_params();
  EXPECT_TRUE(valid(p));
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));
  EXPECT_TRUE(valid(p));
  p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(6));  // chunked prefill over a paged cache
  EXPECT_TRUE(valid(p));
  for (int64_t page_size : {1, 8, 15, 16, 24, 40, 48, 64, 256}) {
    p = paged_params();
    p.page_size = page_size;
    p.max_pages_per_seq = (p.seqlen_k + page_size - 1) / page_size;
    p.block_table_batch_stride = p.max_pages_per_seq + 3;  // a padded table row is fine
    p.k_batch_stride = p.v_batch_stride = page_size * p.k_seq_stride;
    EXPECT_TRUE(valid(p)) << "page_size " << page_size;
  }
  // seqlen_k exactly max_pages_per_seq * page_size.
  p = paged_params();
  p.max_pages_per_seq = p.block_table_batch_stride = 25;
  p.page_size = 16;
  p.seqlen_k = 400;
  EXPECT_TRUE(valid(p));
  // One sequence: the table's batch stride is never used (the check is for batch > 1).
  p = paged_params();
  p.batch = 1;
  p.block_table_batch_stride = 0;
  EXPECT_TRUE(valid(p));

  for (auto [left, right] : {std::pair<int64_t, int64_t>{128, 0}, {0, 0}, {64, 64}, {-1, 32}, {5, -1}, {-1, -1}}) {
    p = valid_params();
    p.window_left = left;
    p.window_right = right;
    EXPECT_TRUE(valid(p)) << "window (" << left << ", " << right << ")";
  }
  for (auto [left, right] : {std::pair<int64_t, int64_t>{-1, -1}, {-1, 0}, {128, -1}, {128, 0}, {0, 0}}) {
    p = valid_params();
    p.causal = true;
    p.window_left = left;
    p.window_right = right;
    EXPECT_TRUE(valid(p)) << "causal with window (" << left << ", " << right << ")";
  }
  for (float softcap : {0.f, 5.f, 30.f, 1e-3f}) {
    p = valid_params();
    p.softcap = softcap;
    EXPECT_TRUE(valid(p)) << "softcap " << softcap;
  }
  // A split's workspace is sized for a kernel of the call's head dim
  // (128: D + 1 = 129 floats a row); a build without one sizes none.
  for (int32_t num_splits : {0, 1, 2, 7, 128}) {
    if (!head_dim_compiled(128)) break;
    p = valid_params();
    p.num_splits = num_splits;
    if (num_splits > 1) {  // a requested split needs its workspace: splits * B * Hq * Sq * (D + 1) * 4 bytes
      p.workspace = fake_ptr(9);
      p.workspace_bytes = static_cast<size_t>(num_splits) * 2 * 8 * 100 * 129 * 4;
    }
    EXPECT_TRUE(valid(p)) << "num_splits " << num_splits;
  }
  p = valid_params();
  p.workspace = fake_ptr(9);
  p.workspace_bytes = 1 << 20;
  EXPECT_TRUE(valid(p));
  p.workspace = fake_ptr(9, 256);  // 256-byte aligned is enough
  EXPECT_TRUE(valid(p));
  if (head_dim_compiled(p.head_dim)) {
    p.num_splits = 7;
    p.workspace_bytes = size_t{7} * 2 * 8 * 100 * 129 * 4;
    EXPECT_TRUE(valid(p));
    p.workspace_bytes -= 1;  // one byte short
    EXPECT_TRUE(invalid(p, {"num_splits", "workspace"}));
    p.workspace = nullptr;
    EXPECT_TRUE(invalid(p, {"num_splits", "workspace"}));
  }

  // Everything at once.
  p = paged_params();
  p.backend = Backend::kDecode;
  p.seqlen_q = 16;
  p.set_contiguous_bnhd();
  p.k_seq_stride = p.v_seq_stride = p.heads_kv * p.head_dim;
  p.k_batch_stride = p.v_batch_stride = p.page_size * p.k_seq_stride;
  p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(6));
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));
  p.causal = true;
  p.window_left = 128;
  p.softcap = 30.f;
  p.num_splits = 7;
  p.workspace = fake_ptr(9);
  p.workspace_bytes = size_t{1} << 30;
  EXPECT_TRUE(valid(p));
}

TEST(Validate, RejectsCuSeqlensKWithBlockTable) {
  AttentionParams p = paged_params();
  p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(7));
  EXPECT_TRUE(invalid(p, {"cu_seqlens_k", "block_table"}));
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));
  EXPECT_TRUE(invalid(p, {"cu_seqlens_k", "block_table"}));
}

TEST(Validate, RejectsPageSizeBelowOne) {
  for (int64_t page_size : {0, -1, -16}) {
    AttentionParams p = paged_params();
    p.page_size = page_size;
    p.max_pages_per_seq = p.block_table_batch_stride = 256;
    p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));  // so seqlen_k cannot be what fails
    EXPECT_TRUE(invalid(p, {"page_size"})) << "page_size " << page_size;
  }
  AttentionParams p = paged_params();
  p.page_size = 48;  // not a power of two
  p.max_pages_per_seq = p.block_table_batch_stride = 5;
  EXPECT_TRUE(valid(p));
}

TEST(Validate, RejectsMaxPagesPerSeqBelowOne) {
  for (int64_t max_pages : {0, -1}) {
    AttentionParams p = paged_params();
    p.max_pages_per_seq = max_pages;
    p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));  // so seqlen_k is not what fails
    EXPECT_TRUE(invalid(p, {"max_pages_per_seq"})) << "max_pages_per_seq " << max_pages;
  }
}

TEST(Validate, RejectsBlockTableBatchStrideBelowMaxPages) {
  AttentionParams p = paged_params();  // batch 2
  p.block_table_batch_stride = p.max_pages_per_seq - 1;
  EXPECT_TRUE(invalid(p, {"block_table_batch_stride"}));
  p.block_table_batch_stride = 0;
  EXPECT_TRUE(invalid(p, {"block_table_batch_stride"}));
}

TEST(Validate, RejectsSeqlenKBeyondTheBlockTable) {
  AttentionParams p = paged_params();
  p.max_pages_per_seq = p.block_table_batch_stride = 12;  // 192 keys < seqlen_k 200
  EXPECT_TRUE(invalid(p, {"seqlen_k"}));
  p.seqlen_k = 192;
  EXPECT_TRUE(valid(p));
}

TEST(Validate, RejectsNumPagesBelowOne) {
  for (int64_t num_pages : {0, -3}) {
    AttentionParams p = paged_params();
    p.num_pages = num_pages;
    EXPECT_TRUE(invalid(p, {"num_pages"})) << "num_pages " << num_pages;
  }
}

TEST(Validate, RejectsBadWindows) {
  for (int64_t bad : {-2, -100}) {
    AttentionParams p = valid_params();
    p.window_left = bad;
    EXPECT_TRUE(invalid(p, {"window_left"})) << bad;
    p = valid_params();
    p.window_right = bad;
    EXPECT_TRUE(invalid(p, {"window_right"})) << bad;
  }
  for (int64_t right : {1, 5, 128}) {
    AttentionParams p = valid_params();
    p.causal = true;
    p.window_right = right;
    EXPECT_TRUE(invalid(p, {"window_right"})) << "causal with window_right " << right;
  }
}

TEST(Validate, RejectsNonFiniteOrNegativeSoftcap) {
  for (float softcap : {-1.f, -std::numeric_limits<float>::min(), std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    AttentionParams p = valid_params();
    p.softcap = softcap;
    EXPECT_TRUE(invalid(p, {"softcap"})) << softcap;
  }
}

TEST(Validate, RejectsNumSplitsOutOfRange) {
  for (int32_t num_splits : {-1, 129, 1000, std::numeric_limits<int32_t>::min()}) {
    AttentionParams p = valid_params();
    p.num_splits = num_splits;
    EXPECT_TRUE(invalid(p, {"num_splits"})) << num_splits;
    size_t bytes = 0;
    EXPECT_EQ(flash::attention_workspace_size(p, &bytes).code, StatusCode::kInvalidArgument) << num_splits;
  }
}

// validate() cannot know the device, so it checks the workspace's alignment
// only; its size is attention_forward's business (tested on a GPU).
TEST(Validate, RejectsMisalignedWorkspace) {
  for (int64_t offset : {8, 16, 128, 255}) {
    AttentionParams p = valid_params();
    p.workspace = fake_ptr(9, offset);
    p.workspace_bytes = 1 << 20;
    p.num_splits = 7;
    EXPECT_TRUE(invalid(p, {"workspace"})) << "offset " << offset;
  }
}

TEST(Validate, WorkspaceSizeNeedsAnOutput) {
  EXPECT_EQ(flash::attention_workspace_size(valid_params(), nullptr).code, StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- total_q / total_k

// valid_params() as a varlen call: three sequences packed in Q/O (300 rows,
// the longest 100 = seqlen_q) and in K/V (450 rows, the longest 200 =
// seqlen_k), with total_q and total_k given.
AttentionParams varlen_params() {
  AttentionParams p = valid_params();
  p.batch = 3;
  p.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(6));
  p.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(7));
  p.total_q = 300;
  p.total_k = 450;
  return p;
}

// Bytes of `rows` packed rows of Q/O (8 heads) and of K/V (2 heads) of valid_params().
constexpr int64_t kQRowBytes = 8 * 128 * 2;
constexpr int64_t kKRowBytes = 2 * 128 * 2;

TEST(Validate, AcceptsVarlenTotals) {
  AttentionParams p = varlen_params();
  EXPECT_TRUE(valid(p));
  for (Backend backend : {Backend::kAuto, Backend::kSm80, Backend::kSm90, Backend::kDecode}) {
    p.backend = backend;
    EXPECT_TRUE(valid(p)) << "backend " << static_cast<int>(backend);
  }
  p = varlen_params();
  p.total_k = 0;  // total_q alone
  EXPECT_TRUE(valid(p));
  p = varlen_params();
  p.total_q = 0;  // total_k alone
  EXPECT_TRUE(valid(p));
  p.total_k = 0;  // neither (0: not given)
  EXPECT_TRUE(valid(p));

  p = varlen_params();  // varlen Q over a dense K/V
  p.cu_seqlens_k = nullptr;
  p.total_k = 0;
  EXPECT_TRUE(valid(p));
  p.seqused_k = static_cast<const int32_t*>(fake_ptr(8));  // ... a dense cache with seqused_k
  EXPECT_TRUE(valid(p));
  p = varlen_params();  // dense Q over packed K/V
  p.batch = 2;
  p.cu_seqlens_q = nullptr;
  p.total_q = 0;
  EXPECT_TRUE(valid(p));
  p = varlen_params();  // causal
  p.causal = true;
  EXPECT_TRUE(valid(p));

  // Totals far beyond batch * max_seqlen are fine for validate (it cannot
  // read cu_seqlens; exactness is the caller's contract).
  p = varlen_params();
  p.total_q = int64_t{1} << 24;
  p.total_k = int64_t{1} << 25;
  EXPECT_TRUE(valid(p));

  // O right after Q's total_q rows, in the same allocation: no overlap.
  p = varlen_params();
  p.o = fake_ptr(0, p.total_q * kQRowBytes);
  EXPECT_TRUE(valid(p));
  // O right after K's total_k rows: no overlap either.
  p = varlen_params();
  p.o = fake_ptr(1, p.total_k * kKRowBytes);
  EXPECT_TRUE(valid(p));
  // K and V adjacent in one allocation (inputs may share memory anyway).
  p = varlen_params();
  p.v = fake_ptr(1, p.total_k * kKRowBytes);
  EXPECT_TRUE(valid(p));
  // Padded strides over packed rows.
  p = varlen_params();
  p.q_head_stride = p.o_head_stride = 136;
  p.q_seq_stride = p.o_seq_stride = 8 * 136 + 8;
  p.k_head_stride = p.v_head_stride = 136;
  p.k_seq_stride = p.v_seq_stride = 2 * 136 + 8;
  EXPECT_TRUE(valid(p));
}

TEST(Validate, RejectsNegativeTotals) {
  for (int64_t bad : {int64_t{-1}, int64_t{-300}, std::numeric_limits<int64_t>::min()}) {
    AttentionParams p = varlen_params();
    p.total_q = bad;
    EXPECT_TRUE(invalid(p, {"total_q", ">= 0"})) << "total_q " << bad;
    p = varlen_params();
    p.total_k = bad;
    EXPECT_TRUE(invalid(p, {"total_k", ">= 0"})) << "total_k " << bad;
    // Also on a call that is not varlen: the fields are checked whatever the layout.
    p = valid_params();
    p.total_q = bad;
    EXPECT_TRUE(invalid(p, {"total_q"})) << "dense call, total_q " << bad;
    p = valid_params();
    p.total_k = bad;
    EXPECT_TRUE(invalid(p, {"total_k"})) << "dense call, total_k " << bad;
  }
}

// With total_q / total_k given, validate knows the packed tensors' full
// extent, so an O that runs into the packed rows past the first seqlen_q
// (max_seqlen_q) rows of Q, or past the first seqlen_k rows of K, is caught.
TEST(Validate, RejectsVarlenOutputOverlappingInputsGivenTotals) {
  // O starts right after Q's first seqlen_q rows: inside Q's 300 rows.
  AttentionParams p = varlen_params();
  p.o = fake_ptr(0, p.seqlen_q * kQRowBytes);
  EXPECT_TRUE(invalid(p, {"o overlaps q"}));
  p.total_q = 0;  // the premise: without total_q only seqlen_q rows are known
  EXPECT_TRUE(valid(p));

  // O's first row on Q's last row; then O right after it (valid).
  p = varlen_params();
  p.o = fake_ptr(0, (p.total_q - 1) * kQRowBytes);
  EXPECT_TRUE(invalid(p, {"o overlaps q"}));
  p.o = fake_ptr(0, p.total_q * kQRowBytes);
  EXPECT_TRUE(valid(p));

  // O placed just before V: its total_q rows run into V (its first
  // seqlen_q rows would not).
  p = varlen_params();
  p.o = fake_ptr(2, -150 * kQRowBytes);
  EXPECT_TRUE(invalid(p, {"o overlaps v"}));
  p.total_q = 0;
  EXPECT_TRUE(valid(p));

  // O starts right after K's first seqlen_k rows: inside K's 450 rows.
  p = varlen_params();
  p.o = fake_ptr(1, p.seqlen_k * kKRowBytes);
  EXPECT_TRUE(invalid(p, {"o overlaps k"}));
  p.total_k = 0;  // without total_k only seqlen_k rows of K are known
  EXPECT_TRUE(valid(p));

  // Varlen Q alone, O inside Q's packed rows.
  p = varlen_params();
  p.cu_seqlens_k = nullptr;
  p.total_k = 0;
  p.o = fake_ptr(0, 200 * kQRowBytes);
  EXPECT_TRUE(invalid(p, {"o overlaps q"}));
}

// The packed extents enter the overflow checks too.
TEST(Validate, RejectsTotalsOverflowingInt64) {
  AttentionParams p = varlen_params();
  p.total_q = int64_t{1} << 60;
  EXPECT_TRUE(invalid(p, {"q:", "overflow"}));
  p = varlen_params();
  p.total_k = int64_t{1} << 60;
  EXPECT_TRUE(invalid(p, {"k:", "overflow"}));
}

// FP8 prefill (q_dtype kFloat8E4M3): what it takes, and the reason for
// everything else.
TEST(Validate, ChecksAnFp8Prefill) {
  AttentionParams p = valid_params();
  p.q_dtype = KvDType::kFloat8E4M3;
  p.kv_dtype = KvDType::kFloat8E4M3;
  p.q_descale = static_cast<const float*>(fake_ptr(5));
  p.workspace = fake_ptr(6);
  p.workspace_bytes = size_t{1} << 30;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  p.causal = true;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  // The workspace: V^T, heads_kv * head_dim * columns; none or too small is refused.
  AttentionParams bad = p;
  bad.workspace = nullptr;
  bad.workspace_bytes = 0;
  EXPECT_TRUE(invalid(bad, {"FP8 prefill needs a workspace of", "attention_workspace_size"}));
  // 2 sequences of 200 keys: (400 + 240 * 2 + 15) / 16 * 16 = 880 columns
  // for each of the 2 K/V heads' 128 rows.
  bad = p;
  bad.workspace_bytes = size_t{2} * 128 * 880 - 1;
  EXPECT_TRUE(invalid(bad, {"needs a workspace of 225280 bytes"}));
  bad.workspace_bytes += 1;
  EXPECT_TRUE(flash::validate(bad).ok()) << flash::validate(bad).message;

  // Q is one-byte: a row stride of 8 elements is 8 bytes.
  bad = p;
  bad.q_head_stride = 136;
  EXPECT_TRUE(invalid(bad, {"q_head_stride", "16"}));

  bad = p;
  bad.kv_dtype = KvDType::kSame;
  bad.q_descale = nullptr;
  EXPECT_TRUE(invalid(bad, {"needs K and V in e4m3 too"}));
  bad = p;
  bad.q_dtype = static_cast<KvDType>(3);
  EXPECT_TRUE(invalid(bad, {"q_dtype 3"}));
  bad = p;
  bad.q_dtype = KvDType::kSame;
  EXPECT_TRUE(invalid(bad, {"q_descale needs an fp8 Q"}));
  bad = p;
  bad.q_descale = static_cast<const float*>(fake_ptr(5, 2));
  EXPECT_TRUE(invalid(bad, {"q_descale must be 4-byte aligned"}));
  bad = p;
  bad.q_descale = static_cast<const float*>(fake_ptr(3, 16));  // inside O
  EXPECT_TRUE(invalid(bad, {"o overlaps q_descale"}));

  auto unsupported = [](const AttentionParams& q, const char* words) {
    const Status s = flash::validate(q);
    return s.code == StatusCode::kUnsupported && std::string(s.message).find(words) != std::string::npos
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "code " << static_cast<int>(s.code) << ": " << s.message;
  };
  AttentionParams fp16 = p;  // O in fp16 as well as bf16
  fp16.dtype = DType::kFloat16;
  EXPECT_TRUE(flash::validate(fp16).ok()) << flash::validate(fp16).message;
  for (int64_t d : {96, 192, 80}) {
    bad = p;
    bad.head_dim = d;
    bad.set_contiguous_bnhd();
    EXPECT_TRUE(unsupported(bad, "head_dim 64, 128 or 256")) << d;
  }
  bad = p;
  bad.head_dim_v = 64;
  bad.set_contiguous_bnhd();
  EXPECT_TRUE(unsupported(bad, "head_dim 64, 128 or 256"));
  bad = p;
  bad.backend = Backend::kDecode;
  EXPECT_TRUE(unsupported(bad, "Hopper kernel only"));
  bad = p;
  bad.seqused_k = static_cast<const int32_t*>(fake_ptr(7));
  EXPECT_TRUE(unsupported(bad, "seqused_k"));
  // Sliding windows: a left edge, a right edge, both.
  AttentionParams window = p;
  window.causal = false;
  window.window_left = 64;
  EXPECT_TRUE(flash::validate(window).ok()) << flash::validate(window).message;
  window.window_right = 16;
  EXPECT_TRUE(flash::validate(window).ok()) << flash::validate(window).message;
  window.window_left = -1;
  EXPECT_TRUE(flash::validate(window).ok()) << flash::validate(window).message;
  // Windows that are causal or no window at all, however spelled.
  AttentionParams same = p;
  same.causal = false;
  same.window_right = 0;
  EXPECT_TRUE(flash::validate(same).ok()) << flash::validate(same).message;
  same.window_left = int64_t{1} << 40;
  same.window_right = int64_t{1} << 40;
  EXPECT_TRUE(flash::validate(same).ok()) << flash::validate(same).message;
  bad = p;
  bad.backend = Backend::kSm80;
  EXPECT_TRUE(unsupported(bad, "Hopper kernel only"));
  bad = p;
  bad.softcap = 30.f;
  EXPECT_TRUE(unsupported(bad, "softcap"));
  bad = p;
  bad.num_splits = 2;
  EXPECT_TRUE(unsupported(bad, "num_splits > 1"));
  bad = p;
  bad.cu_seqlens_q = static_cast<const int32_t*>(fake_ptr(8));
  bad.cu_seqlens_k = static_cast<const int32_t*>(fake_ptr(9));
  EXPECT_TRUE(invalid(bad, {"needs total_q and total_k"}));
}

TEST(Validate, ChecksAnFp8Cache) {
  AttentionParams p = valid_params();
  p.kv_dtype = KvDType::kFloat8E4M3;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  p.k_descale = static_cast<const float*>(fake_ptr(5));
  p.v_descale = static_cast<const float*>(fake_ptr(6));
  p.descale_head_stride = 1;
  EXPECT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;

  // One-byte elements: a row stride of 8 elements is 8 bytes, not 16.
  AttentionParams narrow = p;
  narrow.k_head_stride = 136;
  EXPECT_TRUE(invalid(narrow, {"k_head_stride", "multiples of 16 elements"}));
  narrow.kv_dtype = KvDType::kSame;
  narrow.k_descale = narrow.v_descale = nullptr;
  narrow.descale_head_stride = 0;
  EXPECT_TRUE(flash::validate(narrow).ok()) << flash::validate(narrow).message;

  // K's extent is counted in bytes: O may start right after an fp8 K
  // that a bf16 K of the same shape would overlap.
  const int64_t k_bytes = 2 * 200 * 2 * 128;
  AttentionParams after_k = p;
  after_k.o = fake_ptr(1, k_bytes);
  EXPECT_TRUE(flash::validate(after_k).ok()) << flash::validate(after_k).message;
  after_k.o = fake_ptr(1, k_bytes - 16);
  EXPECT_TRUE(invalid(after_k, {"o overlaps k"}));

  AttentionParams bad = p;
  bad.kv_dtype = static_cast<KvDType>(7);
  EXPECT_TRUE(invalid(bad, {"kv_dtype 7"}));
  bad = p;
  bad.kv_dtype = KvDType::kSame;
  EXPECT_TRUE(invalid(bad, {"k_descale", "fp8"}));
  bad = p;
  bad.descale_head_stride = 2;
  EXPECT_TRUE(invalid(bad, {"descale_head_stride is 2"}));
  // Outputs must not overlap the descales the kernel reads: per K/V head
  // they span heads_kv floats, else one.
  bad = p;
  bad.v_descale = static_cast<const float*>(fake_ptr(3, 8 * 128 * 2 - 4));  // O's first row's last 4 bytes
  EXPECT_TRUE(invalid(bad, {"o overlaps v_descale"}));
  bad.descale_head_stride = 0;
  bad.v_descale = static_cast<const float*>(fake_ptr(3, -4));  // the float just before O
  EXPECT_TRUE(flash::validate(bad).ok()) << flash::validate(bad).message;
  bad.descale_head_stride = 1;  // two floats: the second is O's first
  EXPECT_TRUE(invalid(bad, {"o overlaps v_descale"}));
  bad = p;
  bad.v_descale = static_cast<const float*>(fake_ptr(6, 2));
  EXPECT_TRUE(invalid(bad, {"4-byte aligned"}));
  for (int64_t d : {72, 40}) {
    bad = p;
    bad.head_dim = d;
    bad.set_contiguous_bnhd();
    EXPECT_TRUE(invalid(bad, {"multiples of 16"})) << d;
  }
  bad = p;
  bad.head_dim_v = 120;
  bad.set_contiguous_bnhd();
  EXPECT_TRUE(invalid(bad, {"head_dim_v (120)", "multiples of 16"}));
  {
    // An append into an fp8 cache: the new rows in dtype, quantised by the
    // append, which reads the descales while it writes K and V.
    AttentionParams a = append_params();
    a.kv_dtype = KvDType::kFloat8E4M3;
    a.k_descale = static_cast<const float*>(fake_ptr(11));
    a.v_descale = static_cast<const float*>(fake_ptr(12));
    a.descale_head_stride = 1;
    EXPECT_TRUE(flash::validate(a).ok()) << flash::validate(a).message;
    a.k_descale = static_cast<const float*>(fake_ptr(1, 64));  // inside the K cache
    EXPECT_TRUE(invalid(a, {"k_descale overlaps k"}));
    a.k_descale = nullptr;
    a.v_descale = static_cast<const float*>(fake_ptr(2, 64));  // inside the V cache
    EXPECT_TRUE(invalid(a, {"v_descale overlaps v"}));
  }
  bad = p;
  bad.backend = Backend::kSm80;
  EXPECT_TRUE(rejected(bad, StatusCode::kUnsupported, {"not on the sm80 kernel"}));
  for (Backend b : {Backend::kDecode, Backend::kSm90}) {
    bad = p;
    bad.backend = b;
    EXPECT_TRUE(flash::validate(bad).ok()) << flash::validate(bad).message;
  }
}


}  // namespace
}  // namespace flash::test
