#include "ring.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>

#include "../status.h"
#include "schedule.h"

namespace flash::cp {
namespace detail {
namespace {

using flash::detail::make_status;

constexpr size_t kAlign = 256;
size_t align_up(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

Status invalid(const char* what) {
  return make_status(StatusCode::kInvalidArgument, "flash::cp: %s", what);
}

Status cuda_status(cudaError_t err, const char* what) {
  return err == cudaSuccess ? Status{}
                            : make_status(StatusCode::kCudaError, "flash::cp: %s: %s", what, cudaGetErrorString(err));
}

// Densely packed [batch, seq, heads, head_dim] strides.
bool dense_bnhd(int64_t batch_stride, int64_t seq_stride, int64_t head_stride, int64_t dim_stride, int64_t seq,
                int64_t heads, int64_t head_dim) {
  return dim_stride == 1 && head_stride == head_dim && seq_stride == heads * head_dim &&
         batch_stride == seq * heads * head_dim;
}

}  // namespace

Layout layout_of(const AttentionParams& p) {
  Layout l;
  l.chunk = p.seqlen_q / 2;
  const size_t elem = 2;  // fp16, bf16
  l.kv_bytes = static_cast<size_t>(p.batch * 2 * l.chunk * p.heads_kv * p.head_dim) * elem;
  l.o_bytes = static_cast<size_t>(p.batch * l.chunk * p.heads_q * p.head_dim) * elem;
  l.lse_bytes = static_cast<size_t>(p.batch * p.heads_q * l.chunk) * sizeof(float);
  size_t at = 0;
  for (int s = 0; s < 2; ++s) {
    l.slot_k[s] = at;
    at += align_up(l.kv_bytes);
    l.slot_v[s] = at;
    at += align_up(l.kv_bytes);
  }
  for (int x = 0; x < 2; ++x) {
    l.o_states[x] = at;
    at += 2 * align_up(l.o_bytes);
    l.lse_states[x] = at;
    at += 2 * align_up(l.lse_bytes);
  }
  l.total = at;
  return l;
}

Status check_shape(const RingParams& rp) noexcept {
  const AttentionParams& p = rp.local;
  if (rp.world < 1) return invalid("world must be at least 1");
  if (rp.rank < 0 || rp.rank >= rp.world) return invalid("rank must be in [0, world)");
  if (p.seqlen_q != p.seqlen_k || p.seqlen_q % 2 != 0 || p.seqlen_q <= 0) {
    return invalid("local.seqlen_q and seqlen_k must be equal, even and positive: the shard is two chunks of c tokens");
  }
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr || p.block_table != nullptr) {
    return invalid("varlen, seqused_k and paged K/V are not supported by the ring");
  }
  if (p.window_left >= 0 || (p.window_right >= 0 && !p.causal)) return invalid("windows are not supported by the ring");
  if (p.softcap != 0.f || p.sinks != nullptr || p.alibi_slopes != nullptr) {
    return invalid("softcap, sinks and ALiBi are not supported by the ring");
  }
  if (p.num_splits > 1) return invalid("num_splits > 1 is not supported by the ring (use 0 or 1)");
  if (p.k_new != nullptr || p.v_new != nullptr || p.rotary_cos != nullptr) {
    return invalid("appending K/V rows (k_new) and rotary are not supported by the ring");
  }
  if (p.kv_dtype != KvDType::kSame) {
    return invalid("an fp8 K/V (kv_dtype) is not supported by the ring; leave it KvDType::kSame");
  }
  if (p.head_dim_v != 0 && p.head_dim_v != p.head_dim) {
    return invalid("a V head dim of its own (head_dim_v) is not supported by the ring; leave it 0");
  }
  if (p.head_dim > 256) return invalid("head_dim above 256 is not supported by the ring (merge_states stops there)");
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) return invalid("dtype must be fp16 or bf16");
  if (!dense_bnhd(p.k_batch_stride, p.k_seq_stride, p.k_head_stride, p.k_dim_stride, p.seqlen_k, p.heads_kv,
                  p.head_dim) ||
      !dense_bnhd(p.v_batch_stride, p.v_seq_stride, p.v_head_stride, p.v_dim_stride, p.seqlen_k, p.heads_kv,
                  p.head_dim)) {
    return invalid("K and V must each be densely packed [batch, 2c, heads_kv, head_dim] (they are sent as they are)");
  }
  if (!dense_bnhd(p.o_batch_stride, p.o_seq_stride, p.o_head_stride, p.o_dim_stride, p.seqlen_q, p.heads_q,
                  p.head_dim)) {
    return invalid("O must be densely packed [batch, 2c, heads_q, head_dim]");
  }
  // The parts: each a valid attention call (sizes, pointers, head dims).
  AttentionParams part = p;
  part.seqlen_q = p.seqlen_q / 2;
  part.lse = nullptr;
  part.o_batch_stride = part.seqlen_q * p.heads_q * p.head_dim;
  part.workspace = nullptr;
  part.workspace_bytes = 0;
  part.num_splits = 0;
  return validate(part);
}

Ring::Ring(const RingParams& params) : params_(params), layout_(layout_of(params.local)) {}

const void* Ring::k_at(int step) const {
  return step == 0 ? params_.local.k : at(layout_.slot_k[step % 2]);
}
const void* Ring::v_at(int step) const {
  return step == 0 ? params_.local.v : at(layout_.slot_v[step % 2]);
}
void* Ring::k_next(int step) const {
  return at(layout_.slot_k[(step + 1) % 2]);
}
void* Ring::v_next(int step) const {
  return at(layout_.slot_v[(step + 1) % 2]);
}

Status Ring::compute_step(int step, cudaStream_t stream) {
  const AttentionParams& p = params_.local;
  const int64_t c = layout_.chunk;
  for (const Part& part : parts_of_step(params_.rank, params_.world, step, p.causal)) {
    const int x = part.q_chunk;
    const bool first = !seen_[x];
    AttentionParams a = p;
    a.seqlen_q = c;
    a.seqlen_k = part.keys * c;
    a.causal = part.causal;
    a.window_right = -1;
    a.q = static_cast<const char*>(p.q) + x * c * p.q_seq_stride * 2;
    // The held pair is [batch, 2c, heads_kv, head_dim]: the first part.keys * c rows of each sequence.
    a.k = k_at(step);
    a.v = v_at(step);
    a.o = at(layout_.o_states[x] + (first ? 0 : align_up(layout_.o_bytes)));
    a.o_batch_stride = c * p.heads_q * p.head_dim;
    a.o_seq_stride = p.heads_q * p.head_dim;
    a.o_head_stride = p.head_dim;
    a.o_dim_stride = 1;
    a.lse = reinterpret_cast<float*>(at(layout_.lse_states[x] + (first ? 0 : align_up(layout_.lse_bytes))));
    a.num_splits = 0;
    a.workspace = nullptr;
    a.workspace_bytes = 0;
    Status s = attention_forward(a, stream);
    if (!s.ok()) return s;
    seen_[x] = true;
    if (first) continue;
    // Running result and this part, merged in place into the running one.
    MergeParams m;
    m.dtype = p.dtype;
    m.num_states = 2;
    m.batch = p.batch;
    m.seqlen_q = c;
    m.heads = p.heads_q;
    m.head_dim = p.head_dim;
    m.set_contiguous();
    m.o_states = at(layout_.o_states[x]);
    m.o_state_stride = static_cast<int64_t>(align_up(layout_.o_bytes) / 2);
    m.lse_states = reinterpret_cast<const float*>(at(layout_.lse_states[x]));
    m.lse_state_stride = static_cast<int64_t>(align_up(layout_.lse_bytes) / sizeof(float));
    m.o = at(layout_.o_states[x]);
    m.lse = reinterpret_cast<float*>(at(layout_.lse_states[x]));
    s = merge_states(m, stream);
    if (!s.ok()) return s;
  }
  return Status{};
}

Status Ring::finish(cudaStream_t stream) const {
  const AttentionParams& p = params_.local;
  const int64_t c = layout_.chunk;
  const size_t row_bytes = static_cast<size_t>(c * p.heads_q * p.head_dim) * 2;  // one chunk of one sequence
  // cudaMemcpy2DAsync takes pitches below 2^31 bytes; longer chunks go one
  // sequence at a time.
  const bool one_copy = 2 * row_bytes < (size_t{1} << 31);
  for (int x = 0; x < 2; ++x) {
    char* o = static_cast<char*>(p.o) + static_cast<size_t>(x) * row_bytes;
    Status s;
    if (one_copy) {
      s = cuda_status(cudaMemcpy2DAsync(o, 2 * row_bytes, at(layout_.o_states[x]), row_bytes, row_bytes,
                                        static_cast<size_t>(p.batch), cudaMemcpyDeviceToDevice, stream),
                      "copying O");
    }
    for (int64_t b = 0; !one_copy && b < p.batch && s.ok(); ++b) {
      s = cuda_status(cudaMemcpyAsync(o + static_cast<size_t>(b) * 2 * row_bytes,
                                      at(layout_.o_states[x] + static_cast<size_t>(b) * row_bytes), row_bytes,
                                      cudaMemcpyDeviceToDevice, stream),
                      "copying O");
    }
    if (!s.ok()) return s;
    if (p.lse == nullptr) continue;
    const size_t lse_row = static_cast<size_t>(c) * sizeof(float);
    s = cuda_status(cudaMemcpy2DAsync(p.lse + x * c, 2 * lse_row, at(layout_.lse_states[x]), lse_row, lse_row,
                                      static_cast<size_t>(p.batch * p.heads_q), cudaMemcpyDeviceToDevice, stream),
                    "copying the LSE");
    if (!s.ok()) return s;
  }
  return Status{};
}

}  // namespace detail

Status ring_buffer_size(const RingParams& params, size_t* bytes) noexcept {
  if (bytes == nullptr) return detail::invalid("bytes is null");
  *bytes = 0;
  const Status s = detail::check_shape(params);
  if (!s.ok()) return s;
  *bytes = detail::layout_of(params.local).total;
  return Status{};
}

Status validate(const RingParams& params) noexcept {
  Status s = detail::check_shape(params);
  if (!s.ok()) return s;
  if (params.buffer == nullptr) return detail::invalid("buffer is null; pass ring_buffer_size() bytes");
  if (reinterpret_cast<uintptr_t>(params.buffer) % 256 != 0) return detail::invalid("buffer must be 256-byte aligned");
  const size_t need = detail::layout_of(params.local).total;
  if (params.buffer_bytes < need) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "flash::cp: buffer_bytes is %zu; the ring needs %zu (ring_buffer_size)",
                                      params.buffer_bytes, need);
  }
  return Status{};
}

namespace {

Status nccl_status(ncclResult_t r, const char* what) {
  return r == ncclSuccess
             ? Status{}
             : flash::detail::make_status(StatusCode::kCudaError, "flash::cp: %s: %s", what, ncclGetErrorString(r));
}

// Events of one call, destroyed on scope exit (cudaEventDestroy is safe
// while work that records them is still queued).
struct Events {
  cudaEvent_t entry = nullptr, computed = nullptr, received = nullptr;
  ~Events() {
    for (cudaEvent_t e : {entry, computed, received}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  cudaError_t create() {
    cudaError_t err = cudaSuccess;
    for (cudaEvent_t* e : {&entry, &computed, &received}) {
      if (err == cudaSuccess) err = cudaEventCreateWithFlags(e, cudaEventDisableTiming);
    }
    return err;
  }
};

}  // namespace

Status ring_attention_forward(const RingParams& params, ncclComm_t comm, CUstream_st* stream,
                              CUstream_st* comm_stream) noexcept {
  Status s = validate(params);
  if (!s.ok()) return s;
  if (comm == nullptr) return detail::invalid("comm is null");
  if (stream == comm_stream)
    return detail::invalid("stream and comm_stream must differ (the exchange overlaps the compute)");
  int count = 0, rank = 0;
  s = nccl_status(ncclCommCount(comm, &count), "ncclCommCount");
  if (s.ok()) s = nccl_status(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  if (!s.ok()) return s;
  if (count != params.world || rank != params.rank) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "flash::cp: the communicator has rank %d of %d; params say %d of %d", rank, count,
                                      params.rank, params.world);
  }
  Events ev;
  s = detail::cuda_status(ev.create(), "cudaEventCreate");
  if (!s.ok()) return s;
  const int world = params.world;
  const int next = (params.rank + 1) % world, prev = (params.rank + world - 1) % world;
  detail::Ring ring(params);
  // The exchange reads the caller's K/V first: after what `stream` holds now.
  s = detail::cuda_status(cudaEventRecord(ev.entry, stream), "cudaEventRecord");
  if (s.ok()) s = detail::cuda_status(cudaStreamWaitEvent(comm_stream, ev.entry, 0), "cudaStreamWaitEvent");
  for (int step = 0; step < world && s.ok(); ++step) {
    if (step + 1 < world) {
      // The slot step + 1's K/V arrive in held step - 1's: wait for that compute.
      if (step > 0) s = detail::cuda_status(cudaStreamWaitEvent(comm_stream, ev.computed, 0), "cudaStreamWaitEvent");
      if (!s.ok()) break;
      const size_t bytes = ring.kv_bytes();
      ncclResult_t r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(ring.k_at(step), bytes, ncclUint8, next, comm, comm_stream);
      if (r == ncclSuccess) r = ncclSend(ring.v_at(step), bytes, ncclUint8, next, comm, comm_stream);
      if (r == ncclSuccess) r = ncclRecv(ring.k_next(step), bytes, ncclUint8, prev, comm, comm_stream);
      if (r == ncclSuccess) r = ncclRecv(ring.v_next(step), bytes, ncclUint8, prev, comm, comm_stream);
      const ncclResult_t end = ncclGroupEnd();
      s = nccl_status(r != ncclSuccess ? r : end, "the K/V exchange");
      if (s.ok()) s = detail::cuda_status(cudaEventRecord(ev.received, comm_stream), "cudaEventRecord");
    }
    if (s.ok()) s = ring.compute_step(step, stream);
    if (s.ok()) s = detail::cuda_status(cudaEventRecord(ev.computed, stream), "cudaEventRecord");
    // The next step computes on what this step's exchange received.
    if (s.ok() && step + 1 < world) {
      s = detail::cuda_status(cudaStreamWaitEvent(stream, ev.received, 0), "cudaStreamWaitEvent");
    }
  }
  if (s.ok()) s = ring.finish(stream);
  // Whatever was enqueued on comm_stream joins `stream`, also after a failure part-way.
  if (cudaEventRecord(ev.received, comm_stream) == cudaSuccess) cudaStreamWaitEvent(stream, ev.received, 0);
  return s;
}

}  // namespace flash::cp
