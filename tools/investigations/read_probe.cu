// Investigation probe (not built by CMake): how fast can an H200 read
// 4 GiB, and does the decode kernel's access pattern cost anything by
// itself? Build and run it from the repository root:
//
//   nvcc -std=c++17 -O2 -arch=sm_90a tools/investigations/read_probe.cu -o read_probe && ./read_probe
//
// Its kernels:
//   linear16:  grid-stride 16-byte loads, 4 in flight per thread (the
//              flash_bench read ceiling's kernel)
//   bulk:      one thread per CTA streams 32 KiB chunks into a 4-stage
//              shared-memory ring with cp.async.bulk (the copy engine)
//   decode16:  the decode kernel's pattern without its arithmetic: one CTA
//              per (batch 32, K/V head 8), 128 threads, each CTA reading its
//              head's 256 bytes of every key row (rows 2 KiB apart) of K
//              then V, 32768 keys, 8 loads in flight per thread
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

constexpr size_t kBytes = size_t{4} << 30;

__global__ void __launch_bounds__(512) linear16(const uint4* __restrict__ src, size_t count, unsigned* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) atomicXor(sink, acc);
}

constexpr int kChunk = 32 * 1024;
constexpr int kStages = 4;

__global__ void __launch_bounds__(32) bulk(const char* __restrict__ src, size_t chunks, unsigned* sink) {
  extern __shared__ __align__(128) char ring[];
  __shared__ __align__(8) uint64_t bars[kStages];
  if (threadIdx.x != 0) return;
  const uint32_t ring_s = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  for (int s = 0; s < kStages; ++s) {
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[s]));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto issue = [&](size_t c, int s) {
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[s]));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(kChunk) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            ring_s + s * kChunk),
        "l"(src + c * kChunk), "r"(kChunk), "r"(b)
        : "memory");
  };
  size_t c = blockIdx.x;
  int k = 0;
  for (int s = 0; s < kStages && c + size_t(s) * gridDim.x < chunks; ++s) issue(c + size_t(s) * gridDim.x, s);
  unsigned acc = 0;
  for (; c < chunks; c += gridDim.x, ++k) {
    const int s = k % kStages;
    const uint32_t parity = (k / kStages) & 1;
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[s]));
    asm volatile(
        "{\n .reg .pred p;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT;\n}\n" ::"r"(b),
        "r"(parity)
        : "memory");
    acc ^= reinterpret_cast<const unsigned*>(ring + s * kChunk)[k & 255];
    const size_t next = c + size_t(kStages) * gridDim.x;
    if (next < chunks) issue(next, s);
  }
  if (acc == 0x12345678u) atomicXor(sink, acc);
}

// K and V [32, 32768, 8, 128] bf16 each: 2 GiB each.
__global__ void __launch_bounds__(128) decode16(const uint4* __restrict__ k, const uint4* __restrict__ v, unsigned* sink) {
  const int head = blockIdx.x % 8, batch = blockIdx.x / 8;
  constexpr int kRowUint4 = 8 * 128 * 2 / 16;  // 128 per key row (all heads)
  constexpr int kHeadUint4 = 128 * 2 / 16;     // 16 per head
  constexpr int kKeys = 32768;
  unsigned acc = 0;
  for (const uint4* t : {k, v}) {
    const uint4* base = t + (static_cast<size_t>(batch) * kKeys) * kRowUint4 + head * kHeadUint4;
    // 128 threads: 8 keys x 16 uint4 per step; 8 steps in flight.
    for (int key0 = 0; key0 < kKeys; key0 += 64) {
      uint4 x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int key = key0 + u * 8 + threadIdx.x / 16;
        x[u] = __ldg(base + size_t(key) * kRowUint4 + threadIdx.x % 16);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
  }
  if (acc == 0x12345678u) atomicXor(sink, acc);
}

int main() {
  char* buf = nullptr;
  char* flush = nullptr;
  unsigned* sink = nullptr;
  cudaMalloc(&buf, kBytes);
  cudaMalloc(&flush, size_t{120} << 20);
  cudaMalloc(&sink, 4);
  cudaMemset(buf, 0x5a, kBytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kChunk);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto time = [&](const char* name, auto launch) {
    for (int i = 0; i < 40; ++i) launch();  // warm-up (~40 ms)
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
      cudaMemsetAsync(flush, i, size_t{120} << 20);
      cudaEventRecord(a);
      launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float t = 0;
      cudaEventElapsedTime(&t, a, b);
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const cudaError_t err = cudaGetLastError();
    std::printf("%-10s %8.1f GB/s (median %.3f ms) %s\n", name, kBytes / (ms[10] * 1e-3) / 1e9, ms[10],
                err == cudaSuccess ? "" : cudaGetErrorString(err));
  };
  for (int round = 0; round < 2; ++round) {
    time("linear16", [&] { linear16<<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(buf), kBytes / 16, sink); });
    time("bulk", [&] { bulk<<<sms * 2, 32, kStages * kChunk>>>(buf, kBytes / kChunk, sink); });
    time("decode16", [&] {
      decode16<<<256, 128>>>(reinterpret_cast<const uint4*>(buf), reinterpret_cast<const uint4*>(buf + kBytes / 2), sink);
    });
  }
  return 0;
}
