// The environment of the GPU tests: names, seeds, what this build and this
// GPU have, and the skip-without-GPU fixture. See gpu_case.h.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpu_case.h"
#include "src/dispatch.h"

namespace flash::test {
namespace {

const char* dtype_name(DType dtype) { return dtype == DType::kFloat16 ? "fp16" : "bf16"; }

int device_major() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return 0;
  return major;
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kBNHD: return "bnhd";
    case Layout::kBHND: return "bhnd";
    case Layout::kPacked: return "packed";
    case Layout::kPadded: return "padded";
    case Layout::kBroadcastKV: return "broadcast_kv";
  }
  return "?";
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "backend auto";
    case Backend::kSm80: return "backend sm80";
    case Backend::kSm90: return "backend sm90";
    case Backend::kDecode: return "backend decode";
  }
  return "backend ?";
}

std::string CaseConfig::name() const {
  char text[256];
  std::snprintf(text, sizeof(text), "%s hd%" PRId64 " %s q%" PRId64 " k%" PRId64 " h%" PRId64 "/%" PRId64
                " b%" PRId64 " %s", dtype_name(dtype), head_dim, causal ? "causal" : "full", seqlen_q, seqlen_k,
                heads_q, heads_kv, batch, layout_name(layout));
  std::string name = text;
  if (softmax_scale != 0.f) name += " scale " + std::to_string(softmax_scale);
  if (window_left != -1 || window_right != -1) {
    name += " window(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")";
  }
  if (softcap != 0.f) name += " softcap " + std::to_string(softcap);
  if (input_scale != 1.f) name += " inputs x" + std::to_string(input_scale);
  if (!with_lse) name += " no-lse";
  return name;
}

uint64_t run_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    if (const char* env = std::getenv("FLASH_TEST_SEED")) {
      s = std::strtoull(env, nullptr, 0);
    } else {
      std::random_device device;
      s = (static_cast<uint64_t>(device()) << 32) ^ device();
    }
    std::printf("[flash tests] per-run seed %" PRIu64 " (FLASH_TEST_SEED=%" PRIu64 " repeats this run)\n", s, s);
    return s;
  }();
  return seed;
}

uint64_t case_seed(uint64_t index) { return splitmix64(run_seed() ^ splitmix64(index)); }

std::vector<Backend> backends_for(const CaseConfig& cfg) {
  std::vector<Backend> backends{Backend::kSm80};
  // The Hopper kernel runs a head dim on the next compiled one of 64, 96, 128, 192, 256.
  bool sm90_head_dim = false;
  for (int64_t d : {64, 96, 128, 192, 256}) sm90_head_dim = sm90_head_dim || (d >= cfg.head_dim && head_dim_compiled(d));
  if (FLASH_TEST_HAS_SM90 && sm90_head_dim && device_major() == 9) backends.push_back(Backend::kSm90);
  return backends;
}

bool tma_describable(const AttentionParams& p) {
  return p.seqlen_k != 0 && tma_strides_describable(p, p.batch, p.seqlen_q, p.batch, p.seqlen_k);
}

bool tma_strides_describable(const AttentionParams& p, int64_t q_batch, int64_t q_rows, int64_t k_batch,
                             int64_t k_rows) {
  const int64_t sizes[4][3] = {{q_batch, q_rows, p.heads_q},
                               {k_batch, k_rows, p.heads_kv},
                               {k_batch, k_rows, p.heads_kv},
                               {q_batch, q_rows, p.heads_q}};
  const int64_t strides[4][3] = {{p.q_batch_stride, p.q_seq_stride, p.q_head_stride},
                                 {p.k_batch_stride, p.k_seq_stride, p.k_head_stride},
                                 {p.v_batch_stride, p.v_seq_stride, p.v_head_stride},
                                 {p.o_batch_stride, p.o_seq_stride, p.o_head_stride}};
  for (int t = 0; t < 4; ++t) {
    for (int d = 0; d < 3; ++d) {
      if (strides[t][d] == 0 && sizes[t][d] > 1) return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------- GpuTest

void GpuTest::SetUp() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the error so it does not leak into later calls
    GTEST_SKIP() << "no CUDA device";
  }
  if (device_major() < 8) GTEST_SKIP() << "flash needs an sm_80 or newer GPU";
  run_seed();  // print it before the first case
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cublasCreate(&cublas_), CUBLAS_STATUS_SUCCESS);
}

void GpuTest::TearDown() {
  if (stream_ == nullptr) return;
  // An illegal address or a trap inside a kernel surfaces here at the latest.
  const cudaError_t err = cudaDeviceSynchronize();
  EXPECT_EQ(err, cudaSuccess) << "asynchronous CUDA error: " << cudaGetErrorString(err);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

Status forward_checking_choice(const AttentionParams& p, cudaStream_t stream) {
  KernelChoice reported;
  const Status query = query_kernel_choice(p, &reported);
  const Status s = attention_forward(p, stream);
  EXPECT_EQ(query.code, s.code) << "query_kernel_choice: " << query.message << "; attention_forward: " << s.message;
  const char* env = std::getenv("FLASH_AUTOTUNE");
  const bool may_tune = p.autotune || (env != nullptr && env[0] != '\0' && std::string(env) != "0");
  if (!s.ok() || p.batch == 0 || p.seqlen_q == 0 || may_tune) return s;
  detail::DeviceCaps caps;
  const Status device = detail::query_device(&caps);
  EXPECT_TRUE(device.ok()) << device.message;
  detail::Plan plan;
  EXPECT_TRUE(detail::make_plan(p, caps, &plan).ok());
  const detail::LaunchRecord ran = detail::last_launch();
  KernelChoice launched;
  EXPECT_TRUE(detail::describe(plan, ran.candidate, p, &launched));
  EXPECT_STREQ(reported.name, launched.name) << "query_kernel_choice names another kernel than the one launched";
  EXPECT_EQ(reported.backend, launched.backend);
  EXPECT_EQ(ran.num_splits, plan.num_splits);
  return s;
}

}  // namespace flash::test
