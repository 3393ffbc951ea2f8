// The autotuner's bookkeeping, host-only and GPU-free so it is tested in CI:
// tuning keys, the thread-safe in-memory cache, the persistent JSON file,
// and the rule that decides between cache, tuning and heuristic.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "flash/flash.hpp"

namespace flash::detail {

// Smallest power of two >= n for n >= 1; 0 for n <= 0. Above 2^62, where
// the next power of two does not fit, INT64_MAX.
int64_t bucket_pow2(int64_t n);

// What makes two calls "the same shape class" for tuning.
struct TuneKey {
  std::string gpu;        // device name, e.g. "NVIDIA H200"
  int sm_count = 0;       // multiprocessors
  DType dtype = DType::kBFloat16;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;  // V's width when it differs from head_dim, else 0
  bool causal = false;
  int64_t gqa_ratio = 1;  // heads_q / heads_kv
  int64_t seqlen_q_bucket = 0;     // bucket_pow2(seqlen_q)
  int64_t seqlen_k_bucket = 0;     // bucket_pow2(seqlen_k)
  int64_t batch_heads_bucket = 0;  // bucket_pow2(batch * heads_q)

  // A stable one-line text form, also the key in the JSON file, e.g.
  // "NVIDIA H200|132|bf16|d128|causal|g4|q4096|k4096|bh64". A V head dim of
  // its own follows the head dim: "d192v128".
  std::string str() const;
  bool operator==(const TuneKey& other) const { return str() == other.str(); }
};

TuneKey make_tune_key(const AttentionParams& p, const std::string& gpu, int sm_count);

// What the persistent file must match to be used.
struct CacheFileHeader {
  std::string flash_version;  // flash::version()
  int cuda_runtime = 0;       // cudaRuntimeGetVersion
  std::string gpu;            // device name
};

struct CacheEntry {
  std::string config;     // KernelChoice::name of the winner
  double time_ms = 0.0;   // its median time when tuned
  ChoiceSource source = ChoiceSource::kTuned;  // kCache when read from the file
};

// Thread-safe: lookups take a shared lock, stores an exclusive one.
class TuneCache {
 public:
  std::optional<CacheEntry> lookup(const std::string& key) const;
  void store(const std::string& key, const CacheEntry& entry);
  size_t size() const;
  std::vector<std::pair<std::string, CacheEntry>> entries() const;  // sorted by key

  // Reads `path` (entries get source kCache). A missing file is not an
  // error. A file whose header differs from `expected`, or that does not
  // parse, is ignored: returns false and sets *warning to one line saying
  // why; the cache is left unchanged. Keys already in memory keep their
  // entries (what this process measured wins over the file).
  bool load_file(const std::string& path, const CacheFileHeader& expected, std::string* warning);
  // Writes every entry to `path` atomically (a temporary file in the same
  // directory, then rename). Returns false and sets *error on failure.
  bool save_file(const std::string& path, const CacheFileHeader& header, std::string* error) const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, CacheEntry> map_;
};

enum class TuneAction {
  kUseCache,   // a result exists for this key
  kTune,       // time the candidates now
  kHeuristic,  // no result, and tuning is off or not allowed now
};

// The rule: a cached result always wins; otherwise tune only when tuning is
// on and the stream is not being captured into a CUDA graph (timing would
// break the capture), else fall back to the heuristic.
TuneAction decide_tune_action(bool tuning_enabled, bool stream_capturing, bool cached);

}  // namespace flash::detail
