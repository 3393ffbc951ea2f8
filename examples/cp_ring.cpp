// Context-parallel causal prefill over NCCL with flash::cp, one process per
// GPU: `cp_ring [--world N] [--tokens T]`. The parent makes the NCCL id and
// forks N children; child r takes GPU r, builds its zigzag shard of one
// long sequence (chunks r and 2N - 1 - r of 2N; every rank derives the same
// tokens from the same seed), runs flash::cp::ring_attention_forward and
// checks its rows against the same attention computed by flash on the whole
// sequence on its own GPU (small enough for that here). Exit 0 when every
// rank matches; 77 when there are fewer GPUs than ranks.
//
// Run it with NCCL_NVLS_ENABLE=0 where NVLink multicast is off.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "flash/cp.hpp"

namespace {

#define CHECK_CUDA(x)                                                                           \
  do {                                                                                          \
    const cudaError_t err_ = (x);                                                               \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// bf16 bits of a deterministic pseudo-random value in [-1, 1) for element i.
uint16_t value_bits(uint64_t i, uint64_t seed) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  const float f = static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) * 2.f - 1.f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int run_rank(int rank, int world, int64_t tokens, ncclUniqueId id) {
  CHECK_CUDA(cudaSetDevice(rank));
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
    return 1;
  }
  const int64_t heads_q = 32, heads_kv = 8, head_dim = 128, c = tokens / (2 * world);
  const int64_t row_q = heads_q * head_dim, row_kv = heads_kv * head_dim;
  // The whole sequence on the host, [tokens, heads, head_dim] each.
  std::vector<uint16_t> q(static_cast<size_t>(tokens * row_q)), k(static_cast<size_t>(tokens * row_kv)), v(k.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = value_bits(i, 1);
  for (size_t i = 0; i < k.size(); ++i) k[i] = value_bits(i, 2), v[i] = value_bits(i, 3);
  // This rank's shard: chunks rank and 2 world - 1 - rank.
  std::vector<uint16_t> sq, sk, sv;
  for (int64_t g : {static_cast<int64_t>(rank), 2 * world - 1 - static_cast<int64_t>(rank)}) {
    sq.insert(sq.end(), q.begin() + g * c * row_q, q.begin() + (g + 1) * c * row_q);
    sk.insert(sk.end(), k.begin() + g * c * row_kv, k.begin() + (g + 1) * c * row_kv);
    sv.insert(sv.end(), v.begin() + g * c * row_kv, v.begin() + (g + 1) * c * row_kv);
  }
  void *dq, *dk, *dv, *dout, *buffer, *fq, *fk, *fv, *fout;
  CHECK_CUDA(cudaMalloc(&dq, sq.size() * 2));
  CHECK_CUDA(cudaMalloc(&dk, sk.size() * 2));
  CHECK_CUDA(cudaMalloc(&dv, sv.size() * 2));
  CHECK_CUDA(cudaMalloc(&dout, sq.size() * 2));
  CHECK_CUDA(cudaMemcpy(dq, sq.data(), sq.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, sk.data(), sk.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, sv.data(), sv.size() * 2, cudaMemcpyHostToDevice));

  flash::cp::RingParams rp;
  flash::AttentionParams& p = rp.local;
  p.dtype = flash::DType::kBFloat16;
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 2 * c;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.causal = true;
  p.set_contiguous_bnhd();
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  rp.rank = rank;
  rp.world = world;
  size_t bytes = 0;
  flash::Status s = flash::cp::ring_buffer_size(rp, &bytes);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.message);
    return 1;
  }
  CHECK_CUDA(cudaMalloc(&buffer, bytes));
  rp.buffer = buffer;
  rp.buffer_bytes = bytes;
  cudaStream_t stream, comm_stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  s = flash::cp::ring_attention_forward(rp, comm, stream, comm_stream);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.message);
    return 1;
  }
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  float ms = 0.f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));

  // The same rows from one flash call on the whole sequence.
  CHECK_CUDA(cudaMalloc(&fq, q.size() * 2));
  CHECK_CUDA(cudaMalloc(&fk, k.size() * 2));
  CHECK_CUDA(cudaMalloc(&fv, v.size() * 2));
  CHECK_CUDA(cudaMalloc(&fout, q.size() * 2));
  CHECK_CUDA(cudaMemcpy(fq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(fk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(fv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  flash::AttentionParams full = p;
  full.seqlen_q = full.seqlen_k = tokens;
  full.set_contiguous_bnhd();
  full.q = fq;
  full.k = fk;
  full.v = fv;
  full.o = fout;
  s = flash::attention_forward(full, stream);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.message);
    return 1;
  }
  std::vector<uint16_t> got(sq.size()), want(q.size());
  CHECK_CUDA(cudaMemcpyAsync(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaMemcpyAsync(want.data(), fout, want.size() * 2, cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  double diff = 0, norm = 0;
  int x = 0;
  for (int64_t g : {static_cast<int64_t>(rank), 2 * world - 1 - static_cast<int64_t>(rank)}) {
    for (int64_t e = 0; e < c * row_q; ++e) {
      const double a = bf16_to_float(got[static_cast<size_t>(x * c * row_q + e)]);
      const double b = bf16_to_float(want[static_cast<size_t>(g * c * row_q + e)]);
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    ++x;
  }
  const double rel = std::sqrt(diff / norm);
  std::printf("rank %d of %d: %lld tokens (chunks %d and %d of %d), ring %.3f ms, rel. L2 to the whole call %.2e\n",
              rank, world, static_cast<long long>(2 * c), rank, 2 * world - 1 - rank, 2 * world,
              static_cast<double>(ms), rel);
  ncclCommDestroy(comm);
  return rel < 1e-2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 2;
  int64_t tokens = 8192;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--world") == 0) world = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::atoll(argv[i + 1]);
  }
  if (world < 1 || tokens % (2 * world) != 0) {
    std::fprintf(stderr, "usage: cp_ring [--world N] [--tokens T], T a multiple of 2N\n");
    return 2;
  }
  // Count GPUs in a child: the parent must not touch CUDA before forking.
  int gpus = 0;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  if (fork() == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (write(fds[1], &n, sizeof(n)) != sizeof(n)) _exit(1);
    _exit(0);
  }
  if (read(fds[0], &gpus, sizeof(gpus)) != sizeof(gpus)) gpus = 0;
  wait(nullptr);
  if (gpus < world) {
    std::printf("cp_ring: %d ranks need %d GPUs; %d found, skipping\n", world, world, gpus);
    return 77;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<pid_t> children;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(run_rank(r, world, tokens, id));
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::printf("cp_ring: %d of %d ranks matched the whole call\n", world - failed, world);
  return failed == 0 ? 0 : 1;
}
