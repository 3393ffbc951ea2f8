// Does a TMA box land an e4m3 cache block in the pair layout the fp8-cache
// producer writes with cp.async (kernels/sm90/producer.cuh, Pair), its two
// halves swapped? A question for docs/perf/fp8-prefill.md ("TMA for the
// e4m3 copies"), asked on a GPU:
//
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/tma-pair-box scripts/probes/tma-pair-box.cu && /tmp/tma-pair-box
//
// The view: a key row's 128-byte line as (16 bytes, half h, chunk p), the
// half at stride 64 and the chunk at 16, so a box row is chunk p of half 0,
// chunk p of half 1, ... (16-byte slot 2p + h), then the key rows, then the
// row's lines (stride 128: head dim 256). With the 128-byte swizzle slot s
// of box row r lands at s ^ (r % 8). The pair layout has half 1 in slot 2p
// and half 0 in 2p + 1, the opposite order. Prints whether the encoder
// takes the strides and whether every byte lands where this says; exit 0
// when both hold.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kHeadDim = 256;   // bytes a key row (e4m3)
constexpr int kRows = 64;       // key rows a box
constexpr int kRowStride = 2048;  // bytes between key rows (8 heads)
constexpr int kKeys = 256;
constexpr int kLines = kHeadDim / 128;
constexpr int kBoxBytes = kRows * 128;

__global__ void load_box(const __grid_constant__ CUtensorMap map, int row0, unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) uint64_t bar;
  // The swizzle's phase follows the address: the box starts on 1024 bytes.
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  const uint32_t dst = (raw_addr + 1023u) & ~1023u;
  const unsigned char* smem = raw + (dst - raw_addr);
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(kLines * kBoxBytes)
                 : "memory");
    for (int g = 0; g < kLines; ++g) {
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, "
          "%7}], [%2];\n" ::"r"(dst + g * kBoxBytes),
          "l"(&map), "r"(b), "r"(0), "r"(0), "r"(0), "r"(row0), "r"(g)
          : "memory");
    }
    asm volatile(
        "{\n.reg .pred p;\nwait%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra wait%=;\n}\n" ::"r"(b)
        : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kLines * kBoxBytes; i += blockDim.x) out[i] = smem[i];
}

}  // namespace

int main() {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult query;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query) !=
          cudaSuccess ||
      query != cudaDriverEntryPointSuccess) {
    std::printf("no cuTensorMapEncodeTiled\n");
    return 2;
  }
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  std::vector<unsigned char> host(static_cast<size_t>(kKeys) * kRowStride);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>((i * 131 + i / 251) & 0xff);
  unsigned char *src = nullptr, *out = nullptr;
  cudaMalloc(&src, host.size());
  cudaMalloc(&out, kLines * kBoxBytes);
  cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice);

  const cuuint64_t dims[5] = {16, 2, 4, kKeys, kLines};
  const cuuint64_t strides[4] = {64, 16, kRowStride, 128};
  const cuuint32_t box[5] = {16, 2, 4, kRows, 1};
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  alignas(64) CUtensorMap map;
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, src, dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::printf("encode (strides 64, 16, %d, 128): %s\n", kRowStride, r == CUDA_SUCCESS ? "accepted" : "refused");
  if (r != CUDA_SUCCESS) return 1;

  const int row0 = 64;
  cudaFuncSetAttribute(load_box, cudaFuncAttributeMaxDynamicSharedMemorySize, kLines * kBoxBytes + 1024);
  load_box<<<1, 128, kLines * kBoxBytes + 1024>>>(map, row0, out);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("kernel: %s\n", cudaGetErrorString(e));
    return 1;
  }
  std::vector<unsigned char> got(kLines * kBoxBytes);
  cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int g = 0; g < kLines; ++g) {
    for (int row = 0; row < kRows; ++row) {
      for (int p = 0; p < 4; ++p) {
        for (int h = 0; h < 2; ++h) {
          const int slot = (2 * p + h) ^ (row % 8);
          for (int b = 0; b < 16; ++b) {
            const size_t want = static_cast<size_t>(row0 + row) * kRowStride + g * 128 + h * 64 + p * 16 + b;
            const size_t at = static_cast<size_t>(g) * kBoxBytes + row * 128 + slot * 16 + b;
            if (got[at] != host[want]) ++bad;
          }
        }
      }
    }
  }
  std::printf("bytes where the view puts them: %s (%d of %d differ)\n", bad == 0 ? "yes" : "no", bad,
              kLines * kBoxBytes);
  cudaFree(src);
  cudaFree(out);
  return bad == 0 ? 0 : 1;
}
