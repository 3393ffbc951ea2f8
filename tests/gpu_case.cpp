// One attention case on the device, and the runs of flash and of the
// references on it. See gpu_case.h.
#include "gpu_case.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "device_tensor.h"
#include "reference.h"

namespace flash::test {
namespace {

constexpr int64_t kMinBufferElements = 64;

#define RETURN_IF_CUDA_ERROR(expr)                                                                    \
  do {                                                                                                \
    const cudaError_t err_ = (expr);                                                                  \
    if (err_ != cudaSuccess) {                                                                        \
      return ::testing::AssertionFailure() << #expr << " failed: " << cudaGetErrorString(err_);       \
    }                                                                                                 \
  } while (0)

// Device scratch freed on scope exit.
struct DeviceScratch {
  void* ptr = nullptr;
  ~DeviceScratch() { cudaFree(ptr); }
  cudaError_t allocate(size_t bytes) { return cudaMalloc(&ptr, bytes < 256 ? 256 : bytes); }
};

template <typename T>
cudaError_t copy_to_host(std::vector<T>* host, const void* device, size_t count) {
  host->resize(count);
  return cudaMemcpy(host->data(), device, count * sizeof(T), cudaMemcpyDeviceToHost);
}

}  // namespace


// ---------------------------------------------------------------- AttentionCase

AttentionCase::AttentionCase(const CaseConfig& cfg, cudaStream_t stream) : cfg_(cfg), stream_(stream) { plan(); }

AttentionCase::~AttentionCase() {
  for (Buffer& b : buffers_) cudaFree(b.ptr);
  cudaFree(lse_);
}

void AttentionCase::plan() {
  const int64_t batch = cfg_.batch, seqlen_q = cfg_.seqlen_q, seqlen_k = cfg_.seqlen_k;
  const int64_t heads_q = cfg_.heads_q, heads_kv = cfg_.heads_kv, d = cfg_.head_dim;
  auto bnhd = [&](int buffer, int64_t seqlen, int64_t heads) {
    return Placement{buffer, 0, seqlen * heads * d, heads * d, d};
  };
  auto bhnd = [&](int buffer, int64_t seqlen, int64_t heads) {
    return Placement{buffer, 0, heads * seqlen * d, d, seqlen * d};
  };
  auto span = [&](const Placement& t, int64_t seqlen, int64_t heads) {
    return t.offset + batch * t.batch_stride + seqlen * t.seq_stride + heads * t.head_stride;  // an upper bound
  };
  std::vector<int64_t> elements;
  switch (cfg_.layout) {
    case Layout::kBNHD:
    case Layout::kBHND: {
      const bool is_bnhd = cfg_.layout == Layout::kBNHD;
      auto dense = [&](int buffer, int64_t seqlen, int64_t heads) {
        return is_bnhd ? bnhd(buffer, seqlen, heads) : bhnd(buffer, seqlen, heads);
      };
      q_ = dense(0, seqlen_q, heads_q);
      k_ = dense(1, seqlen_k, heads_kv);
      v_ = dense(2, seqlen_k, heads_kv);
      o_ = dense(3, seqlen_q, heads_q);
      elements = {batch * seqlen_q * heads_q * d, batch * seqlen_k * heads_kv * d, batch * seqlen_k * heads_kv * d,
                  batch * seqlen_q * heads_q * d};
      break;
    }
    case Layout::kPacked: {
      if (seqlen_q == seqlen_k) {
        const int64_t row = (heads_q + 2 * heads_kv) * d;
        q_ = {0, 0, seqlen_q * row, row, d};
        k_ = {0, heads_q * d, seqlen_q * row, row, d};
        v_ = {0, (heads_q + heads_kv) * d, seqlen_q * row, row, d};
        o_ = bhnd(1, seqlen_q, heads_q);
        elements = {batch * seqlen_q * row, batch * seqlen_q * heads_q * d};
      } else {
        const int64_t row = 2 * heads_kv * d;
        q_ = bnhd(0, seqlen_q, heads_q);
        k_ = {1, 0, seqlen_k * row, row, d};
        v_ = {1, heads_kv * d, seqlen_k * row, row, d};
        o_ = bhnd(2, seqlen_q, heads_q);
        elements = {batch * seqlen_q * heads_q * d, batch * seqlen_k * row, batch * seqlen_q * heads_q * d};
      }
      break;
    }
    case Layout::kPadded: {
      // Like a KV cache with spare capacity: padded heads, rows and batches,
      // and 8 elements of padding before the first one.
      auto padded = [&](int buffer, int64_t seqlen, int64_t heads) {
        const int64_t head_stride = d + 8;
        const int64_t seq_stride = heads * head_stride + 8;
        return Placement{buffer, 8, (seqlen + 3) * seq_stride, seq_stride, head_stride};
      };
      q_ = padded(0, seqlen_q, heads_q);
      k_ = padded(1, seqlen_k, heads_kv);
      v_ = padded(2, seqlen_k, heads_kv);
      o_ = padded(3, seqlen_q, heads_q);
      elements = {span(q_, seqlen_q, heads_q), span(k_, seqlen_k, heads_kv), span(v_, seqlen_k, heads_kv),
                  span(o_, seqlen_q, heads_q)};
      break;
    }
    case Layout::kBroadcastKV: {
      q_ = bnhd(0, seqlen_q, heads_q);
      k_ = {1, 0, 0, 0, d};
      v_ = {2, 0, 0, heads_kv * d, d};
      o_ = bnhd(3, seqlen_q, heads_q);
      elements = {batch * seqlen_q * heads_q * d, heads_kv * d, seqlen_k * heads_kv * d,
                  batch * seqlen_q * heads_q * d};
      break;
    }
  }
  buffers_.resize(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) buffers_[i].elements = std::max(elements[i], kMinBufferElements);

  params_ = AttentionParams{};
  params_.dtype = cfg_.dtype;
  params_.batch = batch;
  params_.seqlen_q = seqlen_q;
  params_.seqlen_k = seqlen_k;
  params_.heads_q = heads_q;
  params_.heads_kv = heads_kv;
  params_.head_dim = d;
  params_.causal = cfg_.causal;
  params_.softmax_scale = cfg_.softmax_scale;
  params_.window_left = cfg_.window_left;
  params_.window_right = cfg_.window_right;
  params_.softcap = cfg_.softcap;
  params_.q_batch_stride = q_.batch_stride;
  params_.q_seq_stride = q_.seq_stride;
  params_.q_head_stride = q_.head_stride;
  params_.k_batch_stride = k_.batch_stride;
  params_.k_seq_stride = k_.seq_stride;
  params_.k_head_stride = k_.head_stride;
  params_.v_batch_stride = v_.batch_stride;
  params_.v_seq_stride = v_.seq_stride;
  params_.v_head_stride = v_.head_stride;
  params_.o_batch_stride = o_.batch_stride;
  params_.o_seq_stride = o_.seq_stride;
  params_.o_head_stride = o_.head_stride;
}

void AttentionCase::mark(const Placement& t, int64_t seqlen, int64_t heads, std::vector<uint8_t>* mask) const {
  for (int64_t b = 0; b < cfg_.batch; ++b) {
    for (int64_t i = 0; i < seqlen; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t row = t.offset + b * t.batch_stride + i * t.seq_stride + h * t.head_stride;
        std::memset(mask->data() + row, 1, static_cast<size_t>(cfg_.head_dim));
      }
    }
  }
}

::testing::AssertionResult AttentionCase::download(int buffer, std::vector<uint16_t>* host) {
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  RETURN_IF_CUDA_ERROR(copy_to_host(host, buffers_[buffer].ptr, static_cast<size_t>(buffers_[buffer].elements)));
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AttentionCase::init() {
  for (Buffer& b : buffers_) RETURN_IF_CUDA_ERROR(cudaMalloc(&b.ptr, static_cast<size_t>(b.elements) * 2));
  const int64_t lse_elements = std::max<int64_t>(cfg_.batch * cfg_.heads_q * cfg_.seqlen_q, 1);
  RETURN_IF_CUDA_ERROR(cudaMalloc(reinterpret_cast<void**>(&lse_), static_cast<size_t>(lse_elements) * sizeof(float)));

  auto address = [&](const Placement& t) { return static_cast<char*>(buffers_[t.buffer].ptr) + t.offset * 2; };
  params_.q = address(q_);
  params_.k = address(k_);
  params_.v = address(v_);
  params_.o = address(o_);
  params_.lse = cfg_.with_lse ? lse_ : nullptr;

  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (static_cast<int>(i) == o_.buffer) continue;
    RETURN_IF_CUDA_ERROR(ref::fill_uniform(buffers_[i].ptr, cfg_.dtype, static_cast<size_t>(buffers_[i].elements),
                                           splitmix64(cfg_.seed + i), cfg_.input_scale, stream_));
  }
  if (cfg_.layout == Layout::kPadded) {
    // Input padding holds NaN: a kernel that reads it poisons its output.
    for (const Placement* t : {&q_, &k_, &v_}) {
      std::vector<uint8_t> mask(static_cast<size_t>(buffers_[t->buffer].elements), 0);
      const bool is_q = t == &q_;
      mark(*t, is_q ? cfg_.seqlen_q : cfg_.seqlen_k, is_q ? cfg_.heads_q : cfg_.heads_kv, &mask);
      std::vector<uint16_t> host;
      auto ok = download(t->buffer, &host);
      if (!ok) return ok;
      for (size_t x = 0; x < host.size(); ++x) {
        if (!mask[x]) host[x] = kPoison16;
      }
      RETURN_IF_CUDA_ERROR(ref::upload_sync(buffers_[t->buffer].ptr, host.data(), host.size() * 2, stream_));
    }
  }
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return ::testing::AssertionSuccess();
}

Status AttentionCase::run_flash(Backend backend) {
  AttentionParams p = params_;
  p.backend = backend;
  return run_flash_with(p);
}

cudaError_t AttentionCase::poison_outputs() {
  const Buffer& o = buffers_[o_.buffer];
  const size_t lse_bytes = static_cast<size_t>(std::max<int64_t>(cfg_.batch * cfg_.heads_q * cfg_.seqlen_q, 1)) * 4;
  cudaError_t err = ref::poison(o.ptr, static_cast<size_t>(o.elements) * 2, stream_);
  if (err == cudaSuccess) err = ref::poison(lse_, lse_bytes, stream_);
  return err;
}

Status AttentionCase::run_flash_with(const AttentionParams& p, bool default_stream) {
  const Buffer& o = buffers_[o_.buffer];
  const size_t lse_bytes = static_cast<size_t>(std::max<int64_t>(cfg_.batch * cfg_.heads_q * cfg_.seqlen_q, 1)) * 4;
  cudaError_t err = ref::poison(o.ptr, static_cast<size_t>(o.elements) * 2, stream_);
  if (err == cudaSuccess) err = ref::poison(lse_, lse_bytes, stream_);
  // The case's stream does not block on the legacy stream: the poison must land first.
  if (err == cudaSuccess && default_stream) err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess) {
    Status s;
    s.code = StatusCode::kCudaError;
    std::snprintf(s.message, sizeof(s.message), "poisoning the outputs failed: %s", cudaGetErrorString(err));
    return s;
  }
  return forward_checking_choice(p, default_stream ? nullptr : stream_);
}

::testing::AssertionResult AttentionCase::read_raw(std::vector<uint16_t>* o, std::vector<float>* lse) {
  auto ok = download(o_.buffer, o);
  if (!ok) return ok;
  const size_t lse_count = static_cast<size_t>(cfg_.batch * cfg_.heads_q * cfg_.seqlen_q);
  RETURN_IF_CUDA_ERROR(copy_to_host(lse, lse_, lse_count));
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AttentionCase::read_output(std::vector<float>* o, std::vector<float>* lse) {
  std::vector<uint16_t> raw;
  std::vector<float> raw_lse;
  auto ok = read_raw(&raw, &raw_lse);
  if (!ok) return ok;
  const int64_t d = cfg_.head_dim;
  o->resize(static_cast<size_t>(cfg_.batch * cfg_.seqlen_q * cfg_.heads_q * d));
  size_t x = 0;
  for (int64_t b = 0; b < cfg_.batch; ++b) {
    for (int64_t i = 0; i < cfg_.seqlen_q; ++i) {
      for (int64_t h = 0; h < cfg_.heads_q; ++h) {
        const uint16_t* row = raw.data() + o_.offset + b * o_.batch_stride + i * o_.seq_stride + h * o_.head_stride;
        for (int64_t e = 0; e < d; ++e) (*o)[x++] = ref::to_float(row[e], cfg_.dtype);
      }
    }
  }
  if (cfg_.with_lse) {
    *lse = std::move(raw_lse);
  } else {
    lse->clear();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AttentionCase::padding_untouched() {
  std::vector<uint16_t> raw;
  auto ok = download(o_.buffer, &raw);
  if (!ok) return ok;
  std::vector<uint8_t> mask(raw.size(), 0);
  mark(o_, cfg_.seqlen_q, cfg_.heads_q, &mask);
  int64_t written = 0;
  size_t first = 0;
  for (size_t x = 0; x < raw.size(); ++x) {
    if (!mask[x] && raw[x] != kPoison16 && written++ == 0) first = x;
  }
  if (written == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << written << " elements outside O's logical elements were written; first at "
                                       << "element " << first << " of the O buffer";
}

::testing::AssertionResult AttentionCase::outputs_untouched() {
  std::vector<uint16_t> raw;
  std::vector<float> lse;
  auto ok = read_raw(&raw, &lse);
  if (!ok) return ok;
  return still_poisoned(raw, lse);
}

::testing::AssertionResult AttentionCase::run_reference(cublasHandle_t handle, std::vector<double>* o,
                                                        std::vector<double>* lse) {
  const size_t o_count = static_cast<size_t>(cfg_.batch * cfg_.seqlen_q * cfg_.heads_q * cfg_.head_dim);
  const size_t lse_count = static_cast<size_t>(cfg_.batch * cfg_.heads_q * cfg_.seqlen_q);
  DeviceScratch ref_o, ref_o_f32, ref_lse, workspace;
  RETURN_IF_CUDA_ERROR(ref_o.allocate(o_count * 2));
  RETURN_IF_CUDA_ERROR(ref_o_f32.allocate(o_count * sizeof(float)));
  RETURN_IF_CUDA_ERROR(ref_lse.allocate(lse_count * sizeof(float)));
  AttentionParams p = params_;
  p.o = ref_o.ptr;
  p.lse = static_cast<float*>(ref_lse.ptr);
  p.o_head_stride = cfg_.head_dim;
  p.o_seq_stride = cfg_.heads_q * cfg_.head_dim;
  p.o_batch_stride = cfg_.seqlen_q * p.o_seq_stride;
  const size_t workspace_bytes = ref::standard_attention_workspace_bytes(p);
  RETURN_IF_CUDA_ERROR(workspace.allocate(workspace_bytes));
  const Status s = ref::standard_attention(p, static_cast<float*>(ref_o_f32.ptr), workspace.ptr, workspace_bytes,
                                           handle, stream_);
  if (!s.ok()) return ::testing::AssertionFailure() << "standard_attention: " << s.message;
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  std::vector<float> host;
  RETURN_IF_CUDA_ERROR(copy_to_host(&host, ref_o_f32.ptr, o_count));
  o->assign(host.begin(), host.end());
  RETURN_IF_CUDA_ERROR(copy_to_host(&host, ref_lse.ptr, lse_count));
  lse->assign(host.begin(), host.end());
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AttentionCase::run_cpu_reference(std::vector<double>* o, std::vector<double>* lse) {
  std::vector<std::vector<uint16_t>> host(buffers_.size());
  for (const Placement* t : {&q_, &k_, &v_}) {
    if (host[t->buffer].empty()) {
      auto ok = download(t->buffer, &host[t->buffer]);
      if (!ok) return ok;
    }
  }
  const Status s = ref::cpu_attention(params_, host[q_.buffer].data() + q_.offset,
                                      host[k_.buffer].data() + k_.offset, host[v_.buffer].data() + v_.offset, o, lse);
  if (!s.ok()) return ::testing::AssertionFailure() << "cpu_attention: " << s.message;
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- checks

void expect_matches_reference(const CaseConfig& cfg, cublasHandle_t handle, cudaStream_t stream, WorstErrors* worst,
                              Reference reference) {
  SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed));
  AttentionCase c(cfg, stream);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  if (reference == Reference::kCpu) {
    ASSERT_TRUE(c.run_cpu_reference(&ref_o, &ref_lse));
  } else {
    ASSERT_TRUE(c.run_reference(handle, &ref_o, &ref_lse));
  }
  for (Backend backend : backends_for(cfg)) {
    SCOPED_TRACE(backend_name(backend));
    const Status s = c.run_flash(backend);
    if (backend == Backend::kSm90 && s.code == StatusCode::kUnsupported && !tma_describable(c.params())) continue;
    if (!s.ok()) {
      ADD_FAILURE() << "attention_forward failed: " << s.message;
      continue;
    }
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    Errors errors;
    EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse, &errors));
    EXPECT_TRUE(c.padding_untouched());
    if (worst != nullptr) worst->add(errors);
  }
}

}  // namespace flash::test
