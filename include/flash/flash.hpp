// flash: exact attention forward, O = softmax(scale * Q K^T + mask) V,
// computed the FlashAttention-2 way on NVIDIA GPUs (sm_80 and newer).
//
// This header is deliberately light: it needs no CUDA headers, so a
// translation unit that includes only it compiles with a plain C++17
// compiler. The stream parameter uses CUDA's own opaque stream type
// (`cudaStream_t` is `CUstream_st*`), so callers pass their cudaStream_t
// unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace flash {

// Element type of Q, K, V and O. Accumulation is always float32.
enum class DType : int32_t {
  kFloat16 = 0,
  kBFloat16 = 1,
};

// Which kernel family runs a call.
enum class Backend : int32_t {
  kAuto = 0,  // the Hopper kernel on sm_90 where it supports the shape, else the sm80 kernel
  kSm80 = 1,  // the FlashAttention-2 mma.sync kernel (sm_80 and newer)
  kSm90 = 2,  // the Hopper wgmma/TMA kernel (sm_90 with an sm_90a build; head_dim 64, 128, 256)
};

enum class StatusCode : int32_t {
  kSuccess = 0,
  kInvalidArgument = 1,  // the call was rejected; nothing was launched or written
  kUnsupported = 2,      // valid, but not supported by this build or this GPU
  kCudaError = 3,        // the CUDA runtime reported an error
};

// The result of a call. `message` is empty on success and otherwise says
// what was wrong and what would be accepted.
struct Status {
  StatusCode code = StatusCode::kSuccess;
  char message[256] = {};

  bool ok() const noexcept { return code == StatusCode::kSuccess; }
};

// Arguments of one attention call. Shapes, in elements:
//   Q, O : [batch, seqlen_q, heads_q,  head_dim]
//   K, V : [batch, seqlen_k, heads_kv, head_dim]
//   LSE  : [batch, heads_q, seqlen_q], float32, contiguous
// Each tensor has its own batch, sequence and head strides (in elements, not
// bytes); the last dimension must be contiguous (stride 1). So both the
// [B, N, H, D] layout of inference engines and the [B, H, N, D] layout work
// without copies. Call set_contiguous_bnhd() or set_contiguous_bhnd() to fill
// the strides of densely packed tensors.
struct AttentionParams {
  const void* q = nullptr;  // Query, [batch, seqlen_q, heads_q, head_dim].
  const void* k = nullptr;  // Key, [batch, seqlen_k, heads_kv, head_dim].
  const void* v = nullptr;  // Value, [batch, seqlen_k, heads_kv, head_dim].
  void* o = nullptr;        // Output, [batch, seqlen_q, heads_q, head_dim]; must not overlap Q, K or V.
  float* lse = nullptr;     // Optional log-sum-exp (natural log) of the scaled, masked scores,
                            // [batch, heads_q, seqlen_q]; -inf for a row that sees no key. May be null.

  DType dtype = DType::kBFloat16;  // Element type of Q, K, V and O.

  int64_t batch = 0;     // Number of independent sequences.
  int64_t seqlen_q = 0;  // Query rows per sequence.
  int64_t seqlen_k = 0;  // Key/value rows per sequence.
  int64_t heads_q = 0;   // Query heads; a multiple of heads_kv.
  int64_t heads_kv = 0;  // Key/value heads (== heads_q: MHA, 1: MQA, otherwise GQA).
  int64_t head_dim = 0;  // 32, 64, 96, 128 or 256.

  int64_t q_batch_stride = 0;  // Elements between Q[b, i, h, :] and Q[b + 1, i, h, :].
  int64_t q_seq_stride = 0;    // Elements between Q[b, i, h, :] and Q[b, i + 1, h, :].
  int64_t q_head_stride = 0;   // Elements between Q[b, i, h, :] and Q[b, i, h + 1, :].
  int64_t k_batch_stride = 0;  // Elements between K[b, j, h, :] and K[b + 1, j, h, :].
  int64_t k_seq_stride = 0;    // Elements between K[b, j, h, :] and K[b, j + 1, h, :].
  int64_t k_head_stride = 0;   // Elements between K[b, j, h, :] and K[b, j, h + 1, :].
  int64_t v_batch_stride = 0;  // Elements between V[b, j, h, :] and V[b + 1, j, h, :].
  int64_t v_seq_stride = 0;    // Elements between V[b, j, h, :] and V[b, j + 1, h, :].
  int64_t v_head_stride = 0;   // Elements between V[b, j, h, :] and V[b, j, h + 1, :].
  int64_t o_batch_stride = 0;  // Elements between O[b, i, h, :] and O[b + 1, i, h, :].
  int64_t o_seq_stride = 0;    // Elements between O[b, i, h, :] and O[b, i + 1, h, :].
  int64_t o_head_stride = 0;   // Elements between O[b, i, h, :] and O[b, i, h + 1, :].
  int64_t q_dim_stride = 1;    // Stride of the last dimension of Q, K, V and O; must be 1.
  int64_t k_dim_stride = 1;
  int64_t v_dim_stride = 1;
  int64_t o_dim_stride = 1;

  // Causal mask aligned to the bottom-right corner: query row i sees key j
  // iff j <= i + seqlen_k - seqlen_q. A row that sees no key outputs zeros.
  bool causal = false;
  // Multiplies Q K^T before the softmax; must be >= 0, and 0 means 1 / sqrt(head_dim).
  float softmax_scale = 0.0f;
  // Kernel family; leave at kAuto unless testing or comparing paths. A forced
  // backend that cannot run the call returns kUnsupported.
  Backend backend = Backend::kAuto;

  // Fill all strides for densely packed [batch, seq, heads, head_dim] tensors.
  void set_contiguous_bnhd() noexcept;
  // Fill all strides for densely packed [batch, heads, seq, head_dim] tensors.
  void set_contiguous_bhnd() noexcept;
};

// Checks every argument without touching the GPU. Returns kSuccess when
// attention_forward would accept the call (it may still report kUnsupported
// or kCudaError for the device it runs on).
Status validate(const AttentionParams& params) noexcept;

// Computes attention asynchronously on `stream` (null: the legacy default
// stream) on the current device. No allocation, no host synchronisation, so
// a call can be captured in a CUDA graph; thread-safe; deterministic. A
// rejected call launches nothing and writes nothing.
Status attention_forward(const AttentionParams& params, CUstream_st* stream) noexcept;

// Library version, "major.minor.patch".
const char* version() noexcept;

}  // namespace flash
