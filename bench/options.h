// flash_bench's own command-line flags. They are parsed, and removed from
// argv, before benchmark::Initialize sees the rest, so Google Benchmark's
// flags (--benchmark_filter, --benchmark_out, ...) keep working.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flash/flash.hpp"

namespace flash_bench {

// The head dims this build compiled kernels for (FLASH_HEAD_DIMS), from
// bench/CMakeLists.txt.
std::vector<int64_t> compiled_head_dims();

// --serving's default head dims: those of 64, 128 and 256 that are compiled.
std::vector<int64_t> default_serving_head_dims();

struct Options {
  std::vector<flash::DType> dtypes = {flash::DType::kBFloat16, flash::DType::kFloat16};
  std::vector<int64_t> head_dims = {64, 128, 256};
  std::vector<int64_t> seqlens = {512, 1024, 2048, 4096, 8192, 16384};
  bool run_sweep = true;     // the seed's sweep; off when --decode, --varlen, --window, --serving, --features, --head_dim_rows, --fp8, --fp8_prefill or --mla is given without --sweep
  bool decode = false;       // --decode: the decode rows (split-KV, dense and paged KV cache)
  bool serving = false;      // --serving: chunked prefill on dense, seqused_k and paged caches, and decode
  bool varlen = false;       // --varlen: varlen prefill against an equal-length dense batch
  bool window = false;       // --window: causal sliding-window prefill, flash's pick against the sm80 kernel
  bool fp8 = false;            // --fp8: decode on an e4m3 KV cache beside bf16 (inference_bench.h)
  bool fp8_prefill = false;    // --fp8_prefill: e4m3 Q, K, V beside bf16 and an fp8 GEMM (fp8_prefill_bench.h)
  bool head_dim_rows = false;  // --head_dim_rows: head dims between the compiled ones (head_dims_bench.h)
  bool features = false;     // --features: each feature's cost against the same call without it (features_bench.h)
  bool mla = false;          // --mla: MLA's absorbed decode (576 / 512) through attention_forward (mla_rows.h)
  bool run_standard = true;  // --no-standard clears it
  flash::Backend backend = flash::Backend::kAuto;  // kernel family of the flash rows
  int flash_iters = 30;      // timed launches per flash row
  int flash_warmup = 5;      // untimed launches before them (at least; see warmup_ms)
  double warmup_ms = 200.0;  // each row warms up for at least this long (--warmup_ms)
  bool l2_flush_read = false;  // --l2_flush=read: flush L2 by reading, leaving no dirty lines (default: write)
  int standard_iters = 3;    // timed launches per standard-attention row
  int standard_warmup = 1;
  int gemm_iters = 20;       // timed GEMMs for the ceiling and its row
  int gemm_warmup = 20;
  bool list_only = false;    // --benchmark_list_tests was given: touch no GPU
  bool autotune = false;     // --autotune: also run every flash row with autotuning on
  int num_splits = 0;        // --num_splits: the decode rows' split count (0: flash picks)
  float softcap = 0.f;       // --softcap: the sweep's flash rows with this logit softcap (0: none)
  bool lse = false;          // --lse: the sweep's flash rows also write the log-sum-exp
  std::vector<int64_t> decode_head_dims = {128};  // --decode_head_dims: the decode rows' head dims
  std::vector<int64_t> decode_seqlens = {4096, 32768};  // --decode_seqlens: the decode rows' cached keys L
  std::vector<int64_t> decode_batches = {1, 8, 32};     // --decode_batches: the decode rows' batch sizes
  std::vector<int64_t> serving_head_dims = default_serving_head_dims();  // --serving_head_dims
};

// Removes the flags it knows from argv (updating *argc) and fills *options.
// Returns "" or a message naming the bad flag. Sets *help when --help was
// given (the usage is then printed by the caller, and argv keeps --help so
// Google Benchmark prints its own flags too).
std::string parse_options(int* argc, char** argv, Options* options, bool* help);

// One paragraph per flag, for --help.
const char* usage();

// "bf16" / "fp16".
const char* dtype_name(flash::DType dtype);

// "auto" / "sm80" / "sm90" / "decode".
const char* backend_name(flash::Backend backend);

}  // namespace flash_bench
