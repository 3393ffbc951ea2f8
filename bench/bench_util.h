// Small pieces the benchmark is built from: error strings for CUDA and
// cuBLAS statuses, a device buffer, the L2 flush, the event timer, the
// median, and the FLOP count of one attention call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flash_bench {

// "" on success, otherwise "<what>: <CUDA's message>". Every CUDA and cuBLAS
// call of the benchmark goes through one of these so a failure reaches
// SkipWithError (or main's exit code) with a message that says where.
inline std::string cuda_error(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return {};
  // Clear the (non-sticky) last error so the next call starts clean.
  (void)cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

inline std::string cublas_error(const char* what, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  return std::string(what) + ": " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")";
}

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  // Allocates `bytes` (at least one byte, so a zero-size request still gets
  // a valid, aligned pointer); "" on success.
  std::string allocate(size_t bytes, const char* what) {
    reset();
    void* p = nullptr;
    std::string err = cuda_error(what, cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    if (err.empty()) {
      ptr_ = p;
      bytes_ = bytes;
    } else {
      err += " (" + std::to_string(bytes) + " bytes)";
    }
    return err;
  }

  void reset() noexcept {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* get() const noexcept { return ptr_; }
  size_t bytes() const noexcept { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Reads `bytes` (a multiple of 16) at `buf` on `stream` with every SM,
// folding what it reads into *sink (l2_flush.cu): the read ceiling's
// kernel, and an L2 flush that leaves no dirty lines. "" on success.
std::string launch_device_read(const void* buf, size_t bytes, unsigned int* sink, cudaStream_t stream);

// Evicts the inputs of the previous launch from L2: before every timed
// launch a buffer twice the size of the device's L2 is written
// (cudaMemsetAsync; the default) or read (`set_read(true)`, --l2_flush=read),
// so each timed launch starts from DRAM as it would inside a model. The write
// leaves L2 full of dirty lines, which the timed launch's own reads evict
// and DRAM writes back while it runs (up to L2's size, ~50 MB on an H200:
// about 11 us at its read ceiling); the read leaves clean lines.
class L2Flusher {
 public:
  std::string init(int device) {
    int l2_bytes = 0;
    std::string err = cuda_error("cudaDeviceGetAttribute(L2CacheSize)",
                                 cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    if (!err.empty()) return err;
    err = buffer_.allocate(2 * static_cast<size_t>(std::max(l2_bytes, 1 << 20)), "cudaMalloc(L2 flush buffer)");
    if (err.empty()) err = sink_.allocate(sizeof(unsigned int), "cudaMalloc(L2 flush sink)");
    // Defined contents for the read flush, in place before any stream reads them.
    if (err.empty()) err = cuda_error("cudaMemset(L2 flush buffer)", cudaMemset(buffer_.get(), 0, buffer_.bytes()));
    if (err.empty()) err = cuda_error("cudaDeviceSynchronize(L2 flush buffer)", cudaDeviceSynchronize());
    return err;
  }

  void set_read(bool read) noexcept { read_ = read; }
  bool reads() const noexcept { return read_; }

  std::string flush(cudaStream_t stream) {
    if (read_) return launch_device_read(buffer_.get(), buffer_.bytes(), static_cast<unsigned int*>(sink_.get()), stream);
    flush_value_ = (flush_value_ + 1) & 0xff;
    return cuda_error("cudaMemsetAsync(L2 flush)",
                      cudaMemsetAsync(buffer_.get(), flush_value_, buffer_.bytes(), stream));
  }

  size_t bytes() const noexcept { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_, sink_;
  bool read_ = false;
  int flush_value_ = 0;  // varied from flush to flush so no write is provably redundant
};

// Times one launch with a pair of CUDA events on `stream`, the L2 flush
// enqueued before the start event and so outside the timed region. The
// flush also keeps the GPU busy while the host enqueues the launch, so the
// host-side launch cost does not leak into the measurement.
class LaunchTimer {
 public:
  LaunchTimer() = default;
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;
  ~LaunchTimer() {
    if (start_ != nullptr) (void)cudaEventDestroy(start_);
    if (stop_ != nullptr) (void)cudaEventDestroy(stop_);
  }

  std::string init() {
    std::string err = cuda_error("cudaEventCreate(start)", cudaEventCreate(&start_));
    if (err.empty()) err = cuda_error("cudaEventCreate(stop)", cudaEventCreate(&stop_));
    return err;
  }

  // `launch` enqueues the work on `stream` and returns "" or an error.
  template <typename Launch>
  std::string time(L2Flusher& flusher, cudaStream_t stream, Launch&& launch, double* ms) {
    std::string err = flusher.flush(stream);
    if (err.empty()) err = cuda_error("cudaEventRecord(start)", cudaEventRecord(start_, stream));
    if (err.empty()) err = launch();
    if (err.empty()) err = cuda_error("cudaEventRecord(stop)", cudaEventRecord(stop_, stream));
    if (err.empty()) err = cuda_error("cudaEventSynchronize(stop)", cudaEventSynchronize(stop_));
    float elapsed = 0.f;
    if (err.empty()) err = cuda_error("cudaEventElapsedTime", cudaEventElapsedTime(&elapsed, start_, stop_));
    *ms = static_cast<double>(elapsed);
    return err;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

// Exact number of (query, key) pairs the bottom-right-aligned causal mask
// leaves visible: row i sees clamp(i + seqlen_k - seqlen_q + 1, 0, seqlen_k)
// keys. For seqlen_q == seqlen_k == N this is N(N+1)/2.
inline double exact_causal_pairs(int64_t seqlen_q, int64_t seqlen_k) {
  double pairs = 0.0;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    pairs += static_cast<double>(std::clamp<int64_t>(i + seqlen_k - seqlen_q + 1, 0, seqlen_k));
  }
  return pairs;
}

// Visible pairs as this benchmark counts them. Non-causal: seqlen_q *
// seqlen_k. Causal and square: N^2 / 2, the FlashAttention benchmarks'
// convention (N/2 pairs short of the exact N(N+1)/2: a relative 1/N, 0.006% at N=16k),
// so our TFLOP/s compare directly with published FlashAttention figures.
// Causal and not square: the exact count above.
inline double visible_pairs(int64_t seqlen_q, int64_t seqlen_k, bool causal) {
  if (!causal) return static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k);
  if (seqlen_q == seqlen_k) return 0.5 * static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k);
  return exact_causal_pairs(seqlen_q, seqlen_k);
}

// FLOPs of one forward call: two GEMMs (Q K^T and P V), 2 FLOPs per
// multiply-add, head_dim multiply-adds per visible pair each:
// 4 * batch * heads_q * head_dim * visible pairs. The softmax is not counted.
inline double attention_flops(int64_t batch, int64_t heads_q, int64_t head_dim, int64_t seqlen_q, int64_t seqlen_k,
                              bool causal) {
  return 4.0 * static_cast<double>(batch) * static_cast<double>(heads_q) * static_cast<double>(head_dim) *
         visible_pairs(seqlen_q, seqlen_k, causal);
}

inline double tflops(double flops, double ms) { return ms > 0.0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

}  // namespace flash_bench
