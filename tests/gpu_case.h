// What the GPU tests share: the skip-without-GPU fixture, one attention
// case on the device (layouts, fresh random inputs, poisoned outputs), and
// the runs of flash and of the references on it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "build_config.h"
#include "check.h"
#include "flash/flash.hpp"

namespace flash::test {

// How Q, K, V and O are laid out in device memory.
enum class Layout {
  kBNHD,         // each tensor densely packed [batch, seq, heads, head_dim]
  kBHND,         // each tensor densely packed [batch, heads, seq, head_dim]
  kPacked,       // Q, K, V slices of one [B, N, Hq + 2 Hkv, D] buffer (K, V of one
                 // [B, Nk, 2 Hkv, D] buffer when seqlen_q != seqlen_k); O [B, H, N, D]
  kPadded,       // [B, N, H, D] with padded head, row and batch strides; padding is NaN
  kBroadcastKV,  // K one [Hkv, D] row broadcast over batch and keys (strides 0), V shared
                 // across the batch (batch stride 0); Q and O [B, N, H, D]
};
const char* layout_name(Layout layout);

// One attention call to check.
struct CaseConfig {
  DType dtype = DType::kBFloat16;
  int64_t head_dim = 128;
  bool causal = false;
  int64_t batch = 1;
  int64_t seqlen_q = 1;
  int64_t seqlen_k = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  Layout layout = Layout::kBNHD;
  float softmax_scale = 0.f;
  int64_t window_left = -1;  // sliding window (AttentionParams::window_left/right); -1: unbounded
  int64_t window_right = -1;
  float softcap = 0.f;       // AttentionParams::softcap; 0: off
  float input_scale = 1.f;  // inputs uniform in [-input_scale, input_scale)
  bool with_lse = true;
  uint64_t seed = 0;  // the inputs are a function of (seed, tensor)

  // e.g. "bf16 hd128 causal q129 k17 h8/2 b3 bnhd", plus what differs from the defaults
  std::string name() const;
};

// The per-run seed: FLASH_TEST_SEED if set, else fresh each run. Printed
// once per process so a failing run can be repeated.
uint64_t run_seed();
// A case seed: a hash of the run seed and a case index.
uint64_t case_seed(uint64_t index);
// The splitmix64 finaliser: a cheap, well-mixed 64-bit hash.
uint64_t splitmix64(uint64_t x);

// The backends worth running for `cfg` on this device: kSm80 always, kSm90
// where the build and the GPU have it for this head dim.
std::vector<Backend> backends_for(const CaseConfig& cfg);
const char* backend_name(Backend backend);

// Skips every test when there is no CUDA device (or one older than sm_80);
// otherwise provides a stream and a cuBLAS handle and checks, after the test,
// that the device reported no asynchronous error.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

// The device tensors of one case. Inputs are filled with fresh random
// values (any padding with NaN); O and LSE are poisoned before every run.
class AttentionCase {
 public:
  AttentionCase(const CaseConfig& cfg, cudaStream_t stream);
  ~AttentionCase();
  AttentionCase(const AttentionCase&) = delete;
  AttentionCase& operator=(const AttentionCase&) = delete;

  // Allocation and fills; must succeed before anything else is called.
  ::testing::AssertionResult init();

  const CaseConfig& config() const { return cfg_; }
  // The call as flash sees it: device pointers and strides of this case.
  const AttentionParams& params() const { return params_; }

  // Poisons O and LSE, then calls flash::attention_forward with `backend`.
  Status run_flash(Backend backend);
  // Poisons O and LSE, then calls flash::attention_forward with `p` (this
  // case's params, edited) on the case's stream, or with a null stream (the
  // legacy default stream) if `default_stream`.
  Status run_flash_with(const AttentionParams& p, bool default_stream = false);
  // Poisons O and LSE on the case's stream (for tests that launch by other means).
  cudaError_t poison_outputs();
  cudaStream_t stream() const { return stream_; }
  // Waits for the stream, then reads O (dense float, [batch, seqlen_q,
  // heads_q, head_dim]) and the LSE (empty when the case has none).
  ::testing::AssertionResult read_output(std::vector<float>* o, std::vector<float>* lse);
  // The raw bytes of the O buffer and the LSE, for bitwise comparisons.
  ::testing::AssertionResult read_raw(std::vector<uint16_t>* o, std::vector<float>* lse);
  // Every element of the O buffer outside O's logical elements still poisoned.
  ::testing::AssertionResult padding_untouched();
  // O buffer and LSE still all poison: nothing was written.
  ::testing::AssertionResult outputs_untouched();

  // The cuBLAS reference: O in float32 and the LSE, as doubles.
  ::testing::AssertionResult run_reference(cublasHandle_t handle, std::vector<double>* o, std::vector<double>* lse);
  // The float64 CPU reference on the same inputs.
  ::testing::AssertionResult run_cpu_reference(std::vector<double>* o, std::vector<double>* lse);

 private:
  struct Buffer {
    void* ptr = nullptr;
    int64_t elements = 0;  // 16-bit elements
  };
  struct Placement {
    int buffer = 0;
    int64_t offset = 0;  // elements from the buffer start
    int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;
  };
  void plan();
  // Marks the elements of `t` (sizes [batch, seq, heads, head_dim]) in `mask`.
  void mark(const Placement& t, int64_t seqlen, int64_t heads, std::vector<uint8_t>* mask) const;
  ::testing::AssertionResult download(int buffer, std::vector<uint16_t>* host);

  CaseConfig cfg_;
  cudaStream_t stream_;
  std::vector<Buffer> buffers_;
  Placement q_, k_, v_, o_;
  float* lse_ = nullptr;
  AttentionParams params_;
};

// Which reference a case is checked against.
enum class Reference {
  kCublas,  // standard_attention's float32 O and its LSE
  kCpu,     // cpu_attention, float64 (small shapes only)
};

// Runs `cfg` with every backend of backends_for() against `reference` and
// checks each output (see check_attention), and that O's padding was not
// written. Adds each backend's errors to `worst` if given.
void expect_matches_reference(const CaseConfig& cfg, cublasHandle_t handle, cudaStream_t stream,
                              WorstErrors* worst = nullptr, Reference reference = Reference::kCublas);

// Whether the Hopper kernel can take the call: TMA cannot describe a zero
// stride over a dimension of size > 1, nor seqlen_k == 0; for those,
// Backend::kSm90 reports kUnsupported (and kAuto falls back to sm80).
bool tma_describable(const AttentionParams& p);

// The stride half of that: whether Q and O as [q_batch, q_rows, heads_q]
// and K and V as [k_batch, k_rows, heads_kv], with p's strides, have no
// zero stride over a dimension of size > 1.
bool tma_strides_describable(const AttentionParams& p, int64_t q_batch, int64_t q_rows, int64_t k_batch,
                             int64_t k_rows);

// attention_forward(p, stream), checking that query_kernel_choice(p)
// reports the status it returns and names the kernel it launches (without
// autotuning; a tuned call may pick another).
Status forward_checking_choice(const AttentionParams& p, cudaStream_t stream);

}  // namespace flash::test
