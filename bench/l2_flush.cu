// The device-memory read behind the read ceiling (bandwidth_ceiling.cu) and
// the read flush of L2Flusher (--l2_flush=read): a kernel that streams a
// buffer with 16-byte loads and reduces what it read, so no load can be
// optimised away. A file of its own, so that tools building only
// bench_util.h's users (tools/investigations/gap_probe.cu) link it alone.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "bench_util.h"

namespace flash_bench {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

// Reads `count` uint4 from `src` in a grid-stride loop, kUnroll loads per
// thread per step, and XORs every word read into one value per warp, which
// lane 0 folds into *sink with an atomic: each load feeds the result.
__global__ void __launch_bounds__(kThreads)
    read_kernel(const uint4* __restrict__ src, size_t count, unsigned int* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned int acc = 0;
  for (; i + (kUnroll - 1) * stride < count; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < count; i += stride) {
    const uint4 v = __ldg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicXor(sink, acc);
}

}  // namespace

std::string launch_device_read(const void* buf, size_t bytes, unsigned int* sink, cudaStream_t stream) {
  // As many blocks as fit on the device at once, so every SM streams for
  // the whole launch (the bench runs on one device; computed once).
  static int blocks = 0;
  if (blocks == 0) {
    int device = 0, sms = 0, per_sm = 0;
    std::string err = cuda_error("cudaGetDevice", cudaGetDevice(&device));
    if (err.empty()) {
      err = cuda_error("cudaDeviceGetAttribute(MultiProcessorCount)",
                       cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    }
    if (err.empty()) {
      err = cuda_error("cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                       cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, kThreads, 0));
    }
    if (!err.empty()) return err;
    blocks = sms * (per_sm > 0 ? per_sm : 1);
  }
  read_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(buf), bytes / sizeof(uint4), sink);
  return cuda_error("read_kernel launch", cudaGetLastError());
}

}  // namespace flash_bench
