// Decode shapes and split-KV against the per-sequence reference: explicit
// and automatic splits, bitwise reproducible whatever the workspace held;
// the workspace contract; kSm80 with a requested split; and the small cases
// compute-sanitizer runs (*Sanitizer*).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

// ---------------------------------------------------------------- DecodeShapes

// Decode shapes: seqlen_q 1, 2, 4, 16; GQA 32/8 and MHA 8/8; 1, 17, 1000,
// 5000 keys (two sequences, the second shorter), over a dense cache with
// and without seqused_k and paged caches; each with num_splits 1, 3, 7 and
// automatic (with a workspace from attention_workspace_size) on kDecode,
// kAuto with and without a workspace, and kSm80 without splits
// (decode_runs()). Split calls must be bitwise reproducible.
std::vector<FeatureRow> decode_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (int64_t seqlen_q : {1, 2, 4, 16}) {
    for (auto [heads_q, heads_kv] : {std::pair<int64_t, int64_t>{32, 8}, {8, 8}}) {
      for (int64_t keys : {1, 17, 1000, 5000}) {
        ++variant;
        const DType dtype = variant % 2 ? DType::kBFloat16 : DType::kFloat16;
        const int64_t hd = (variant / 2) % 2 ? 128 : 64;
        if (!head_dim_compiled(hd)) continue;
        FeatureConfig cfg = make_config(dtype, hd, heads_q, heads_kv, seed++);
        cfg.causal = seqlen_q > 1 && (variant / 4) % 2 == 1;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        const int64_t shorter = std::max<int64_t>(1, keys * 3 / 5);
        cfg.seqlens_k = {keys, shorter};
        cfg.with_lse = variant % 5 != 0;
        std::string kv;
        switch (variant % 5) {
          case 0:
            cfg.kv = KvLayout::kDense;
            cfg.seqlens_k = {keys, keys};
            kv = "dense";
            break;
          case 1:
            cfg.kv = KvLayout::kDense;
            cfg.use_seqused_k = true;
            cfg.k_capacity = keys + 13;
            kv = "dense_seqused_k";
            break;
          default:
            cfg.kv = KvLayout::kPaged;
            cfg.use_seqused_k = true;
            cfg.page_size = variant % 5 == 2 ? 16 : variant % 5 == 3 ? 64 : 256;
            cfg.padded = variant % 3 == 0;
            kv = "pages" + std::to_string(cfg.page_size);
            break;
        }
        t.add("q" + std::to_string(seqlen_q) + "_h" + std::to_string(heads_q) + "_" + std::to_string(heads_kv) + "_k" +
                  std::to_string(keys) + "_" + kv,
              cfg, decode_runs());
      }
    }
  }
  if (head_dim_compiled(256)) {
    for (int64_t seqlen_q : {1, 16}) {
      FeatureConfig cfg = make_config(DType::kBFloat16, 256, 32, 8, seed++);
      cfg.seqlens_q = repeat(seqlen_q, 2);
      cfg.seqlens_k = {5000, 2100};
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      cfg.page_size = 64;
      cfg.causal = seqlen_q > 1;
      t.add("q" + std::to_string(seqlen_q) + "_h32_8_k5000_pages64", cfg, decode_runs());
    }
  }
  return t.rows();
}

class DecodeShapes : public FeatureTest {};
TEST_P(DecodeShapes, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, DecodeShapes, ::testing::ValuesIn(decode_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DecodeShapes);

// ---------------------------------------------------------------- SplitKvIsDeterministic

// Split results do not depend on what the workspace held before (NaN, then
// zeros) and are bitwise reproducible, up to the 128-split maximum and with
// more splits requested than there are key blocks.
int64_t split_head_dim() { return head_dim_compiled(128) ? 128 : 64; }

std::vector<FeatureRow> split_rows() {
  FeatureTable t;
  if (!head_dim_compiled(split_head_dim())) return t.rows();
  uint64_t seed = kFeatureSeedBase;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    FeatureConfig cfg = make_config(dtype, split_head_dim(), 32, 8, seed++);
    cfg.seqlens_q = repeat(4, 3);
    cfg.seqlens_k = {4097, 77, 2500};
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 64;
    cfg.causal = true;
    cfg.softcap = dtype == DType::kFloat16 ? 30.f : 0.f;
    t.add("pages64", cfg, {});
  }
  return t.rows();
}

class SplitKvIsDeterministic : public FeatureTest {};
TEST_P(SplitKvIsDeterministic, WhateverTheWorkspaceHeld) {
  const FeatureConfig cfg = row_config();
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(reference(c, &ref_o, &ref_lse));
  for (int32_t splits : {2, 7, 64, 128}) {
    SCOPED_TRACE("num_splits " + std::to_string(splits));
    AttentionParams p = c.params();
    p.backend = Backend::kDecode;
    p.num_splits = splits;
    size_t bytes = 0;
    ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
    EXPECT_GT(bytes, 0u) << "4097 keys split " << splits << " ways need a workspace";
    DeviceBuffer workspace;
    ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
    p.workspace = workspace.ptr;
    p.workspace_bytes = bytes;

    std::vector<uint16_t> o1, o2;
    std::vector<float> lse1, lse2;
    Status s = c.run(p);  // the workspace poisoned with NaN first
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_TRUE(c.read_raw(&o1, &lse1));
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));

    s = c.run(p, /*workspace_fill=*/0);  // O and LSE poisoned again, the workspace zeros
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_TRUE(c.read_raw(&o2, &lse2));
    EXPECT_TRUE(bitwise_equal(o1, o2)) << "O depends on the workspace's previous contents or is not deterministic";
    EXPECT_TRUE(bitwise_equal(lse1, lse2)) << "LSE differs between two identical calls";
  }
}
INSTANTIATE_TEST_SUITE_P(Features, SplitKvIsDeterministic, ::testing::ValuesIn(split_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SplitKvIsDeterministic);

// ---------------------------------------------------------------- HopperSplitKv

// Split-KV on the Hopper and sm80 kernels: prefill shapes (dense and varlen with
// totals, ragged lengths around its 128-row tiles and K/V blocks, GQA,
// causal, windows, softcap, with and without the LSE) split 3, 7 and 64
// ways (more splits than some tiles have K/V blocks: empty splits), and
// flash's own count with a workspace, against the per-sequence reference;
// every split call runs twice and must give the same bits. Where the
// device or build has no Hopper kernel the kSm90 runs are dropped and kAuto
// runs the decode kernel instead.
std::vector<FeatureRow> hopper_split_rows() {
  FeatureTable t;
  const std::vector<FlashRun> runs = {{Backend::kSm90, 3, true}, {Backend::kSm90, 7, true}, {Backend::kSm90, 64, true},
                                      {Backend::kSm90, 0, true}, {Backend::kAuto, 5, true}, {Backend::kAuto, 0, true},
                                      {Backend::kSm80, 3, true}, {Backend::kSm80, 0, true}};
  uint64_t seed = kFeatureSeedBase + 500;
  if (head_dim_compiled(128)) {
    FeatureConfig varlen = make_config(DType::kBFloat16, 128, 8, 2, seed++);
    varlen.varlen_q = true;
    varlen.kv = KvLayout::kVarlen;
    varlen.seqlens_q = tile_rotated(2);
    varlen.seqlens_k = tile_rotated(3);
    varlen.causal = true;
    varlen.tail_rows = 8;
    t.add("varlen", varlen, runs);

    FeatureConfig capped = make_config(DType::kFloat16, 128, 4, 4, seed++);
    capped.seqlens_q = repeat(129, 2);
    capped.seqlens_k = repeat(5000, 2);
    capped.causal = true;
    capped.softcap = 30.f;
    t.add("bottom_right", capped, runs);
  }
  if (head_dim_compiled(64)) {
    FeatureConfig dense = make_config(DType::kFloat16, 64, 16, 4, seed++);
    dense.seqlens_q = repeat(200, 2);
    dense.seqlens_k = repeat(3000, 2);
    dense.with_lse = false;
    t.add("dense", dense, runs);
  }
  if (head_dim_compiled(256)) {
    FeatureConfig window = make_config(DType::kBFloat16, 256, 4, 2, seed++);
    window.seqlens_q = repeat(1000, 1);
    window.seqlens_k = repeat(2049, 1);
    window.window_left = 300;
    window.window_right = 20;
    t.add("window", window, runs);
  }
  return t.rows();
}

class HopperSplitKv : public FeatureTest {};
TEST_P(HopperSplitKv, MatchesReference) {
  check_row_without_absent_sm90();
}
INSTANTIATE_TEST_SUITE_P(Features, HopperSplitKv, ::testing::ValuesIn(hopper_split_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HopperSplitKv);

// ---------------------------------------------------------------- the workspace and kSm80

class SplitKv : public FeatureFixture {};

// The workspace contract: attention_workspace_size is 0 without splits and
// nonzero for an explicit split of many keys; a split with a missing or
// too-small workspace is rejected (kInvalidArgument) and writes nothing, as
// is a misaligned one; num_splits 0 without a workspace does not split.
TEST_F(SplitKv, WorkspaceChecks) {
  const int64_t hd = split_head_dim();
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kBFloat16, hd, 8, 8, case_seed(kFeatureSeedBase));
  cfg.seqlens_q = repeat(1, 1);
  cfg.seqlens_k = repeat(5000, 1);
  cfg.kv = KvLayout::kDense;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));

  AttentionParams p = c.params();
  p.backend = Backend::kDecode;
  size_t bytes = 12345;
  p.num_splits = 1;
  ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
  EXPECT_EQ(bytes, 0u) << "num_splits 1 never splits";

  p.num_splits = 7;
  ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
  ASSERT_GT(bytes, 0u) << "7 splits of 5000 keys need a workspace";

  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "null workspace for a requested split";
  EXPECT_TRUE(c.outputs_untouched());

  DeviceBuffer workspace;
  ASSERT_EQ(workspace.allocate(bytes + 512), cudaSuccess);
  p.workspace = workspace.ptr;
  p.workspace_bytes = bytes - 1;
  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "workspace one byte short";
  EXPECT_TRUE(c.outputs_untouched());

  p.workspace = static_cast<char*>(workspace.ptr) + 16;
  p.workspace_bytes = bytes;
  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "workspace not 256-byte aligned";
  EXPECT_TRUE(c.outputs_untouched());

  p.workspace = workspace.ptr;
  p.workspace_bytes = bytes;
  Status s = c.run(p);
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));

  // num_splits 0 and no workspace: flash does not split, and succeeds.
  for (Backend backend : {Backend::kDecode, Backend::kAuto}) {
    SCOPED_TRACE(backend_name(backend));
    AttentionParams q = c.params();
    q.backend = backend;
    q.num_splits = 0;
    s = c.run(q);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_TRUE(c.read_output(&o, &lse));
    EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));
    size_t auto_bytes = 0;
    ASSERT_TRUE(attention_workspace_size(q, &auto_bytes).ok());
    // Informational: whether the automatic choice splits this call (one
    // sequence, 8 heads, 5000 keys: few (batch, head) pairs for the GPU).
    std::printf("[flash tests] %s, num_splits 0: attention_workspace_size = %zu bytes\n", backend_name(backend),
                auto_bytes);
  }

  // Bad arguments to attention_workspace_size itself.
  p = c.params();
  p.num_splits = -1;
  EXPECT_EQ(attention_workspace_size(p, &bytes).code, StatusCode::kInvalidArgument);
  p.num_splits = 7;
  EXPECT_EQ(attention_workspace_size(p, nullptr).code, StatusCode::kInvalidArgument);
}

// kSm80 with a requested split over a paged cache: split on the sm80
// kernel (or refused, kUnsupported, nothing written) and computed correctly.
TEST_F(SplitKv, Sm80WithSplitsIsRightOrUnsupported) {
  const int64_t hd = split_head_dim();
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kFloat16, hd, 8, 2, case_seed(kFeatureSeedBase));
  cfg.seqlens_q = repeat(2, 2);
  cfg.seqlens_k = {3000, 1200};
  cfg.kv = KvLayout::kPaged;
  cfg.use_seqused_k = true;
  cfg.page_size = 64;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));
  AttentionParams p = c.params();
  p.backend = Backend::kSm80;
  p.num_splits = 5;
  size_t bytes = 0;
  const Status query = attention_workspace_size(p, &bytes);
  EXPECT_TRUE(query.ok() || query.code == StatusCode::kUnsupported) << query.message;
  if (!query.ok()) {
    // The documented size of a requested split's workspace (validate()
    // checks it before the backend is considered).
    bytes = size_t{5} * static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * (p.head_dim + 1)) * 4;
  }
  DeviceBuffer workspace;
  if (bytes > 0) {
    ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
    p.workspace = workspace.ptr;
    p.workspace_bytes = bytes;
  }
  const Status s = c.run(p);
  if (s.code == StatusCode::kUnsupported) {
    EXPECT_TRUE(c.outputs_untouched());
    return;
  }
  EXPECT_FALSE(query.code == StatusCode::kUnsupported) << "attention_workspace_size refused what attention_forward ran";
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));
}

// ---------------------------------------------------------------- for compute-sanitizer

// Small cases of each engine-feature kernel path, checked against flash's
// own sm80 kernel (no cuBLAS: racecheck dies inside it): a split-KV decode
// over a shuffled paged cache (the decode kernel's shared-memory merge and
// the combine kernel), a causal varlen prefill with totals (the Hopper
// kernel's varlen tiles and guarded stores), a window with a softcap (on
// sm_90 kSm90 runs the Hopper kernel's softcap variant), and a left window
// without softcap (on sm_90 kAuto and kSm90 run the Hopper kernel's
// left-window variant: visible blocks past block 0; split three ways, its
// split-KV epilogue and the combine kernel after it), and the Hopper
// kernel's KV-cache paths (TMA boxes and gathered rows).
std::vector<FeatureRow> sanitizer_rows() {
  FeatureTable t;
  if (!head_dim_compiled(64) || !head_dim_compiled(128)) return t.rows();
  FeatureConfig paged = make_config(DType::kBFloat16, 128, 8, 2, 9001);
  paged.seqlens_q = repeat(1, 3);
  paged.seqlens_k = {17, 300, 1000};
  paged.kv = KvLayout::kPaged;
  paged.page_size = 16;
  paged.use_seqused_k = true;
  t.add("paged_split_decode", paged, {{Backend::kDecode, 3, true}, {Backend::kDecode, 1}});

  FeatureConfig varlen = make_config(DType::kFloat16, 64, 4, 2, 9002);
  varlen.varlen_q = true;
  varlen.kv = KvLayout::kVarlen;
  varlen.seqlens_q = {0, 17, 129};
  varlen.seqlens_k = {5, 129, 200};
  varlen.causal = true;
  varlen.tail_rows = 8;
  t.add("varlen", varlen, {{Backend::kDecode, 0}});

  FeatureConfig softcap = make_config(DType::kBFloat16, 128, 4, 4, 9003);
  softcap.seqlens_q = repeat(65, 1);
  softcap.seqlens_k = repeat(300, 1);
  softcap.window_left = 32;
  softcap.window_right = 0;
  softcap.softcap = 10.f;
  t.add("window", softcap, {{Backend::kDecode, 0}});

  FeatureConfig window = make_config(DType::kBFloat16, 128, 4, 2, 9004);
  window.seqlens_q = repeat(700, 1);
  window.seqlens_k = repeat(900, 1);
  window.window_left = 200;
  window.window_right = 30;
  t.add("window", window, {{Backend::kAuto, 0}, {Backend::kAuto, 3, true}});

  // The Hopper kernel's KV-cache path: a causal chunked prefill on a
  // shuffled 16-key paged cache (the producer warps' page boxes, V's rows
  // past each sequence's keys zeroed by every consumer warpgroup), and a
  // dense cache with seqused_k at head_dim 64 (three consumer warpgroups).
  FeatureConfig chunked = make_config(DType::kBFloat16, 128, 8, 2, 9005);
  chunked.varlen_q = true;
  chunked.seqlens_q = {0, 70, 130};
  chunked.seqlens_k = {17, 200, 450};
  chunked.kv = KvLayout::kPaged;
  chunked.page_size = 16;
  chunked.use_seqused_k = true;
  chunked.causal = true;
  t.add("paged_chunked_prefill", chunked, {{Backend::kAuto, 0}});

  FeatureConfig used = make_config(DType::kFloat16, 64, 4, 1, 9006);
  used.seqlens_q = repeat(200, 2);
  used.seqlens_k = {150, 333};
  used.kv = KvLayout::kDense;
  used.use_seqused_k = true;
  used.k_capacity = 400;
  t.add("seqused_k_prefill", used, {{Backend::kAuto, 0}});

  // The Hopper kernel's gathered pages (3 keys a page: cp.async copies by
  // all four producer warps, each thread's arrival on the stage barrier)
  // at head_dim 64, where the producer runs on the fewest registers.
  FeatureConfig gathered = make_config(DType::kFloat16, 64, 8, 2, 9007);
  gathered.varlen_q = true;
  gathered.seqlens_q = {5, 200, 70};
  gathered.seqlens_k = {9, 260, 333};
  gathered.kv = KvLayout::kPaged;
  gathered.page_size = 3;
  gathered.use_seqused_k = true;
  gathered.causal = true;
  t.add("paged_gather_prefill", gathered, {{Backend::kAuto, 0}});
  return t.rows();
}

class SanitizerNewPaths : public FeatureTest {};
TEST_P(SanitizerNewPaths, AgreeWithSm80) { check_against(row_config(), GetParam().runs); }
INSTANTIATE_TEST_SUITE_P(Features, SanitizerNewPaths, ::testing::ValuesIn(sanitizer_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SanitizerNewPaths);

}  // namespace
}  // namespace flash::test
