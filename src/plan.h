// The plan of one call: every decision about how flash runs a validated
// AttentionParams on a device, made once, by a pure function of the two
// (no CUDA call, no global state), so it is tested without a GPU.
// attention_forward, query_kernel_choice and attention_workspace_size all
// read the same plan; launch() (dispatch.h) only executes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash/flash.hpp"
#include "kernels/params.h"

namespace flash::detail {

// What the device offers; filled by query_device() (attention.cpp) or by a test.
struct DeviceCaps {
  int device = 0;
  int major = 0;
  int minor = 0;
  int num_sms = 0;
  int max_smem = 0;     // dynamic shared memory a block may opt in to, bytes (0: unknown, no limit applied)
  int smem_per_sm = 0;  // shared memory per multiprocessor, bytes (0: unknown)
  bool tma_encoder = true;  // the driver offers cuTensorMapEncodeTiled (the Hopper kernel needs it)
};

// One compiled configuration: a kernel family and its candidate index.
struct Candidate {
  Backend backend = Backend::kSm80;
  int index = 0;
};

inline constexpr int kMaxPlanCandidates = 8;
// Upper bound of num_splits, the caller's or flash's.
inline constexpr int kMaxSplits = 128;
// flash's own split choice keeps every float32 accumulation of P V within
// this many keys (plan.cpp, accuracy_splits) ...
inline constexpr int64_t kKeysPerAccumulation = int64_t{1} << 18;
// ... and, when it splits a Hopper call to fill the GPU, gives each split at
// least this many 128-key blocks, and all splits at most this many bytes of
// workspace.
inline constexpr int64_t kMinBlocksPerSplit = 4;
inline constexpr size_t kMaxSplitWorkspace = size_t{1} << 30;
// The decode kernel on a dense 16-bit cache splits the keys only where that
// takes at least this many of its 64-key blocks off each CTA: the combine
// kernel a split adds costs about as much as five blocks of one CTA's time
// with two blocks in flight (three stages), four with one (two stages: head
// dims above 128, measured; the two-stage variant for 99 KiB devices, not
// measured) (docs/perf/decode-splits.md, "Short caches").
inline constexpr int64_t min_blocks_saved_by_split(int stages) { return stages > 2 ? 5 : 4; }

struct Plan {
  DeviceCaps caps;
  // The configurations that may run the call, the heuristic's pick first;
  // the autotuner chooses among them when the call is tunable.
  Candidate candidates[kMaxPlanCandidates];
  int num_candidates = 0;
  bool tunable = false;  // dense calls on the sm80/sm90 kernels (shape classes of the autotuner)

  MaskVariant mask = MaskVariant::kTail;  // which compiled mask variant runs (one decision for every kernel)
  int window_left = -1;                   // the window as the kernels see it: causal is (-1, 0),
  int window_right = -1;                  // sides past any sequence length are -1

  // Split-KV (every kernel). num_splits is what runs,
  // after the workspace rule: with num_splits = 0 flash takes the largest
  // count up to its choice whose workspace the caller's holds (none given:
  // 1). splits_wanted / workspace_wanted are flash's choice before that rule
  // (what attention_workspace_size reports).
  int num_splits = 1;
  // The FP8 prefill (q_dtype e4m3; kernels/sm90/fp8_kernel.cuh): candidate
  // {kSm90, 0} runs it, V^T in the workspace.
  bool fp8_prefill = false;
  size_t workspace_bytes = 0;
  int splits_wanted = 1;
  size_t workspace_wanted = 0;
};

// The plan for `p` (already accepted by validate()) on a device with `caps`,
// or kUnsupported with the reason no compiled kernel can run it there.
Status make_plan(const AttentionParams& p, const DeviceCaps& caps, Plan* plan) noexcept;

// Whether `p` uses any inference-engine feature: varlen, seqused_k, a paged
// cache, a sliding window, a softcap, ALiBi or a requested split (such calls are
// not autotuned).
bool uses_engine_features(const AttentionParams& p) noexcept;

// Bytes of split-KV workspace `num_splits` splits need for `p` (0 for one
// split); SIZE_MAX when the size does not fit in size_t.
// Columns of one split partial row in the workspace: the widest compiled
// head dim a kernel that may run p writes (the Hopper kernel's counted only
// when the build has it and p.backend is kAuto or kSm90).
int split_row_width(const AttentionParams& p) noexcept;
// Bytes of workspace the FP8 prefill (q_dtype e4m3) needs for V^T
// (kernels/sm90/fp8_vt.h); SIZE_MAX when it does not fit in size_t.
size_t fp8_prefill_workspace_bytes(const AttentionParams& p) noexcept;
size_t decode_workspace_bytes(const AttentionParams& p, int num_splits) noexcept;

}  // namespace flash::detail
