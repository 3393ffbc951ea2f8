#include "options.h"

#include "sweep.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace flash_bench {
namespace {

std::string parse_count(const char* flag, const char* value, int64_t min_value, int* out) {
  int64_t v = 0;
  if (!parse_int(value, min_value, &v) || v > 1000000) {
    return std::string(flag) + ": '" + value + "' is not an integer in [" + std::to_string(min_value) + ", 1000000]";
  }
  *out = static_cast<int>(v);
  return {};
}

std::string parse_dtypes(const char* value, std::vector<flash::DType>* out) {
  out->clear();
  for (const std::string& item : split_commas(value)) {
    if (item == "bf16") {
      out->push_back(flash::DType::kBFloat16);
    } else if (item == "fp16") {
      out->push_back(flash::DType::kFloat16);
    } else {
      return "--dtypes: '" + item + "' is not a dtype; use bf16 and/or fp16";
    }
  }
  if (out->empty()) return "--dtypes: the list is empty";
  return {};
}

// "" or a message naming `flag` and the first value `list` holds twice
// (a row is registered once and printed once).
std::string check_distinct(const char* flag, const std::vector<int64_t>& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i), list[i]) !=
        list.begin() + static_cast<std::ptrdiff_t>(i)) {
      return std::string(flag) + ": " + std::to_string(list[i]) + " is listed twice";
    }
  }
  return {};
}

// A list of integers in [1, max_value], each once.
std::string parse_distinct_list(const char* flag, const char* value, int64_t max_value, std::vector<int64_t>* out) {
  std::string err = parse_int_list(flag, value, 1, out);
  if (!err.empty()) return err;
  for (int64_t v : *out) {
    if (v > max_value) return std::string(flag) + ": " + std::to_string(v) + " is past " + std::to_string(max_value);
  }
  return check_distinct(flag, *out);
}

std::string parse_backend(const char* value, flash::Backend* out) {
  const std::string v = value;
  if (v == "auto") {
    *out = flash::Backend::kAuto;
  } else if (v == "sm80") {
    *out = flash::Backend::kSm80;
  } else if (v == "sm90") {
    *out = flash::Backend::kSm90;
  } else if (v == "decode") {
    *out = flash::Backend::kDecode;
  } else {
    return "--backend: '" + v + "' is not a backend; use auto, sm80, sm90 or decode";
  }
  return {};
}

// The sweep keeps heads * head_dim = 2048, so a head dim must divide it.
std::string check_head_dims(const std::vector<int64_t>& head_dims) {
  for (int64_t hd : head_dims) {
    if (2048 % hd != 0) {
      return "--head_dims: " + std::to_string(hd) +
             " does not divide 2048 (the sweep keeps heads * head_dim = 2048); use 32, 64, 128 or 256";
    }
  }
  return {};
}

// The decode and serving rows' head dims: ones flash takes (multiples of 8
// from 8 to 256), each once (a repeat would register two rows of one name).
// allow_512: the decode rows also take head dim 512 (the split-D decode kernel).
std::string check_row_head_dims(const char* flag, const std::vector<int64_t>& head_dims, bool allow_512 = false) {
  for (size_t i = 0; i < head_dims.size(); ++i) {
    const int64_t hd = head_dims[i];
    if ((hd < 8 || hd > 256 || hd % 8 != 0) && !(allow_512 && hd == 512)) {
      return std::string(flag) + ": " + std::to_string(hd) + " is not a head dim flash takes (a multiple of 8 from 8 to 256" +
             (allow_512 ? ", or 512)" : ")");
    }
  }
  return check_distinct(flag, head_dims);
}

// --serving_head_dims: also compiled in this build, so that every row it
// registers can run.
std::string check_serving_head_dims(const std::vector<int64_t>& head_dims) {
  std::string err = check_row_head_dims("--serving_head_dims", head_dims);
  const std::vector<int64_t> compiled = compiled_head_dims();
  for (int64_t hd : head_dims) {
    if (err.empty() && std::find(compiled.begin(), compiled.end(), hd) == compiled.end()) {
      err = "--serving_head_dims: " + std::to_string(hd) + " is not compiled in this build (FLASH_HEAD_DIMS " +
            FLASH_BENCH_HEAD_DIMS + ")";
    }
  }
  return err;
}

// Google Benchmark's --benchmark_list_tests[=true]: it lists the rows and
// runs nothing, so neither should main().
bool is_list_tests(const char* arg) {
  if (std::strcmp(arg, "--benchmark_list_tests") == 0) return true;
  const char* v = flag_value(arg, "--benchmark_list_tests");
  return v != nullptr && std::strcmp(v, "false") != 0 && std::strcmp(v, "0") != 0;
}

}  // namespace

std::vector<int64_t> compiled_head_dims() {
  std::vector<int64_t> head_dims;
  for (const std::string& item : split_commas(FLASH_BENCH_HEAD_DIMS)) {
    int64_t hd = 0;
    if (parse_int(item, 1, &hd)) head_dims.push_back(hd);
  }
  return head_dims;
}

std::vector<int64_t> default_serving_head_dims() {
  const std::vector<int64_t> compiled = compiled_head_dims();
  std::vector<int64_t> head_dims;
  for (int64_t hd : {64, 128, 256}) {
    if (std::find(compiled.begin(), compiled.end(), hd) != compiled.end()) head_dims.push_back(hd);
  }
  return head_dims;
}

const char* dtype_name(flash::DType dtype) { return dtype == flash::DType::kFloat16 ? "fp16" : "bf16"; }

const char* backend_name(flash::Backend backend) {
  switch (backend) {
    case flash::Backend::kSm80: return "sm80";
    case flash::Backend::kSm90: return "sm90";
    case flash::Backend::kDecode: return "decode";
    default: return "auto";
  }
}

const char* usage() {
  return "flash_bench flags (Google Benchmark's --benchmark_* flags also apply):\n"
         "  --dtypes=bf16,fp16          element types to sweep (default: both)\n"
         "  --head_dims=64,128,256      head dims to sweep; each must divide 2048 (default: 64,128,256)\n"
         "  --seqlens=512,...,16384     sequence lengths; batch = max(1, 16384 / N)\n"
         "                              (default: 512,1024,2048,4096,8192,16384)\n"
         "  --no-standard               skip the standard (cuBLAS) attention rows\n"
         "  --backend=auto|sm80|sm90|decode\n"
         "                              kernel family of the flash, decode and varlen rows (default auto)\n"
         "  --decode                    run the decode rows: bf16, heads 32/8, hd128, one query, batch 1, 8, 32,\n"
         "                              KV length 4096 and 32768 (--decode_batches, --decode_seqlens), dense and\n"
         "                              paged (16, 256) cache, split-KV auto;\n"
         "                              GB/s of K+V against a measured 4 GiB read (read_bandwidth_4GiB)\n"
         "  --varlen                    run the varlen prefill rows: 64 sequences of 100..8192 tokens packed\n"
         "                              (cu_seqlens) against a dense batch of 64 at the mean length\n"
         "  --window                    run the sliding-window rows: causal prefill, bf16, heads 32/8, hd128, N 16384,\n"
         "                              window_left 1024 and 4096, on the run's backend and on the sm80 kernel\n"
         "  --features                  run the feature-cost rows (bench/features_bench.h): gpt-oss-like prefill,\n"
         "                              windowed prefill and decode, and hd128 prefill, each plain, with sinks\n"
         "                              and with ALiBi; then append and attend (k_new), with and without rotary\n"
         "  --fp8                       run the fp8 KV cache decode rows: the --decode shapes (--decode_head_dims)\n"
         "                              on dense and paged16 caches, K and V in bf16 and in e4m3 side by side\n"
         "  --fp8_prefill               run the FP8 prefill rows (bench/fp8_prefill_bench.h): e4m3 Q, K and V with\n"
         "                              bf16 O beside the same calls in bf16, N 16384, head dims 64, 128, 256,\n"
         "                              causal and not, and a cublasLt fp8 GEMM ceiling (8192^3)\n"
         "  --head_dim_rows              run the head-dim rows (bench/head_dims_bench.h): bf16, N 16384, not causal,\n"
         "                              head dims 64 to 256 between and at the compiled ones, each against hd128\n"
         "                              and against the compiled head dim that ran it; at head dims 96 and 128\n"
         "                              also causal, and N 2048 (batch 8) causal and not\n"
         "  --num_splits=N              the decode rows' split count (default 0: flash picks; 1: no split)\n"
         "  --decode_head_dims=LIST     the decode rows' head dims (default 128; multiples of 8 to 256, or 512)\n"
         "  --decode_seqlens=LIST       the decode rows' cached keys a sequence, 1 to 2^30 (default 4096,32768;\n"
         "                              --decode, --fp8 and --serving's decode rows)\n"
         "  --decode_batches=LIST       the decode rows' batch sizes, 1 to 2^20 (default 1,8,32; the same rows)\n"
         "  --softcap=X                 the sweep's rows with logit softcap X (default 0: none; the\n"
         "                              standard-attention rows apply it too; 0 or at least 1e-6)\n"
         "  --lse                       the sweep's flash rows also write the log-sum-exp (float32; default: none,\n"
         "                              as an inference forward pass; at head_dim 64 the Hopper kernel is then\n"
         "                              the variant that keeps float32 row sums, with --softcap too)\n"
         "  --serving                   run the serving rows (bench/serving_bench.h), ratios to the dense call beside\n"
         "                              each row: chunked prefill, bf16, heads 32/8, batch 4, 2048 new causal queries\n"
         "                              against 16384 cached keys on a dense cache, a dense cache with seqused_k (room\n"
         "                              for 20480 keys) and paged caches (pages of 1, 16, 64, 256 keys); and decode\n"
         "                              (the --decode rows' shapes on dense and paged16 caches)\n"
         "  --serving_head_dims=LIST    the serving rows' head dims (default: those of 64,128,256 compiled in)\n"
         "  --mla                       run MLA's absorbed decode rows (bench/mla_rows.h): head_dim 576, head_dim_v\n"
         "                              512, V read from K's rows, bf16, 64-key pages, against the read ceiling\n"
         "  --sweep                     with --decode, --varlen, --window, --serving, --features, --head_dim_rows,\n"
         "                              --fp8_prefill or --mla: run the seed's sweep too (else they replace it)\n"
         "  --autotune                  also run each flash row with autotuning on (the first warm-up call\n"
         "                              tunes) and print heuristic vs autotuned\n"
         "  --flash_iters=N             timed launches per flash row (default 30, after 5 warm-up)\n"
         "  --warmup_ms=MS              every row warms up for at least MS ms of launches (default 200)\n"
         "  --l2_flush=write|read       how L2 is flushed before each timed launch: write a buffer twice L2's\n"
         "                              size (cudaMemsetAsync, the default; its dirty lines are written back\n"
         "                              during the timed launch) or read one (no dirty lines left)\n"
         "  --standard_iters=N          timed launches per standard row (default 3, after 1 warm-up)\n"
         "  --gemm_iters=N              timed GEMMs for the ceiling and its row (default 20, after 20 warm-up)\n";
}

std::string parse_options(int* argc, char** argv, Options* options, bool* help) {
  *help = false;
  bool sweep_flag = false;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const char* arg = argv[i];
    std::string err;
    bool consumed = true;
    if (const char* v = flag_value(arg, "--dtypes")) {
      err = parse_dtypes(v, &options->dtypes);
    } else if (const char* v = flag_value(arg, "--head_dims")) {
      err = parse_int_list("--head_dims", v, 1, &options->head_dims);
      if (err.empty()) err = check_head_dims(options->head_dims);
    } else if (const char* v = flag_value(arg, "--seqlens")) {
      err = parse_int_list("--seqlens", v, 1, &options->seqlens);
    } else if (const char* v = flag_value(arg, "--backend")) {
      err = parse_backend(v, &options->backend);
    } else if (std::strcmp(arg, "--no-standard") == 0) {
      options->run_standard = false;
    } else if (std::strcmp(arg, "--decode") == 0) {
      options->decode = true;
    } else if (std::strcmp(arg, "--varlen") == 0) {
      options->varlen = true;
    } else if (std::strcmp(arg, "--window") == 0) {
      options->window = true;
    } else if (std::strcmp(arg, "--fp8") == 0) {
      options->fp8 = true;
    } else if (std::strcmp(arg, "--features") == 0) {
      options->features = true;
    } else if (std::strcmp(arg, "--fp8_prefill") == 0) {
      options->fp8_prefill = true;
    } else if (std::strcmp(arg, "--head_dim_rows") == 0) {
      options->head_dim_rows = true;
    } else if (std::strcmp(arg, "--sweep") == 0) {
      sweep_flag = true;
    } else if (const char* v = flag_value(arg, "--l2_flush")) {
      if (std::strcmp(v, "write") == 0 || std::strcmp(v, "read") == 0) {
        options->l2_flush_read = std::strcmp(v, "read") == 0;
      } else {
        err = std::string("--l2_flush: '") + v + "' is neither write nor read";
      }
    } else if (const char* v = flag_value(arg, "--warmup_ms")) {
      int64_t ms = 0;
      if (!parse_int(v, 0, &ms)) err = std::string("--warmup_ms: '") + v + "' is not an integer >= 0";
      options->warmup_ms = static_cast<double>(ms);
    } else if (const char* v = flag_value(arg, "--num_splits")) {
      int64_t n = 0;
      if (!parse_int(v, 0, &n) || n > 128) err = std::string("--num_splits: '") + v + "' is not an integer in [0, 128]";
      options->num_splits = static_cast<int>(n);
    } else if (const char* v = flag_value(arg, "--decode_head_dims")) {
      err = parse_int_list("--decode_head_dims", v, 1, &options->decode_head_dims);
      if (err.empty()) err = check_row_head_dims("--decode_head_dims", options->decode_head_dims, /*allow_512=*/true);
    } else if (const char* v = flag_value(arg, "--decode_seqlens")) {
      err = parse_distinct_list("--decode_seqlens", v, int64_t{1} << 30, &options->decode_seqlens);
    } else if (const char* v = flag_value(arg, "--decode_batches")) {
      err = parse_distinct_list("--decode_batches", v, int64_t{1} << 20, &options->decode_batches);
    } else if (std::strcmp(arg, "--serving") == 0) {
      options->serving = true;
    } else if (std::strcmp(arg, "--mla") == 0) {
      options->mla = true;
    } else if (const char* v = flag_value(arg, "--serving_head_dims")) {
      err = parse_int_list("--serving_head_dims", v, 1, &options->serving_head_dims);
      if (err.empty()) err = check_serving_head_dims(options->serving_head_dims);
    } else if (const char* v = flag_value(arg, "--softcap")) {
      char* end = nullptr;
      errno = 0;
      const double cap = std::strtod(v, &end);
      if (end == v || *end != '\0' || errno != 0 || !(cap == 0.0 || (cap >= 1e-6 && cap <= 1e6))) {
        err = std::string("--softcap: '") + v + "' is not 0 or a number in [1e-6, 1e6]";
      }
      options->softcap = static_cast<float>(cap);
    } else if (std::strcmp(arg, "--autotune") == 0) {
      options->autotune = true;
    } else if (std::strcmp(arg, "--lse") == 0) {
      options->lse = true;
    } else if (const char* v = flag_value(arg, "--flash_iters")) {
      err = parse_count("--flash_iters", v, 1, &options->flash_iters);
    } else if (const char* v = flag_value(arg, "--standard_iters")) {
      err = parse_count("--standard_iters", v, 1, &options->standard_iters);
    } else if (const char* v = flag_value(arg, "--gemm_iters")) {
      err = parse_count("--gemm_iters", v, 1, &options->gemm_iters);
    } else {
      consumed = false;
      if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) *help = true;
      if (is_list_tests(arg)) options->list_only = true;
    }
    if (!err.empty()) return err;
    if (!consumed) argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;
  options->run_sweep =
      sweep_flag || (!options->decode && !options->varlen && !options->window && !options->serving && !options->features &&
                     !options->head_dim_rows && !options->fp8 && !options->fp8_prefill && !options->mla);
  return {};
}

}  // namespace flash_bench
