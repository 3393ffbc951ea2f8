// flash_tune: autotunes flash over a sweep of shapes and leaves the winners
// in an autotune cache file, so that later processes which set
// FLASH_AUTOTUNE_CACHE to that file start with tuned configurations and
// never pay for tuning themselves.
//
//   Sweep (by default the seed's, as flash_bench's): batch * seqlen = 16384
//   tokens, heads * head_dim = 2048, seqlen in {512, ..., 16384}, head_dim in
//   {64, 128, 256}, causal and not, bf16 and fp16, layout [B, N, H, D],
//   heads_kv = heads_q, uniform random inputs.
//
//   Per shape: one flash::attention_forward with params.autotune = true (the
//   library times every compiled configuration of the shape class and writes
//   the file), then flash::query_kernel_choice to learn the winner. A shape
//   class the file already holds is read back, not re-tuned; delete the file
//   to tune again.
//
// Usage:
//   flash_tune --cache=$HOME/.cache/flash/h200.json
//   flash_tune --cache=tune.json --dtypes=bf16 --head_dims=128 --seqlens=4096,8192 --causal=yes
// With no CUDA device it prints "no CUDA device" and exits with 77 (the
// "skipped" code); 2 for bad flags, 1 when any shape failed.
#include <cuda_runtime_api.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "flash/flash.hpp"
#include "sweep.h"

namespace {

using flash_bench::flag_value;
using flash_bench::kSweepModelWidth;
using flash_bench::parse_int_list;
using flash_bench::split_commas;
constexpr float kInputScale = 1.0f;    // inputs are uniform in [-1, 1)
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoDevice = 77;

struct Options {
  std::string cache;  // required
  std::vector<flash::DType> dtypes = {flash::DType::kBFloat16, flash::DType::kFloat16};
  std::vector<int64_t> head_dims = {64, 128, 256};
  std::vector<int64_t> seqlens = {512, 1024, 2048, 4096, 8192, 16384};
  std::vector<bool> causal = {false, true};
};

const char* usage() {
  return "usage: flash_tune --cache=PATH [flags]\n"
         "  --cache=PATH               autotune cache file to write (required); shapes it already\n"
         "                             holds are kept, not re-tuned\n"
         "  --dtypes=bf16,fp16         element types (default: both)\n"
         "  --head_dims=64,128,256     head dims; each must divide 2048 (default: 64,128,256)\n"
         "  --seqlens=512,...,16384    sequence lengths; batch = max(1, 16384 / N)\n"
         "                             (default: 512,1024,2048,4096,8192,16384)\n"
         "  --causal=both|yes|no       masks to tune (default: both)\n"
         "  --help                     this text\n";
}

std::string parse_options(int argc, char** argv, Options* o, bool* help) {
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    std::string err;
    if (const char* v = flag_value(arg, "--cache")) {
      o->cache = v;
      if (o->cache.empty()) err = "--cache: the path is empty";
    } else if (const char* v = flag_value(arg, "--dtypes")) {
      o->dtypes.clear();
      for (const std::string& item : split_commas(v)) {
        if (item == "bf16") {
          o->dtypes.push_back(flash::DType::kBFloat16);
        } else if (item == "fp16") {
          o->dtypes.push_back(flash::DType::kFloat16);
        } else {
          err = "--dtypes: '" + item + "' is not a dtype; use bf16 and/or fp16";
        }
      }
      if (err.empty() && o->dtypes.empty()) err = "--dtypes: the list is empty";
    } else if (const char* v = flag_value(arg, "--head_dims")) {
      err = parse_int_list("--head_dims", v, 1, &o->head_dims);
      for (int64_t hd : o->head_dims) {
        if (err.empty() && kSweepModelWidth % hd != 0) {
          err = "--head_dims: " + std::to_string(hd) +
                " does not divide 2048 (the sweep keeps heads * head_dim = 2048); use 32, 64, 128 or 256";
        }
      }
    } else if (const char* v = flag_value(arg, "--seqlens")) {
      err = parse_int_list("--seqlens", v, 1, &o->seqlens);
    } else if (const char* v = flag_value(arg, "--causal")) {
      const std::string c = v;
      if (c == "both") {
        o->causal = {false, true};
      } else if (c == "yes") {
        o->causal = {true};
      } else if (c == "no") {
        o->causal = {false};
      } else {
        err = "--causal: '" + c + "' is not one of both, yes, no";
      }
    } else if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      *help = true;
    } else {
      err = std::string("unknown flag '") + arg + "'";
    }
    if (!err.empty()) return err;
  }
  if (!*help && o->cache.empty()) return "--cache=PATH is required";
  return {};
}

// "" on success, otherwise "<what>: <CUDA's message>".
std::string cuda_error(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return {};
  (void)cudaGetLastError();  // clear a non-sticky error so the next shape starts clean
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

// One cudaMalloc allocation that only grows, reused across shapes.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }

  std::string reserve(size_t bytes, const char* what) {
    if (bytes <= bytes_) return {};
    if (ptr_ != nullptr) {
      const std::string err = cuda_error("cudaFree", cudaFree(ptr_));
      ptr_ = nullptr;
      bytes_ = 0;
      if (!err.empty()) return err;
    }
    const std::string err = cuda_error(what, cudaMalloc(&ptr_, bytes));
    if (!err.empty()) {
      ptr_ = nullptr;
      return err + " (" + std::to_string(bytes) + " bytes)";
    }
    bytes_ = bytes;
    return {};
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct Shape {
  flash::DType dtype;
  int64_t head_dim;
  bool causal;
  int64_t seqlen;
};

struct Result {
  Shape shape;
  flash::AttentionParams params;
  flash::KernelChoice choice;
  std::string error;  // "" when the shape was tuned (or read back)
};

const char* dtype_name(flash::DType dtype) { return dtype == flash::DType::kFloat16 ? "fp16" : "bf16"; }

const char* source_name(flash::ChoiceSource source) {
  switch (source) {
    case flash::ChoiceSource::kHeuristic: return "heuristic";
    case flash::ChoiceSource::kCache: return "cache";
    case flash::ChoiceSource::kTuned: return "tuned";
  }
  return "unknown";
}

std::string shape_name(const Shape& s) {
  return std::string(dtype_name(s.dtype)) + " hd" + std::to_string(s.head_dim) + " " +
         (s.causal ? "causal" : "noncausal") + " N=" + std::to_string(s.seqlen);
}

// One sweep shape's parameters (pointers left null), with autotuning on.
flash::AttentionParams sweep_params(const Shape& s) {
  flash::AttentionParams p = flash_bench::sweep_params(s.dtype, s.head_dim, s.causal, s.seqlen);
  p.autotune = true;
  return p;
}

struct Buffers {
  DeviceBuffer q, k, v, o;
};

// Runs one shape: random inputs, one autotuned call, the winner's name.
std::string tune_shape(Buffers& buffers, cudaStream_t stream, uint64_t seed, Result* r) {
  flash::AttentionParams& p = r->params;
  const size_t elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const size_t bytes = elems * 2;  // fp16 and bf16
  std::string err = buffers.q.reserve(bytes, "cudaMalloc(Q)");
  if (err.empty()) err = buffers.k.reserve(bytes, "cudaMalloc(K)");
  if (err.empty()) err = buffers.v.reserve(bytes, "cudaMalloc(V)");
  if (err.empty()) err = buffers.o.reserve(bytes, "cudaMalloc(O)");
  const struct {
    const char* what;
    void* ptr;
  } fills[] = {{"fill_uniform(Q)", buffers.q.get()}, {"fill_uniform(K)", buffers.k.get()},
               {"fill_uniform(V)", buffers.v.get()}};
  for (const auto& f : fills) {
    if (err.empty()) {
      err = cuda_error(f.what, flash::ref::fill_uniform(f.ptr, p.dtype, elems, seed++, kInputScale, stream));
    }
  }
  if (!err.empty()) return err;
  p.q = buffers.q.get();
  p.k = buffers.k.get();
  p.v = buffers.v.get();
  p.o = buffers.o.get();

  const flash::Status status = flash::attention_forward(p, stream);
  if (!status.ok()) return std::string("flash::attention_forward: ") + status.message;
  err = cuda_error("cudaStreamSynchronize", cudaStreamSynchronize(stream));
  if (!err.empty()) return err;
  const flash::Status query = flash::query_kernel_choice(p, &r->choice);
  if (!query.ok()) return std::string("flash::query_kernel_choice: ") + query.message;
  return {};
}

void print_table(const std::vector<Result>& results) {
  std::printf("\n| dtype | head_dim | mask | seqlen | batch x heads | configuration | source |\n");
  std::printf("|---|---:|---|---:|---:|---|---|\n");
  for (const Result& r : results) {
    const std::string config = r.error.empty() ? r.choice.name : "failed";
    std::printf("| %s | %lld | %s | %lld | %lld x %lld | %s | %s |\n", dtype_name(r.shape.dtype),
                static_cast<long long>(r.shape.head_dim), r.shape.causal ? "causal" : "noncausal",
                static_cast<long long>(r.shape.seqlen), static_cast<long long>(r.params.batch),
                static_cast<long long>(r.params.heads_q), config.c_str(),
                r.error.empty() ? source_name(r.choice.source) : "-");
  }
}

int run(const Options& o) {
  // Before any flash call: the library reads FLASH_AUTOTUNE_CACHE once.
  if (setenv("FLASH_AUTOTUNE_CACHE", o.cache.c_str(), /*overwrite=*/1) != 0) {
    std::fprintf(stderr, "flash_tune: setenv(FLASH_AUTOTUNE_CACHE): %s\n", std::strerror(errno));
    return kExitFailed;
  }
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    std::fprintf(stderr, "flash_tune: no CUDA device\n");
    return kExitNoDevice;
  }
  int device = 0;
  cudaDeviceProp prop{};
  std::string err = cuda_error("cudaGetDevice", cudaGetDevice(&device));
  if (err.empty()) err = cuda_error("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, device));
  cudaStream_t stream = nullptr;
  if (err.empty()) err = cuda_error("cudaStreamCreate", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!err.empty()) {
    std::fprintf(stderr, "flash_tune: setup failed: %s\n", err.c_str());
    return kExitFailed;
  }

  std::vector<Shape> shapes;
  for (flash::DType dtype : o.dtypes) {
    for (int64_t head_dim : o.head_dims) {
      for (bool causal : o.causal) {
        for (int64_t seqlen : o.seqlens) shapes.push_back({dtype, head_dim, causal, seqlen});
      }
    }
  }
  std::printf("flash_tune: flash %s on %s (%d SMs), %zu shapes, cache %s\n", flash::version(), prop.name,
              prop.multiProcessorCount, shapes.size(), o.cache.c_str());

  std::vector<Result> results;
  int failures = 0;
  {
    Buffers buffers;  // freed before the stream is destroyed
    for (size_t i = 0; i < shapes.size(); ++i) {
      Result r{shapes[i], sweep_params(shapes[i]), {}, {}};
      r.error = tune_shape(buffers, stream, /*seed=*/1 + 3 * i, &r);
      if (r.error.empty()) {
        std::printf("[%zu/%zu] %s: %s (%s)\n", i + 1, shapes.size(), shape_name(r.shape).c_str(), r.choice.name,
                    source_name(r.choice.source));
      } else {
        ++failures;
        std::printf("[%zu/%zu] %s: FAILED: %s\n", i + 1, shapes.size(), shape_name(r.shape).c_str(),
                    r.error.c_str());
      }
      std::fflush(stdout);
      results.push_back(r);
    }
  }
  err = cuda_error("cudaStreamDestroy", cudaStreamDestroy(stream));
  if (!err.empty()) {
    std::fprintf(stderr, "flash_tune: %s\n", err.c_str());
    ++failures;
  }

  print_table(results);
  const auto untuned = std::count_if(results.begin(), results.end(), [](const Result& r) {
    return r.error.empty() && r.choice.source == flash::ChoiceSource::kHeuristic;
  });
  if (untuned > 0) {
    std::printf("\n%lld shape(s) kept the heuristic's choice: one compiled configuration only, or tuning "
                "could not run (see messages above)\n",
                static_cast<long long>(untuned));
  }
  struct stat info {};
  if (::stat(o.cache.c_str(), &info) == 0) {
    std::printf("\ncache: %s (%lld bytes); use it with FLASH_AUTOTUNE_CACHE=%s\n", o.cache.c_str(),
                static_cast<long long>(info.st_size), o.cache.c_str());
  } else {
    std::fprintf(stderr, "flash_tune: %s was not written (%s)\n", o.cache.c_str(), std::strerror(errno));
    ++failures;
  }
  if (failures > 0) std::fprintf(stderr, "flash_tune: %d failure(s)\n", failures);
  return failures == 0 ? 0 : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  bool help = false;
  const std::string err = parse_options(argc, argv, &options, &help);
  if (!err.empty()) {
    std::fprintf(stderr, "flash_tune: %s\n\n%s", err.c_str(), usage());
    return kExitUsage;
  }
  if (help) {
    std::printf("%s", usage());
    return 0;
  }
  return run(options);
}
