#include "plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "head_dims.h"
#include "kernels/decode/api.h"
#include "kernels/sm80/api.h"
#include "kernels/sm90/fp8_vt.h"
#include "kernels/sm90/tma_limits.h"
#include "src/dispatch.h"
#include "src/status.h"
#include "src/validate_checks.h"
#if FLASH_HAS_SM90
#include "kernels/sm90/api.h"
#endif

namespace flash::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

MaskVariant mask_variant(const AttentionParams& p, int window_left, int window_right) {
  if (p.softcap > 0.f || p.alibi_slopes != nullptr) return MaskVariant::kScoreMod;
  if (window_left >= 0) return MaskVariant::kWindow;
  if (window_right >= 0) return MaskVariant::kCausal;
  return MaskVariant::kTail;
}

// ---------------------------------------------------------------- decode

// The compiled head dim of the sm80 and decode kernels that run p, and of
// the sm90 kernel (src/head_dims.h); 0 when none is compiled.
int64_t width(const AttentionParams& p) { return call_head_dim(p.head_dim, p.head_dim_v); }
int sm80_head_dim(const AttentionParams& p) { return kernel_head_dim(width(p)); }
bool fp8_cache(const AttentionParams& p) { return p.kv_dtype != KvDType::kSame; }
// The sm90 kernel's; with an fp8 cache, its fp8 kernels' (the multiples of 64).
int sm90_head_dim(const AttentionParams& p) {
  return kernel_head_dim(width(p), fp8_cache(p) ? KernelSet::kFp8 : KernelSet::kSm90);
}
// The decode kernel's: its fp8 tiles come in the multiples of 64.
int decode_head_dim(const AttentionParams& p) {
  return fp8_cache(p) ? kernel_head_dim(width(p), KernelSet::kFp8) : sm80_head_dim(p);
}
// The decode kernel's configuration for the call on the device (its
// candidate index): 0, the default; 1, the two-stage variant (head dim
// 128, and fp8 caches at 256), where the default needs more shared memory
// than the device has (sm_86/89: decode::has_two_stage_variant); -1 where
// neither fits.
int decode_variant(const AttentionParams& p, const DeviceCaps& caps) {
  const int hd = decode_head_dim(p);
  const bool fp8 = fp8_cache(p);
  if (caps.max_smem == 0 || decode::smem_bytes(hd, fp8) <= caps.max_smem) return 0;
  if (decode::has_two_stage_variant(hd, fp8) && decode::smem_bytes(hd, fp8, 2) <= caps.max_smem) return 1;
  return -1;
}
// Shared memory of that configuration (of the default where none fits).
int decode_smem(const AttentionParams& p, const DeviceCaps& caps) {
  return decode::smem_bytes(decode_head_dim(p), fp8_cache(p), decode_variant(p, caps) == 1 ? 2 : 0);
}

bool decode_fits(const AttentionParams& p, const DeviceCaps& caps) { return decode_variant(p, caps) >= 0; }
// That configuration's pipeline depth.
int decode_stages(const AttentionParams& p, const DeviceCaps& caps) {
  return decode_variant(p, caps) == 1 ? 2 : decode::stages(decode_head_dim(p), fp8_cache(p));
}

// The longest run of keys one query row may accumulate (before the split
// rule): seqlen_k, or what a paged cache with seqused_k holds, bounded by a
// left window. validate() caps every length at 2^30.
int64_t longest_keys(const AttentionParams& p, int64_t block_n) {
  int64_t keys = p.seqlen_k;
  if (p.block_table != nullptr && p.seqused_k != nullptr) keys = std::max(keys, p.max_pages_per_seq * p.page_size);
  if (p.window_left >= 0 && p.window_left < (int64_t{1} << 31)) {
    keys = std::min(keys, p.window_left + p.seqlen_q + std::clamp<int64_t>(p.window_right, 0, int64_t{1} << 31) +
                              block_n);
  }
  return keys;
}

// The fewest splits that keep every accumulation within kKeysPerAccumulation
// keys. The tensor cores' float32 accumulation of P V rounds toward zero:
// O drifts low by about 6e-9 of itself per key accumulated (an H200: rel.
// L2 7.2e-3 at 2^20 keys, 2.6e-2 at 2^22, 0.19 at 2^25; docs/perf/long-keys.md).
int64_t accuracy_splits(int64_t keys) { return ceil_div(keys, kKeysPerAccumulation); }

// The split count flash wants for a prefill kernel, sm90 or sm80 (or p.num_splits,
// clamped), before the workspace rule: the accuracy floor above, and when
// the calls' (query block, head, batch) tiles leave more than half of the
// SMs idle, enough splits to give each about one, of at least
// kMinBlocksPerSplit K/V blocks each. Splits hold at most
// kMaxSplitWorkspace bytes of partial results.
int prefill_splits_wanted(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.num_splits >= 1) return std::min<int>(p.num_splits, kMaxSplits);
  constexpr int64_t kBlock = 128;  // the kernels' K/V blocks and smallest query tiles
  const int64_t keys = longest_keys(p, kBlock);
  const int64_t blocks = ceil_div(keys, kBlock);
  const int64_t tiles = ceil_div(std::max<int64_t>(p.seqlen_q, 1), kBlock) * p.heads_q * p.batch;
  if (tiles <= 0 || blocks <= 1) return 1;
  const int64_t num_sms = std::max(caps.num_sms, 1);
  int64_t splits = accuracy_splits(keys);
  if (2 * tiles <= num_sms) splits = std::max(splits, std::min(num_sms / tiles, blocks / kMinBlocksPerSplit));
  splits = std::clamp<int64_t>(splits, 1, std::min<int64_t>(kMaxSplits, blocks));
  const size_t per_split = decode_workspace_bytes(p, 2) / 2;
  if (per_split > 0) splits = std::min<int64_t>(splits, std::max<size_t>(kMaxSplitWorkspace / per_split, 1));
  return static_cast<int>(splits);
}

// Whether `splits` splits of a decode call on a dense bf16/fp16 cache take
// at least min_blocks_saved_by_split K/V blocks off each CTA, enough to pay
// for the combine kernel; true for other caches, and where the accuracy
// floor asks for splits. The keys counted are the cache's (seqlen_k): the
// host does not know seqused_k.
bool decode_split_pays(const AttentionParams& p, const DeviceCaps& caps, int64_t splits) {
  if (splits <= 1 || p.block_table != nullptr || fp8_cache(p)) return true;
  const int64_t block_n = decode::block_n(decode_head_dim(p), false);
  const int64_t keys = longest_keys(p, block_n);
  if (accuracy_splits(keys) > 1) return true;
  const int64_t blocks = ceil_div(keys, block_n);
  return blocks - ceil_div(blocks, splits) >= min_blocks_saved_by_split(decode_stages(p, caps));
}

// CTAs an SM the slot rule counts for the e4m3 decode kernel at most.
constexpr int kFp8DecodeCtasPerSm = 2;

// The split count flash wants for the decode kernel (or p.num_splits,
// clamped), before the workspace rule. The rules and the measurements
// behind them: docs/perf/decode-splits.md.
//   Dense caches: the fewest splits giving about one CTA per SM (0.9 x num_sms).
//   Paged caches, and fp8 caches at head dims 128 to 256: every CTA slot
//   of the GPU (2-4 per SM by shared memory, two at most on an fp8
//   cache), the smallest count whose waves are within 5% as full as the
//   best's (their kernels want more CTAs in flight: the table reads, the
//   dequantisation's latency; a dense fp8 cache at head_dim 64 is faster
//   with the dense rule).
//   Either way at least two K/V blocks per split (but below), at most
//   kMaxSplits, and none when the (batch, K/V head, row block) CTAs alone
//   fill the GPU.
//   Dense bf16/fp16 caches: at least one block per split on two stages
//   (above head dim 128, and the two-stage variant on 99 KiB devices; its
//   counts there are not measured), and none unless the splits take
//   min_blocks_saved_by_split blocks or more off each CTA.
//   Paged bf16/fp16 caches: at least four K/V blocks per split, and none
//   once the CTAs number the SMs (the paged split sweep in decode-splits.md).
int decode_splits_wanted(const AttentionParams& p, const DeviceCaps& caps) {
  if (p.num_splits >= 1) return std::min<int>(p.num_splits, kMaxSplits);
  const int64_t g = p.heads_q / p.heads_kv;
  const int64_t m_blocks = ceil_div(std::max<int64_t>(p.seqlen_q, 1) * g, decode::kBlockM);
  const int64_t units = p.batch * p.heads_kv * m_blocks;
  if (units <= 0) return 1;
  const int64_t block_n = decode::block_n(decode_head_dim(p), fp8_cache(p));
  const int64_t keys = longest_keys(p, block_n);
  const bool paged_16bit = p.block_table != nullptr && !fp8_cache(p);
  const bool dense_16bit = p.block_table == nullptr && !fp8_cache(p);
  // K/V blocks per split: four on a paged 16-bit cache; one on a dense one
  // with one block in flight (two stages), where a block costs one CTA
  // about twice what it does with two in flight (decode_split_pays asks
  // for four saved there); else two.
  const int64_t min_blocks = paged_16bit ? 4 : dense_16bit && decode_stages(p, caps) == 2 ? 1 : 2;
  const int64_t blocks = ceil_div(keys, block_n);
  const int64_t max_splits = std::min<int64_t>(blocks / min_blocks, kMaxSplits);
  const int64_t accurate = std::min(accuracy_splits(keys), max_splits);
  const int64_t num_sms = std::max(caps.num_sms, 1);
  const bool fp8_slots = fp8_cache(p) && decode_head_dim(p) >= 128;
  if (p.block_table == nullptr && !fp8_slots) {
    const int64_t target = ceil_div(9 * num_sms, 10);
    if (units >= target || max_splits <= 1) return static_cast<int>(std::max<int64_t>(accurate, 1));
    const int64_t splits = std::max(accurate, std::min(ceil_div(target, units), max_splits));
    return decode_split_pays(p, caps, splits) ? static_cast<int>(splits) : 1;
  }
  const int smem = decode_smem(p, caps) + 1024;  // + the per-block reservation
  int per_sm = caps.smem_per_sm > 0 ? std::max(1, caps.smem_per_sm / smem) : 1;
  // An e4m3 cache counts two CTAs an SM whatever the shared memory holds
  // (head dim 64: 52 KiB, four by it; its registers, 132-150 a thread,
  // hold three): the split counts measured fastest at head dim 64
  // on an H100 give about two (docs/perf/fp8-decode.md); from head dim 128
  // shared memory holds two. fp8_splits_on_decode asks this rule too.
  if (fp8_cache(p)) per_sm = std::min(per_sm, kFp8DecodeCtasPerSm);
  const int64_t slots = num_sms * per_sm;
  const bool filled = units * 5 >= slots * 4 || (paged_16bit && units >= num_sms);
  if (filled || max_splits <= 1) return static_cast<int>(std::max<int64_t>(accurate, 1));
  auto efficiency = [&](int64_t s) {
    const double waves = static_cast<double>(units * s) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int64_t s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  for (int64_t s = 1; s <= max_splits; ++s) {
    if (efficiency(s) >= 0.95 * best) return static_cast<int>(std::max(s, accurate));
  }
  return static_cast<int>(std::max<int64_t>(accurate, 1));
}

// Splits for the decode or the sm90 kernel, `wanted` being the kernel's
// rule. The combine kernel's grid has one CTA per (batch, head, query) row,
// so flash splits only below 2^31 rows (a split the caller asks for past
// that, validate() refuses). `decode`: the decode kernel's, whose dense
// 16-bit caches drop to one split where the workspace holds fewer splits
// than wanted and those would not pay (decode_split_pays).
void plan_splits(const AttentionParams& p, int wanted, Plan* plan, bool decode = false) {
  const bool combinable = p.batch * p.heads_q * p.seqlen_q <= INT32_MAX;
  plan->splits_wanted = combinable ? wanted : 1;
  plan->workspace_wanted = decode_workspace_bytes(p, plan->splits_wanted);
  plan->num_splits = plan->splits_wanted;
  if (p.num_splits == 0 && plan->num_splits > 1) {
    // flash's own choice never fails for want of workspace: it takes as many
    // splits as the workspace holds (each needs the same bytes), down to
    // none, so that validate() decides the call alone.
    const size_t per_split = decode_workspace_bytes(p, 2) / 2;
    // per_split is 0 only for an empty call (query_kernel_choice plans those too).
    const size_t fit = p.workspace == nullptr ? 1 : per_split == 0 ? SIZE_MAX : p.workspace_bytes / per_split;
    plan->num_splits = static_cast<int>(std::min<size_t>(plan->num_splits, std::max<size_t>(fit, 1)));
    if (decode && !decode_split_pays(p, plan->caps, plan->num_splits)) plan->num_splits = 1;
  }
  plan->workspace_bytes = decode_workspace_bytes(p, plan->num_splits);
}

// ---------------------------------------------------------------- sm90

#if FLASH_HAS_SM90
// The persistent scheduler numbers (query block, head, batch, split) units
// in int, with room for its strided walk (sm90 launch_fwd); 64-row blocks
// bound every tile's count.
bool sm90_units_fit(const AttentionParams& p, int splits) {
  return ceil_div(p.seqlen_q, 64) * p.heads_q * p.batch * std::max(splits, 1) <= INT32_MAX - 4096;
}
#endif

// Null when the Hopper kernel can run `p` on `caps`, else why not.
const char* sm90_problem(const AttentionParams& p, const DeviceCaps& caps, const Plan& plan, char* buf, size_t len) {
#if FLASH_HAS_SM90
  if (caps.major != 9) {
    std::snprintf(buf, len, "Backend::kSm90 needs an sm_90 GPU; device %d is sm_%d%d", caps.device, caps.major,
                  caps.minor);
    return buf;
  }
  if (!caps.tma_encoder) {
    return "Backend::kSm90: the CUDA driver offers no TMA tensor-map encoder (cuTensorMapEncodeTiled); use "
           "Backend::kAuto or kSm80";
  }
  if (sm90::num_candidates(sm90_head_dim(p), plan.mask != MaskVariant::kTail) == 0) {
    std::snprintf(buf, len,
                  "Backend::kSm90 has no kernel for head_dim %lld in this build (it runs a head dim on the next of "
                  "64, 96, 128, 192, 256 in FLASH_HEAD_DIMS; with an fp8 cache, of 64, 128, 192, 256)",
                  static_cast<long long>(width(p)));
    return buf;
  }
  // An fp8 cache's K and V are copied with cp.async (ConvertProducer), not TMA.
  const bool fp8 = fp8_cache(p);
  if (fp8 && p.num_splits > 1) {
    return "Backend::kSm90 does not split calls on an fp8 cache; use num_splits 0 or 1, or Backend::kDecode";
  }
  if (p.block_table != nullptr && !fp8) {
    if (const char* why = sm90::paged_problem(p.page_size, p.num_pages)) {
      std::snprintf(buf, len, "Backend::kSm90 cannot load this paged cache: %s; use Backend::kAuto, kSm80 or kDecode",
                    why);
      return buf;
    }
  }
  if ((p.block_table != nullptr || p.seqused_k != nullptr) && p.num_splits > 1) {
    return "Backend::kSm90 does not split calls with seqused_k or a paged cache; use num_splits 0 or 1, or "
           "Backend::kSm80 or kDecode";
  }
  if ((p.cu_seqlens_q != nullptr && p.total_q <= 0) || (p.cu_seqlens_k != nullptr && p.total_k <= 0)) {
    return "Backend::kSm90 runs varlen calls only with total_q / total_k given; use Backend::kAuto or kSm80";
  }
  if (!sm90_units_fit(p, 1)) {
    return "Backend::kSm90 needs fewer than 2^31 (64-row query block, head, batch) units; use Backend::kSm80";
  }
  // A call with no query rows launches nothing, so its tensors need no map.
  if (p.batch == 0 || p.seqlen_q == 0) return nullptr;
  const FwdParams f = make_fwd_params(p, caps);
  const sm90::TmaTensors t = sm90::tma_tensors(f);
  const char* const names[4] = {"q", "k", "v", "o"};
  const sm90::TmaTensor* const tensors[4] = {&t.q, &t.k, &t.v, &t.o};
  for (int i = 0; i < 4; ++i) {
    if (fp8 && (i == 1 || i == 2)) {
      if (reinterpret_cast<uintptr_t>(tensors[i]->base) % 16 != 0) {
        std::snprintf(buf, len, "Backend::kSm90 needs the fp8 cache's %s 16-byte aligned; use Backend::kDecode",
                      names[i]);
        return buf;
      }
      continue;
    }
    if (const char* why = sm90::tma_problem(*tensors[i])) {
      std::snprintf(buf, len, "Backend::kSm90 cannot describe %s to TMA: %s; use Backend::kAuto or kSm80",
                    names[i], why);
      return buf;
    }
  }
  return nullptr;
#else
  (void)p, (void)caps, (void)plan, (void)buf, (void)len;
  return "Backend::kSm90: this build has no Hopper kernel (add 90a to CMAKE_CUDA_ARCHITECTURES)";
#endif
}

void add(Plan* plan, Backend backend, int index) {
  if (plan->num_candidates < kMaxPlanCandidates) plan->candidates[plan->num_candidates++] = Candidate{backend, index};
}

// ---------------------------------------------------------------- MLA

// Splits for the MLA kernels (or p.num_splits, clamped), whose CTAs take
// `block_m` packed rows and `block_n`-key blocks, one CTA an SM (their
// shared memory): the dense decode rule, none when the (batch, K/V head,
// row block) CTAs reach 0.9 x num_sms, else the fewest giving about that
// many, at least two key blocks a split.
int mla_splits_wanted(const AttentionParams& p, const DeviceCaps& caps, int64_t block_m, int64_t block_n) {
  if (p.num_splits >= 1) return std::min<int>(p.num_splits, kMaxSplits);
  const int64_t g = p.heads_q / p.heads_kv;
  const int64_t units = p.batch * p.heads_kv * ceil_div(std::max<int64_t>(p.seqlen_q, 1) * g, block_m);
  if (units <= 0) return 1;
  const int64_t keys = longest_keys(p, block_n);
  const int64_t max_splits = std::min<int64_t>(ceil_div(keys, block_n) / 2, kMaxSplits);
  const int64_t accurate = std::min(accuracy_splits(keys), max_splits);
  const int64_t target = ceil_div(9 * std::max(caps.num_sms, 1), 10);
  if (units >= target || max_splits <= 1) return static_cast<int>(std::max<int64_t>(accurate, 1));
  return static_cast<int>(std::max(accurate, std::min(ceil_div(target, units), max_splits)));
}

constexpr const char* kMlaShapeName = "MLA (head_dim 576, head_dim_v 512)";
constexpr const char* kWideShapeName = "head_dim 512";

// The MLA and split-D kernels number packed rows (seqlen_q x query heads a
// K/V head) in int.
Status check_packed_rows(const AttentionParams& p, const char* shape) {
  if (p.seqlen_q * (p.heads_q / p.heads_kv) > (int64_t{1} << 30)) {
    return make_status(StatusCode::kUnsupported,
                       "%s takes at most 2^30 query rows per K/V head and sequence (seqlen_q x heads_q / heads_kv); "
                       "split the call",
                       shape);
  }
  return Status{};
}

// The split-D decode kernel's one candidate (`wide`: head dim 512 with its
// own V, else MLA), with MLA's split rule over its blocks: the default
// (candidate 0) where the device's shared memory holds it, else the variant
// for devices with 99 KiB a block (candidate 1; decode::split_d_smem).
Status plan_split_d(const AttentionParams& p, const DeviceCaps& caps, bool wide, const char* shape, Plan* plan) {
  const int variant = caps.max_smem > 0 && caps.max_smem < decode::split_d_smem(wide, 0) ? 1 : 0;
  const int smem = decode::split_d_smem(wide, variant);
  if (caps.max_smem > 0 && caps.max_smem < smem) {
    return make_status(StatusCode::kUnsupported,
                       "%s on the split-D decode kernel needs %d bytes of shared memory per block (its smallest "
                       "variant); device %d (sm_%d%d) allows %d",
                       shape, smem, caps.device, caps.major, caps.minor, caps.max_smem);
  }
  add(plan, Backend::kDecode, variant);
  plan_splits(p, mla_splits_wanted(p, caps, decode::kMlaBlockM, decode::split_d_block_n(wide, variant)), plan);
  return Status{};
}

// MLA's (576, 512): the Hopper MLA kernel on sm_90 (Backend::kAuto or
// kSm90), else the split-D decode kernel (kAuto or kDecode).
Status plan_mla(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) {
  const Backend b = p.backend;
  if (const Status rows = check_packed_rows(p, kMlaShapeName); !rows.ok()) return rows;
  bool hopper = FLASH_HAS_SM90 && caps.major == 9;
#if FLASH_HAS_SM90
  if (b == Backend::kAuto && caps.max_smem > 0 && caps.max_smem < sm90::kMlaSmemBytes) hopper = false;
#endif
  if (b == Backend::kSm90 || (b == Backend::kAuto && hopper)) {
#if FLASH_HAS_SM90
    if (caps.major != 9) {
      return make_status(StatusCode::kUnsupported,
                         "Backend::kSm90 runs MLA (head_dim 576, head_dim_v 512) on an sm_90 GPU only; device %d is "
                         "sm_%d%d (Backend::kAuto takes the split-D decode kernel there)",
                         caps.device, caps.major, caps.minor);
    }
    if (caps.max_smem > 0 && caps.max_smem < sm90::kMlaSmemBytes) {
      return make_status(StatusCode::kUnsupported,
                         "the Hopper MLA kernel needs %d bytes of shared memory per block; device %d allows %d",
                         sm90::kMlaSmemBytes, caps.device, caps.max_smem);
    }
    add(plan, Backend::kSm90, 0);
    plan_splits(p, mla_splits_wanted(p, caps, 64, 64), plan);
    return Status{};
#else
    return make_status(StatusCode::kUnsupported,
                       "Backend::kSm90: this build has no Hopper kernel (add 90a to CMAKE_CUDA_ARCHITECTURES); "
                       "Backend::kAuto runs MLA on the split-D decode kernel");
#endif
  }
  return plan_split_d(p, caps, /*wide=*/false, kMlaShapeName, plan);
}

// Head dim 512 with its own V: the split-D decode kernel, any seqlen_q.
// FP8 prefill (q_dtype e4m3; validate() has limited the call to what the
// kernel takes): the Hopper FP8 kernel, unsplit, V^T in the workspace.
Status plan_fp8_prefill(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) {
#if FLASH_HAS_SM90
  if (!fp8_head_dim(p.head_dim) || kernel_head_dim(p.head_dim, KernelSet::kFp8) != p.head_dim) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill at head_dim %lld needs it in FLASH_HEAD_DIMS (this build has: %s)",
                       static_cast<long long>(p.head_dim), FLASH_HEAD_DIMS_STRING);
  }
  if (caps.major != 9) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill (q_dtype kFloat8E4M3) runs on sm_90 (Hopper) only; device %d is sm_%d%d",
                       caps.device, caps.major, caps.minor);
  }
  if (!caps.tma_encoder) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill needs the driver's tensor-map encoder (cuTensorMapEncodeTiled), which this "
                       "driver does not offer");
  }
  if (ceil_div(p.seqlen_q, 64) * p.heads_q * p.batch > INT32_MAX - 4096) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill needs fewer than 2^31 (64-row query block, head, batch) units");
  }
  const int64_t keys = p.cu_seqlens_k != nullptr ? p.total_k : p.batch * p.seqlen_k;
  if (sm90::fp8_vt_cols(keys, p.batch) > sm90::kTmaMaxRows) {
    return make_status(StatusCode::kUnsupported,
                       "the FP8 prefill takes fewer than 2^31 keys in all (with %lld a sequence of padding)",
                       static_cast<long long>(sm90::kFp8VtSlack));
  }
  if (p.batch > 0 && p.seqlen_q > 0) {
    const FwdParams f = make_fwd_params(p, caps);
    sm90::TmaTensors t = sm90::tma_tensors(f);
    t.q.elem_bytes = t.k.elem_bytes = t.v.elem_bytes = 1;
    // No keys (dense seqlen_k 0): every row sees none, K is never loaded;
    // its map is of one row of one sequence all the same (launch_fp8's).
    for (sm90::TmaTensor* kv : {&t.k, &t.v}) {
      if (kv->rows == 0) kv->rows = kv->batch = 1;
    }
    const char* const names[4] = {"q", "k", "v", "o"};
    const sm90::TmaTensor* const tensors[4] = {&t.q, &t.k, &t.v, &t.o};
    for (int i = 0; i < 4; ++i) {
      if (const char* why = sm90::tma_problem(*tensors[i])) {
        return make_status(StatusCode::kUnsupported, "the FP8 prefill cannot describe %s to TMA: %s", names[i], why);
      }
    }
  }
  // make_plan's mask: kTail, kCausal (a right edge) or kWindow (a left
  // edge); validate() refuses the score modifiers.
  plan->fp8_prefill = true;
  add(plan, Backend::kSm90, 0);
  plan->num_splits = 1;
  plan->workspace_bytes = plan->workspace_wanted = fp8_prefill_workspace_bytes(p);
  return Status{};
#else
  (void)p, (void)caps, (void)plan;
  return make_status(StatusCode::kUnsupported,
                     "the FP8 prefill (q_dtype kFloat8E4M3) runs on the Hopper kernel; this build has none (add 90a "
                     "to CMAKE_CUDA_ARCHITECTURES)");
#endif
}

Status plan_wide(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) {
  if (const Status rows = check_packed_rows(p, kWideShapeName); !rows.ok()) return rows;
  return plan_split_d(p, caps, /*wide=*/true, kWideShapeName, plan);
}

// ---------------------------------------------------------------- sm80

// The sm80 configurations whose shared memory fits, in order; a
// fallback-only one only when nothing before it fits.
void add_sm80(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) {
  bool any = false;
  const int d = sm80_head_dim(p);
  for (int i = 0; i < sm80::num_candidates(d); ++i) {
    if (caps.max_smem > 0 && sm80::candidate_smem_bytes(d, i) > caps.max_smem) continue;
    if (any && sm80::candidate_is_fallback(d, i)) continue;
    add(plan, Backend::kSm80, i);
    any = true;
  }
}

int sm80_min_smem(const AttentionParams& p) {
  int least = 0;
  const int d = sm80_head_dim(p);
  for (int i = 0; i < sm80::num_candidates(d); ++i) {
    const int bytes = sm80::candidate_smem_bytes(d, i);
    if (least == 0 || bytes < least) least = bytes;
  }
  return least;
}

// Calls the Hopper kernel takes only unsplit (KV caches, fp8 caches):
// whether flash's own choice would split this one, which sends it to a
// kernel that splits; `split` gets that split's plan.
bool splits_elsewhere(const AttentionParams& p, const DeviceCaps& caps, Plan* split) {
  plan_splits(p, prefill_splits_wanted(p, caps), split);
  return split->num_splits > 1;
}

// The decode kernel's grid limits for the split count the plan runs.
// validate checks them with the caller's num_splits, for calls that name
// the decode kernel or a split count; flash's own count, and the fp8-cache
// calls kAuto sends there at any seqlen_q, are checked here.
Status check_decode_grid_as_planned(const AttentionParams& p, const Plan& plan) {
  AttentionParams as_run = p;
  as_run.backend = Backend::kDecode;
  as_run.num_splits = plan.num_splits;
  return check_decode_grid(as_run);
}

// An fp8-cache call the Hopper kernel would run with too few tiles or too
// many keys (the prefill rule would split it) moves to the decode kernel
// when that kernel, by its own rule and the caller's workspace, splits it;
// `split` gets the decode kernel's split plan, whose workspace is the one
// reported: the prefill rule's would move calls the decode kernel then runs
// unsplit.
bool fp8_splits_on_decode(const AttentionParams& p, const DeviceCaps& caps, Plan* split) {
  Plan prefill;
  plan_splits(p, prefill_splits_wanted(p, caps), &prefill);
  if (prefill.splits_wanted <= 1 || !decode_fits(p, caps)) return false;
  plan_splits(p, decode_splits_wanted(p, caps), split, /*decode=*/true);
  return split->num_splits > 1;
}

// An unsplit Hopper plan of such a call still reports the split's
// workspace as wanted, so that attention_workspace_size() returns the bytes
// with which the call moves to the split kernel.
void want_split_workspace(const Plan& split, Plan* plan) {
  if (split.splits_wanted > 1) {
    plan->splits_wanted = split.splits_wanted;
    plan->workspace_wanted = split.workspace_wanted;
  }
}

}  // namespace

bool uses_engine_features(const AttentionParams& p) noexcept {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr ||
         p.block_table != nullptr || p.window_left >= 0 || (p.window_right >= 0 && !p.causal) ||
         p.softcap > 0.f || p.alibi_slopes != nullptr || p.num_splits > 1 || p.kv_dtype != KvDType::kSame;
}

int split_row_width(const AttentionParams& p) noexcept {
  if (mla_shape(p.head_dim, p.head_dim_v)) return static_cast<int>(kMlaHeadDim);  // combine_kernel<576>
  if (wide_shape(p.head_dim, p.head_dim_v)) return static_cast<int>(kWideHeadDim);
  // An fp8 cache's kernels (decode and sm90) have the multiples of 64.
  if (fp8_cache(p)) return workspace_head_dim(width(p), KernelSet::kFp8);
  const bool hopper = FLASH_HAS_SM90 && (p.backend == Backend::kAuto || p.backend == Backend::kSm90);
  return workspace_head_dim(width(p), hopper ? KernelSet::kSm90 : KernelSet::kAny);
}

size_t fp8_prefill_workspace_bytes(const AttentionParams& p) noexcept {
  const int64_t keys = p.cu_seqlens_k != nullptr ? p.total_k : p.batch * p.seqlen_k;
  if (keys < 0 || p.batch < 0 || p.heads_kv < 0 || p.head_dim < 0) return SIZE_MAX;
  uint64_t bytes = static_cast<uint64_t>(sm90::fp8_vt_cols(keys, p.batch));
  for (const int64_t factor : {p.heads_kv, p.head_dim}) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(factor), &bytes)) return SIZE_MAX;
  }
  return bytes > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(bytes);
}

size_t decode_workspace_bytes(const AttentionParams& p, int num_splits) noexcept {
  if (num_splits <= 1) return 0;
  // num_splits * batch * heads_q * seqlen_q rows of W + 1 floats
  // (split_row_width).
  uint64_t bytes = static_cast<uint64_t>(num_splits);
  for (const int64_t factor :
       {p.batch, p.heads_q, p.seqlen_q, int64_t{split_row_width(p)} + 1, int64_t{sizeof(float)}}) {
    if (factor < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(factor), &bytes)) return SIZE_MAX;
  }
  return bytes > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(bytes);
}

Status make_plan(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) noexcept {
  *plan = Plan{};
  plan->caps = caps;
  plan->window_left = kernel_window_left(p);
  plan->window_right = kernel_window_right(p);
  plan->mask = mask_variant(p, plan->window_left, plan->window_right);

  if (mla_shape(p.head_dim, p.head_dim_v)) return plan_mla(p, caps, plan);
  if (wide_shape(p.head_dim, p.head_dim_v)) return plan_wide(p, caps, plan);
  if (sm80_head_dim(p) == 0) {
    return make_status(StatusCode::kUnsupported, "head_dim %lld is wider than every head dim compiled into this build; "
                       "rebuild with one at least as wide in FLASH_HEAD_DIMS (this build has: %s)",
                       static_cast<long long>(width(p)), FLASH_HEAD_DIMS_STRING);
  }
  const Backend b = p.backend;
  if (p.q_dtype != KvDType::kSame) return plan_fp8_prefill(p, caps, plan);
  if (fp8_cache(p)) {
    // validate() leaves kAuto, kDecode or kSm90.
    if (decode_head_dim(p) == 0) {
      return make_status(StatusCode::kUnsupported,
                         "an fp8 cache runs on decode kernels of head dims 64, 128, 192 or 256; head_dim %lld needs "
                         "one at least as wide in FLASH_HEAD_DIMS (this build has: %s)",
                         static_cast<long long>(width(p)), FLASH_HEAD_DIMS_STRING);
    }
    // Prefill-sized calls on Hopper: the KV-cache kernel, which widens the
    // e4m3 rows in shared memory, unsplit. Calls flash would split (too few
    // tiles for the GPU, or too many keys for one accumulation) and that the
    // decode kernel splits, and short queries, take the decode kernel, as
    // the sm80 kernel takes such bf16 calls.
    if (b == Backend::kSm90 || (b == Backend::kAuto && p.seqlen_q > 16)) {
      char why[192];
      const char* sm90_why = sm90_problem(p, caps, *plan, why, sizeof(why));
      Plan split;
      if (sm90_why == nullptr && b == Backend::kAuto && fp8_splits_on_decode(p, caps, &split)) {
        sm90_why = "fp8 cache calls that flash splits run on the decode kernel";
      }
      if (sm90_why == nullptr) {
#if FLASH_HAS_SM90
        add(plan, Backend::kSm90, sm90::cache_candidate(sm90_head_dim(p), true));
#endif
        plan_splits(p, 1, plan);
        want_split_workspace(split, plan);
        return Status{};
      }
      if (b == Backend::kSm90) return make_status(StatusCode::kUnsupported, "%s", sm90_why);
    }
    if (!decode_fits(p, caps)) {
      return make_status(StatusCode::kUnsupported,
                         "the decode kernel for an fp8 cache at head_dim %lld needs %d KiB of shared memory per "
                         "block; device %d allows %d KiB",
                         static_cast<long long>(width(p)), decode_smem(p, caps) / 1024, caps.device, caps.max_smem / 1024);
    }
    add(plan, Backend::kDecode, decode_variant(p, caps));
    plan_splits(p, decode_splits_wanted(p, caps), plan, /*decode=*/true);
    return check_decode_grid_as_planned(p, *plan);
  }
  // Whether the Hopper kernel could run the call (only asked when requested).
  char why[192];
  const char* sm90_why =
      b == Backend::kAuto || b == Backend::kSm90 ? sm90_problem(p, caps, *plan, why, sizeof(why)) : "not requested";

  // Short queries: the decode kernel (GQA rows packed, keys split).
  const bool want_decode = b == Backend::kDecode || (b == Backend::kAuto && p.seqlen_q <= 16);
  if (want_decode) {
    if (decode_fits(p, caps)) {
      add(plan, Backend::kDecode, decode_variant(p, caps));
      plan_splits(p, decode_splits_wanted(p, caps), plan, /*decode=*/true);
      return check_decode_grid_as_planned(p, *plan);
    }
    if (b == Backend::kDecode) {
      return make_status(StatusCode::kUnsupported, "the split-KV decode kernel (Backend::kDecode) for head_dim %lld needs "
                         "%d KiB of shared memory per block; device %d allows %d KiB",
                         static_cast<long long>(width(p)), decode_smem(p, caps) / 1024, caps.device,
                         caps.max_smem / 1024);
    }
  }

  if (b == Backend::kAuto || b == Backend::kSm90) {
    // KV-cache calls (seqused_k, pages) run the Hopper kernel unsplit, in
    // one configuration: flash's own choice takes the sm80 kernel where it
    // would split them (long key ranges, too few tiles to fill the GPU).
    // "Would split" counts the workspace: without one nothing splits, and
    // the Hopper kernel takes the call (want_split_workspace).
    const bool cache = p.block_table != nullptr || p.seqused_k != nullptr;
    Plan split;
    if (sm90_why == nullptr && cache && b == Backend::kAuto && splits_elsewhere(p, caps, &split)) {
      sm90_why = "KV-cache calls that flash splits run on the sm80 kernel";
    }
    if (sm90_why == nullptr) {
#if FLASH_HAS_SM90
      const int hd = sm90_head_dim(p);
      plan_splits(p, cache ? 1 : prefill_splits_wanted(p, caps), plan);
      // flash's own count splits only calls of few tiles; a count the
      // caller asks for can take the units past int.
      if (!sm90_units_fit(p, plan->num_splits)) {
        return make_status(StatusCode::kUnsupported,
                           "Backend::kSm90 numbers (64-row query block, head, batch, split) units in int: %lld "
                           "units x %d splits is over 2^31 - 4096; use fewer splits",
                           static_cast<long long>(ceil_div(p.seqlen_q, 64) * p.heads_q * p.batch),
                           plan->num_splits);
      }
      // At head dim 96 score-modifier calls run 128 x 128 alone: the general
      // 192-row variant spills, and these calls are not tuned, so the
      // 192-row score-modifier kernels are not compiled (launch.cuh).
      if (cache) {
        add(plan, Backend::kSm90, sm90::cache_candidate(hd, false));
      } else if (hd == 96 && plan->mask == MaskVariant::kScoreMod) {
        add(plan, Backend::kSm90, sm90::kScoreModCandidate96);
      } else {
        const int candidates = sm90::num_candidates(hd, plan->mask != MaskVariant::kTail);
        // Score modifiers (ALiBi, softcap) under a short left window at head
        // dim 64: the 128-row tile first. The 192-row one's general
        // score-modifier kernel spills, and with a window of a block or two
        // nearly all its rows straddle a mask edge, each scored by the
        // per-element formula. ALiBi with a right edge at the diagonal and
        // without a softcap, an LSE or splits keeps the 192-row tile: its
        // kernel there puts ALiBi's column term on the tensor cores
        // (sm90/launch.cuh, run_candidate; docs/perf/score-features.md).
        const bool alibi_mma = sm90::alibi_on_tensor_cores(p.alibi_slopes != nullptr, p.softcap, plan->window_right,
                                                           p.lse != nullptr, plan->num_splits);
        const bool swap = candidates > 1 && plan->mask == MaskVariant::kScoreMod && hd == 64 && p.window_left >= 0 &&
                          p.window_left <= 256 && !alibi_mma;
        for (int i = 0; i < candidates; ++i) add(plan, Backend::kSm90, swap && i < 2 ? 1 - i : i);
      }
      want_split_workspace(split, plan);
#endif
    } else if (b == Backend::kSm90) {
      return make_status(StatusCode::kUnsupported, "%s", sm90_why);
    }
  }
  // The sm80 kernel: forced, the fallback candidates behind an unsplit
  // Hopper plan (for the autotuner), or the kernel of the call.
  if (b == Backend::kSm80 || b == Backend::kAuto) {
    const bool first = plan->num_candidates == 0;
    if (first || plan->num_splits == 1) add_sm80(p, caps, plan);
    if (first) plan_splits(p, prefill_splits_wanted(p, caps), plan);
  }
  if (plan->num_candidates == 0) {
    return make_status(StatusCode::kUnsupported, "head_dim %lld needs %d KiB of shared memory per block; device %d (sm_%d%d) allows %d KiB",
                       static_cast<long long>(width(p)), sm80_min_smem(p) / 1024, caps.device, caps.major,
                       caps.minor, caps.max_smem / 1024);
  }
  // A split call is not tuned: its candidates share the split count, which
  // the tuned shape classes do not record.
  plan->tunable = !uses_engine_features(p) && plan->num_splits == 1;
  return Status{};
}

}  // namespace flash::detail
