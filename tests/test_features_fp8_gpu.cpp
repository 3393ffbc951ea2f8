// FP8 KV cache (AttentionParams::kv_dtype = kFloat8E4M3): K and V are e4m3
// bytes, Q and O fp16 / bf16, with per-tensor or per-K/V-head descales.
// Such calls run on the decode kernel and, unsplit, on the Hopper kernel
// (kAuto takes it for prefill-length calls it does not split; the fixture
// runs kSm90 on every row where the device has it); kSm80 returns
// kUnsupported and writes nothing.
//
// Every row draws K and V from the finite e4m3 codes (subnormals
// included; one row from all of them, up to +-448) and checks flash
// against the references run on dtype copies of the dequantised K and V
// (descales are powers of two, so those copies are exact): decode and
// chunked-prefill shapes on dense, seqused_k, varlen and paged caches
// (pages of 1, 3, 16 and 64 keys), GQA / MQA / MHA, causal, a window, softcap,
// sinks + ALiBi, a V head dim of its own, head dims off the fp8 kernels'
// multiples of 64, and split runs (forced and flash's choice).
#include <cmath>
#include <string>
#include <vector>

#include "build_config.h"
#include "device_tensor.h"
#include "feature_test.h"
#include "kernels/decode/api.h"
#include "src/dispatch.h"

namespace flash::test {
namespace {

// The runs an fp8 call takes: the decode kernel, unsplit and split.
std::vector<FlashRun> fp8_runs() {
  return {{Backend::kAuto, 0},       {Backend::kAuto, 0, true}, {Backend::kDecode, 1},
          {Backend::kDecode, 3, true}, {Backend::kAuto, 7, true}};
}

std::vector<float> powers_of_two(int64_t n, int first) {
  std::vector<float> f;
  for (int64_t i = 0; i < n; ++i) f.push_back(std::ldexp(1.f, first + static_cast<int>(i % 5) - 2));
  return f;
}

// Whether an fp8 call of head dim `d` runs in this build: a compiled
// multiple of 64 at least d (the fp8 decode kernels').
bool fp8_head_dim_runs(int64_t d) {
  for (int64_t k : {64, 128, 192, 256}) {
    if (k >= d && head_dim_compiled(k)) return true;
  }
  return false;
}

std::vector<FeatureRow> all_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 9900;
  int variant = 0;
  auto config = [&](int64_t head_dim, int64_t heads_q, int64_t heads_kv) {
    ++variant;
    FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, head_dim, heads_q, heads_kv,
                                    seed++);
    cfg.kv_dtype = KvDType::kFloat8E4M3;
    cfg.padded = variant % 3 == 0;
    // Descales: per K/V head, one for all, or none, in turn.
    switch ((variant / 2) % 3) {
      case 0:
        cfg.k_descale = powers_of_two(heads_kv, 0);
        cfg.v_descale = powers_of_two(heads_kv, 1);
        break;
      case 1:
        cfg.k_descale = {0.5f};
        cfg.v_descale = {4.f};
        break;
      default:
        break;
    }
    return cfg;
  };
  for (int64_t d : {64, 128, 192, 256, 80}) {
    if (!fp8_head_dim_runs(d)) continue;
    struct Cache {
      const char* name;
      KvLayout kv;
      int64_t page_size;
    };
    const Cache caches[] = {{"seqused", KvLayout::kDense, 0},
                            {"pages16", KvLayout::kPaged, 16},
                            {"pages3", KvLayout::kPaged, 3}};
    for (const Cache& cache : caches) {
      for (int64_t seqlen_q : {1, 5, 130}) {
        if (d == 80 && seqlen_q == 5) continue;
        FeatureConfig cfg = config(d, 16, 4);
        cfg.causal = seqlen_q > 1;
        cfg.seqlens_q = repeat(seqlen_q, 3);
        cfg.seqlens_k = {900, 350, 1};
        if (seqlen_q > 1) cfg.seqlens_k = {900, 350, 130};
        cfg.kv = cache.kv;
        cfg.use_seqused_k = true;
        if (cache.kv == KvLayout::kDense) cfg.k_capacity = 1000;
        if (cache.kv == KvLayout::kPaged) cfg.page_size = cache.page_size;
        t.add("q" + std::to_string(seqlen_q) + "_" + cache.name, cfg, fp8_runs());
      }
    }
    {
      // A dense cache without seqused_k, MQA.
      FeatureConfig cfg = config(d, 8, 1);
      cfg.seqlens_q = repeat(1, 2);
      cfg.seqlens_k = repeat(2000, 2);
      t.add("dense_mqa", cfg, fp8_runs());
    }
    {
      // Chunked prefill: several K/V blocks and query tiles per sequence,
      // token-level and 64-key pages, not causal, with the LSE.
      for (int64_t page_size : {1, 64}) {
        FeatureConfig cfg = config(d, 8, 2);
        cfg.seqlens_q = repeat(300, 2);
        cfg.seqlens_k = {2100, 700};
        cfg.kv = KvLayout::kPaged;
        cfg.use_seqused_k = true;
        cfg.page_size = page_size;
        cfg.with_lse = true;
        t.add("q300_pages" + std::to_string(page_size), cfg, fp8_runs());
      }
    }
    {
      // Packed queries of ragged lengths against a paged cache, causal.
      FeatureConfig cfg = config(d, 8, 2);
      cfg.varlen_q = true;
      cfg.seqlens_q = tile_rotated(variant);
      cfg.seqlens_k = tile_rotated(variant);
      for (size_t b = 0; b < cfg.seqlens_k.size(); ++b) cfg.seqlens_k[b] += 37;
      cfg.causal = true;
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      cfg.page_size = 16;
      t.add("varlen_prefill", cfg, fp8_runs());
    }
    {
      // Packed K/V, MHA, ragged lengths (0 and 1 among them).
      FeatureConfig cfg = config(d, 4, 4);
      cfg.varlen_q = true;
      cfg.seqlens_q = repeat(1, kNumLengths);
      cfg.seqlens_k = rotated(variant);
      cfg.kv = KvLayout::kVarlen;
      t.add("varlen", cfg, fp8_runs());
    }
  }
  if (fp8_head_dim_runs(128)) {
    // Masks and score modifiers, decode and chunked prefill.
    for (int64_t seqlen_q : {1, 64}) {
      FeatureConfig base = config(128, 16, 2);
      base.seqlens_q = repeat(seqlen_q, 2);
      base.seqlens_k = {1500, 700};
      base.kv = KvLayout::kPaged;
      base.use_seqused_k = true;
      base.page_size = 16;
      const std::string q = "q" + std::to_string(seqlen_q) + "_";
      {
        FeatureConfig cfg = base;
        cfg.window_left = 200;
        cfg.window_right = 0;
        t.add(q + "window", cfg, fp8_runs());
      }
      {
        FeatureConfig cfg = base;
        cfg.causal = true;
        cfg.softcap = 30.f;
        t.add(q + "softcap", cfg, fp8_runs());
      }
      {
        FeatureConfig cfg = base;
        cfg.causal = true;
        for (int64_t h = 0; h < cfg.heads_q; ++h) {
          cfg.sinks.push_back(h % 3 == 0 ? -INFINITY : 0.5f * static_cast<float>(h));
          cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
        }
        t.add(q + "sinks_alibi", cfg, fp8_runs());
      }
    }
    // Every finite code, up to +-448, with a scale that keeps the scores
    // moderate: decode, and chunked prefill (the Hopper kernel's widening).
    for (int64_t seqlen_q : {1, 64}) {
      FeatureConfig cfg = config(128, 8, 2);
      cfg.input_scale = 448.f;
      cfg.softmax_scale = std::ldexp(1.f, -20);
      cfg.k_descale.clear();
      cfg.v_descale.clear();
      cfg.causal = seqlen_q > 1;
      cfg.seqlens_q = repeat(seqlen_q, 2);
      cfg.seqlens_k = repeat(3000, 2);
      t.add(seqlen_q == 1 ? "all_codes" : "q64_all_codes", cfg, fp8_runs());
    }
    // Outlier channels in a bf16 Q: the Hopper kernel splits Q into two
    // e4m3 parts row by row, each row scaled by a power of two
    // (Mainloop::convert_q, kQkE4m3); these rows span 2^-16 to 2^16 in
    // their channels' scales, and their elements below about 2^-10 of the
    // row's largest go below what the split keeps exact. Decode and
    // chunked prefill, with the LSE; head dim 256 too (its chunked prefill).
    for (int64_t seqlen_q : {1, 64, 65}) {
      const int64_t d = seqlen_q == 65 ? 256 : 128;
      if (!fp8_head_dim_runs(d)) continue;
      FeatureConfig cfg = config(d, 8, 2);
      cfg.dtype = DType::kBFloat16;
      cfg.q_channel_log2 = {16, 0, -16, 3, 8, -8, 0, 12};
      cfg.softmax_scale = std::ldexp(1.f, -17);
      cfg.causal = seqlen_q > 1;
      cfg.seqlens_q = repeat(seqlen_q, 2);
      cfg.seqlens_k = {1100, 300};
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      cfg.page_size = 16;
      t.add("q" + std::to_string(seqlen_q) + (d == 256 ? "_hd256" : "") + "_outlier_channels", cfg, fp8_runs());
    }
    // The same channels in decode at head dims 64 and 192, where the decode
    // kernel's Q load gives a row 4 and 12 groups of 16 columns over its
    // eight lanes (one group a lane with some lanes idle, and one or two).
    for (int64_t d : {64, 192}) {
      if (!fp8_head_dim_runs(d)) continue;
      FeatureConfig cfg = config(d, 8, 2);
      cfg.dtype = DType::kBFloat16;
      cfg.q_channel_log2 = {16, 0, -16, 3, 8, -8, 0, 12};
      cfg.softmax_scale = std::ldexp(1.f, -17);
      cfg.seqlens_q = repeat(1, 2);
      cfg.seqlens_k = {1100, 300};
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      cfg.page_size = 16;
      t.add("q1_hd" + std::to_string(d) + "_outlier_channels", cfg, fp8_runs());
    }
    {
      // A V head dim of its own.
      FeatureConfig cfg = config(128, 8, 2);
      cfg.head_dim_v = 64;
      cfg.seqlens_q = repeat(1, 2);
      cfg.seqlens_k = {777, 64};
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      t.add("value_dim", cfg, fp8_runs());
    }
  }
  return t.rows();
}

class Fp8Cache : public FeatureTest {};
TEST_P(Fp8Cache, MatchesReference) {
  check_case(row_config(), GetParam().runs,
             [](FeatureCase& c, const std::vector<double>&, const std::vector<double>&) {
               // Only the decode kernel reads fp8: the sm80 kernel refuses.
               AttentionParams p = c.params();
               p.backend = Backend::kSm80;
               const Status s = c.run(p);
               EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
               EXPECT_TRUE(c.outputs_untouched());
             });
}
INSTANTIATE_TEST_SUITE_P(Features, Fp8Cache, ::testing::ValuesIn(all_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Fp8Cache);

// Devices with 99 KiB of shared memory a block (sm_86, sm_89) run the
// decode kernel's two-stage variant (candidate 1; the default needs 102 and
// 105 KiB) on an fp8 cache at head dims 128 and 256, and on a bf16/fp16
// one at 128 for decode-length calls. A larger GPU's plan never picks it,
// so this plans each call as for such a device and launches what that plan
// holds: decode and (fp8) chunked prefill, paged and dense caches, unsplit
// and in three splits, a window with softcap, sinks with ALiBi.
class TwoStageDecode : public FeatureFixture {};
TEST_F(TwoStageDecode, MatchesReference) {
  detail::DeviceCaps caps;
  const Status device = detail::query_device(&caps);
  ASSERT_TRUE(device.ok()) << device.message;
  caps.major = 8;  // an sm_89: no Hopper kernel for the chunks either
  caps.minor = 9;
  caps.max_smem = decode::kSmallDeviceSmemBytes;
  caps.smem_per_sm = decode::kSmallDeviceSmemBytes + 1024;
  struct Row {
    const char* name;
    int64_t seqlen_q;
    int64_t page_size;  // 0: a dense cache
    int32_t num_splits;
    bool window_softcap, sinks_alibi;
  };
  const Row rows[] = {{"q1_pages16", 1, 16, 0, false, false},
                      {"q1_dense_3splits", 1, 0, 3, false, false},
                      {"q130_pages3_causal", 130, 3, 0, false, false},
                      {"q1_window_softcap_3splits", 1, 16, 3, true, false},
                      {"q64_sinks_alibi", 64, 1, 0, false, true}};
  struct Kernel {
    int64_t head_dim;
    bool fp8;
  };
  int ran = 0, ran_bf16 = 0;
  uint64_t seed = 9980;
  for (const Kernel& kernel : {Kernel{128, true}, Kernel{256, true}, Kernel{128, false}}) {
    const int64_t hd = kernel.head_dim;
    if (!head_dim_compiled(hd)) continue;
    for (const Row& row : rows) {
      if (!kernel.fp8 && row.seqlen_q > 16) continue;  // a bf16 chunk runs on the sm80 kernel there
      SCOPED_TRACE(std::string("head_dim ") + std::to_string(hd) + (kernel.fp8 ? " e4m3, " : ", ") + row.name);
      FeatureConfig cfg = make_config(seed % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 16, 4, seed);
      ++seed;
      if (kernel.fp8) {
        cfg.kv_dtype = KvDType::kFloat8E4M3;
        cfg.k_descale = powers_of_two(4, 0);  // per K/V head
        cfg.v_descale = powers_of_two(4, 1);
      }
      cfg.seqlens_q = repeat(row.seqlen_q, 3);
      cfg.seqlens_k = {900, 350, row.seqlen_q > 1 ? 130 : 1};
      cfg.causal = row.seqlen_q > 1;
      cfg.use_seqused_k = true;
      cfg.with_lse = true;
      if (row.page_size > 0) {
        cfg.kv = KvLayout::kPaged;
        cfg.page_size = row.page_size;
      } else {
        cfg.k_capacity = 1000;
      }
      if (row.window_softcap) {
        cfg.window_left = 200;
        cfg.window_right = 0;
        cfg.softcap = 30.f;
      }
      if (row.sinks_alibi) {
        for (int64_t h = 0; h < cfg.heads_q; ++h) {
          cfg.sinks.push_back(h % 3 == 0 ? -INFINITY : 0.5f * static_cast<float>(h));
          cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
        }
      }
      cfg.seed = case_seed(cfg.seed);
      check_case(cfg, {{Backend::kDecode, row.num_splits, row.num_splits > 1}},
                 [&](FeatureCase& c, const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
                   AttentionParams p = c.params();
                   p.num_splits = row.num_splits;
                   DeviceBuffer workspace;
                   if (row.num_splits > 1) {
                     size_t bytes = 0;
                     ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
                     ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
                     p.workspace = workspace.ptr;
                     p.workspace_bytes = bytes;
                   }
                   detail::Plan plan;
                   const Status planned = detail::make_plan(p, caps, &plan);
                   ASSERT_TRUE(planned.ok()) << planned.message;
                   ASSERT_EQ(plan.num_candidates, 1);
                   ASSERT_EQ(plan.candidates[0].backend, Backend::kDecode);
                   ASSERT_EQ(plan.candidates[0].index, 1);
                   EXPECT_EQ(plan.num_splits, row.num_splits > 1 ? row.num_splits : 1);
                   expect_launch_matches(c, plan, plan.candidates[0], p, ref_o, ref_lse);
                   ++ran;
                   if (!kernel.fp8) ++ran_bf16;
                 });
    }
  }
  if (ran == 0) GTEST_SKIP() << "head dims 128 and 256 are not compiled";
  if (head_dim_compiled(128)) {
    EXPECT_GE(ran, 8);
    EXPECT_EQ(ran_bf16, 3);  // the bf16/fp16 decode rows
  }
}

// For compute-sanitizer (scripts/sanitize.sh runs *Sanitizer*): the Hopper
// kernel's fp8 path (the producer's copies of token-level pages and its
// in-place widening, each thread's arrival on the stage barriers) on a
// causal chunked prefill, against the decode kernel instead of cuBLAS.
class Fp8Sanitizer : public FeatureFixture {};
TEST_F(Fp8Sanitizer, HopperAgreesWithDecode) {
  if (!fp8_head_dim_runs(128)) GTEST_SKIP() << "head_dim 128 is not compiled";
  FeatureConfig cfg = make_config(DType::kBFloat16, 128, 8, 2, 9950);
  cfg.kv_dtype = KvDType::kFloat8E4M3;
  cfg.k_descale = {0.5f, 2.f};
  cfg.v_descale = {4.f, 0.25f};
  cfg.varlen_q = true;
  cfg.seqlens_q = {5, 200, 70};
  cfg.seqlens_k = {9, 260, 333};
  cfg.kv = KvLayout::kPaged;
  cfg.page_size = 1;
  cfg.use_seqused_k = true;
  cfg.causal = true;
  cfg.seed = case_seed(cfg.seed);
  check_against(cfg, {{Backend::kAuto, 0}}, Backend::kDecode);
}

}  // namespace
}  // namespace flash::test
