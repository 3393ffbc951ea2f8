#include "autotuner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "flash/version.h"
#include "src/head_dims.h"
#include "tune_cache.h"

namespace flash::detail {
namespace {

constexpr int kTimedLaunches = 5;   // samples; the median is kept
constexpr int kLaunchesPerSample = 3;  // back to back, so host work between launches (the sm90
                                       // path encodes its tensor maps) overlaps the GPU's

struct AutotuneState {
  TuneCache cache;
  std::once_flag file_once;
  std::mutex save_mutex;
  std::mutex device_mutex;
  std::unordered_map<int, std::string> device_names;
};

AutotuneState& state() {
  static AutotuneState s;
  return s;
}

bool env_autotune() {
  static const bool on = [] {
    const char* v = std::getenv("FLASH_AUTOTUNE");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

const std::string& env_cache_path() {
  static const std::string path = [] {
    const char* v = std::getenv("FLASH_AUTOTUNE_CACHE");
    return v != nullptr ? std::string(v) : std::string();
  }();
  return path;
}

// The device name is part of every key; cudaGetDeviceProperties is slow, so
// it is read once per device.
bool device_name(int device, std::string* name) {
  AutotuneState& s = state();
  std::lock_guard<std::mutex> lock(s.device_mutex);
  auto it = s.device_names.find(device);
  if (it == s.device_names.end()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return false;
    it = s.device_names.emplace(device, prop.name).first;
  }
  *name = it->second;
  return true;
}

CacheFileHeader file_header(const std::string& gpu) {
  CacheFileHeader h;
  h.flash_version = FLASH_VERSION_STRING;
  h.cuda_runtime = 0;
  (void)cudaRuntimeGetVersion(&h.cuda_runtime);
  h.gpu = gpu;
  return h;
}

// Median of kTimedLaunches launches of `c`, in ms; false if it would not launch.
bool time_candidate(const Plan& plan, const Candidate& c, const AttentionParams& s, cudaStream_t stream,
                    cudaEvent_t start, cudaEvent_t stop, float* median_ms) {
  if (launch(plan, c, s, stream) != cudaSuccess) return false;  // also the warm-up
  float ms[kTimedLaunches];
  for (int r = 0; r < kTimedLaunches; ++r) {
    if (cudaEventRecord(start, stream) != cudaSuccess) return false;
    for (int l = 0; l < kLaunchesPerSample; ++l) {
      if (launch(plan, c, s, stream) != cudaSuccess) return false;
    }
    if (cudaEventRecord(stop, stream) != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms[r], start, stop) != cudaSuccess) {
      return false;
    }
    ms[r] /= kLaunchesPerSample;
  }
  std::sort(ms, ms + kTimedLaunches);
  *median_ms = ms[kTimedLaunches / 2];
  return true;
}

// Times every candidate on scratch outputs (the caller's O and LSE are never
// touched); *best = -1 when none launched.
cudaError_t tune(const AttentionParams& p, const Plan& plan, cudaStream_t stream, int* best, float* best_ms) {
  const Candidate* cands = plan.candidates;
  const int n = plan.num_candidates;
  *best = -1;
  // Allocation and synchronisation below must not invalidate a graph that
  // another thread is capturing in global mode.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  AttentionParams s = p;
  const int64_t dv = value_head_dim(p.head_dim, p.head_dim_v);
  const size_t o_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * dv);
  void* o = nullptr;
  float* lse = nullptr;
  cudaError_t err = cudaMalloc(&o, o_elems * 2);
  if (err == cudaSuccess && p.lse != nullptr) {
    err = cudaMalloc(reinterpret_cast<void**>(&lse), static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q) * 4);
  }
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  if (err == cudaSuccess) err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  if (err == cudaSuccess) {
    s.o = o;
    s.lse = lse;
    s.o_head_stride = dv;
    s.o_seq_stride = p.heads_q * dv;
    s.o_batch_stride = p.seqlen_q * s.o_seq_stride;
    for (int i = 0; i < n; ++i) {
      float ms = 0.f;
      if (!time_candidate(plan, cands[i], s, stream, start, stop, &ms)) {
        // A launch-time refusal is not sticky; an asynchronous fault is, and ends tuning.
        (void)cudaGetLastError();
        err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) break;
        continue;
      }
      if (*best < 0 || ms < *best_ms) {
        *best = i;
        *best_ms = ms;
      }
    }
  }
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  if (o != nullptr) (void)cudaFree(o);
  if (lse != nullptr) (void)cudaFree(lse);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  if (err == cudaErrorMemoryAllocation) {
    // No room for scratch outputs: not a broken device. Clear the (non-sticky)
    // error and let the caller run the heuristic's choice; a later call retries.
    (void)cudaGetLastError();
    *best = -1;
    return cudaSuccess;
  }
  return err;
}

cudaError_t select_or_tune(const AttentionParams& p, const Plan& plan, cudaStream_t stream, bool may_tune,
                           Selection* selection);

}  // namespace

bool autotune_requested(const AttentionParams& p) { return p.autotune || env_autotune(); }

cudaError_t select_candidate(const AttentionParams& p, const Plan& plan, cudaStream_t stream, bool may_tune,
                             Selection* selection) {
  selection->candidate = plan.candidates[0];
  selection->source = ChoiceSource::kHeuristic;
  // The API is noexcept: strings, maps and locks here may throw (bad_alloc,
  // system_error); then the heuristic's choice stands.
  try {
    return plan.tunable ? select_or_tune(p, plan, stream, may_tune, selection) : cudaSuccess;
  } catch (...) {
    selection->candidate = plan.candidates[0];
    selection->source = ChoiceSource::kHeuristic;
    return cudaSuccess;
  }
}

namespace {

cudaError_t select_or_tune(const AttentionParams& p, const Plan& plan, cudaStream_t stream, bool may_tune,
                           Selection* selection) {
  const DeviceCaps& caps = plan.caps;
  const Candidate* cands = plan.candidates;
  const int n = plan.num_candidates;
  const std::string& path = env_cache_path();
  const bool requested = autotune_requested(p);
  if ((!requested && path.empty()) || n <= 1) return cudaSuccess;

  std::string gpu;
  if (!device_name(caps.device, &gpu)) return cudaSuccess;  // no key: the heuristic
  AutotuneState& s = state();
  if (!path.empty()) {
    // Read once per process. Warnings go to stderr: the file was named by the
    // user's environment, and a silently ignored cache would hide a problem.
    std::call_once(s.file_once, [&] {
      std::string warning;
      if (!s.cache.load_file(path, file_header(gpu), &warning) && !warning.empty()) {
        std::fprintf(stderr, "%s\n", warning.c_str());
      }
    });
  }
  // A forced backend tunes among fewer configurations: keep its results apart.
  std::string key = make_tune_key(p, gpu, caps.num_sms).str();
  if (p.backend == Backend::kSm80) key += "|sm80";
  if (p.backend == Backend::kSm90) key += "|sm90";
  if (const std::optional<CacheEntry> hit = s.cache.lookup(key)) {
    for (int i = 0; i < n; ++i) {
      KernelChoice c;
      if (describe(plan, cands[i], p, &c) && hit->config == c.name) {
        selection->candidate = cands[i];
        selection->source = hit->source;
        return cudaSuccess;
      }
    }
    // A configuration this build does not have (an older cache file): retune below.
  }
  if (!requested || !may_tune) return cudaSuccess;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return cudaSuccess;
  if (decide_tune_action(true, capture != cudaStreamCaptureStatusNone, false) != TuneAction::kTune) {
    return cudaSuccess;
  }
  int best = -1;
  float best_ms = 0.f;
  const cudaError_t err = tune(p, plan, stream, &best, &best_ms);
  if (best < 0) return err;
  KernelChoice c;
  describe(plan, cands[best], p, &c);
  s.cache.store(key, CacheEntry{c.name, best_ms, ChoiceSource::kTuned});
  selection->candidate = cands[best];
  selection->source = ChoiceSource::kTuned;
  if (!path.empty()) {
    std::lock_guard<std::mutex> lock(s.save_mutex);
    std::string error;
    if (!s.cache.save_file(path, file_header(gpu), &error)) std::fprintf(stderr, "%s\n", error.c_str());
  }
  return err;
}

}  // namespace

}  // namespace flash::detail
