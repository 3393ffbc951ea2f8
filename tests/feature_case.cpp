// One inference-engine call on the device and its per-sequence reference.
// See feature_case.h.
#include "feature_case.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "device_tensor.h"
#include "reference.h"

namespace flash::test {
namespace {

constexpr int64_t kPad = 8;             // elements of padding per head, row and batch/page when padded

#define RETURN_IF_CUDA_ERROR(expr)                                                              \
  do {                                                                                          \
    const cudaError_t err_ = (expr);                                                            \
    if (err_ != cudaSuccess) {                                                                  \
      return ::testing::AssertionFailure() << #expr << " failed: " << cudaGetErrorString(err_); \
    }                                                                                           \
  } while (0)

const char* dtype_name(DType dtype) {
  return dtype == DType::kFloat16 ? "fp16" : "bf16";
}

template <typename T>
std::string list(const std::vector<T>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + "]";
}

int64_t longest(const std::vector<int64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

bool all_equal(const std::vector<int64_t>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<int64_t>()) == values.end();
}

// The host twin of ref::fill_uniform's element: uniform in (-scale, scale),
// never zero, a function of (seed, index) only.
float uniform(uint64_t seed, uint64_t index, float scale) {
  constexpr float kInv2p24 = 1.0f / 16777216.0f;
  const uint64_t h = splitmix64(seed ^ splitmix64(index));
  const int32_t numerator = 2 * static_cast<int32_t>(h >> 40) + 1 - (1 << 24);
  return static_cast<float>(numerator) * kInv2p24 * scale;
}

// Allocates `dst` and copies `host` into it on `stream`, where the kernels
// that read it run (ref::upload_sync).
template <typename T>
cudaError_t upload(DeviceBuffer* dst, const std::vector<T>& host, cudaStream_t stream) {
  cudaError_t err = dst->allocate(host.size() * sizeof(T));
  if (err == cudaSuccess && !host.empty()) {
    err = ref::upload_sync(dst->ptr, host.data(), host.size() * sizeof(T), stream);
  }
  return err;
}

template <typename T>
cudaError_t download(std::vector<T>* host, const void* src, size_t count) {
  host->resize(count);
  if (count == 0) return cudaSuccess;
  return cudaMemcpy(host->data(), src, count * sizeof(T), cudaMemcpyDeviceToHost);
}

}  // namespace

const char* kv_layout_name(KvLayout kv) {
  switch (kv) {
    case KvLayout::kDense:
      return "dense";
    case KvLayout::kVarlen:
      return "varlen";
    case KvLayout::kPaged:
      return "paged";
  }
  return "?";
}

std::string FeatureConfig::name() const {
  std::string s = std::string(dtype_name(dtype)) + " hd" + std::to_string(head_dim) +
                  (head_dim_v != 0 ? "v" + std::to_string(head_dim_v) : std::string()) + " h" +
                  std::to_string(heads_q) + "/" + std::to_string(heads_kv);
  s += varlen_q
           ? " q:varlen" + list(seqlens_q)
           : " q:dense" + std::to_string(seqlens_q.empty() ? 0 : seqlens_q[0]) + "x" + std::to_string(seqlens_q.size());
  if (varlen_q && max_seqlen_q_slack != 0) s += "+" + std::to_string(max_seqlen_q_slack);
  if (tail_rows != 0) s += " tail" + std::to_string(tail_rows);
  s += " k:" + std::string(kv_layout_name(kv));
  if (kv == KvLayout::kPaged) s += std::to_string(page_size) + (shuffle_pages ? "shuffled" : "inorder");
  if (kv == KvLayout::kDense && k_capacity != 0) s += "cap" + std::to_string(k_capacity);
  s += list(seqlens_k);
  if (use_seqused_k) s += " seqused_k";
  if (padded) s += " padded";
  if (causal) s += " causal";
  if (window_left != -1 || window_right != -1) {
    s += " window(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")";
  }
  if (softcap != 0.f) s += " softcap " + std::to_string(softcap);
  if (!sinks.empty()) s += " sinks" + list(sinks);
  if (!alibi.empty()) s += " alibi" + list(alibi);
  if (softmax_scale != 0.f) s += " scale " + std::to_string(softmax_scale);
  if (input_scale != 1.f) s += " inputs x" + std::to_string(input_scale);
  if (!q_channel_log2.empty()) {
    s += " q channels x2^{";
    for (size_t i = 0; i < q_channel_log2.size(); ++i) s += (i ? "," : "") + std::to_string(q_channel_log2[i]);
    s += "}";
  }
  if (!with_lse) s += " no-lse";
  if (kv_dtype == KvDType::kFloat8E4M3) s += " kv:e4m3";
  if (!k_descale.empty()) s += " k_descale" + list(k_descale);
  if (!v_descale.empty()) s += " v_descale" + list(v_descale);
  return s;
}

DeviceBuffer::~DeviceBuffer() {
  cudaFree(ptr);
}

cudaError_t DeviceBuffer::allocate(size_t n) {
  cudaFree(ptr);
  ptr = nullptr;
  bytes = n;
  return cudaMalloc(&ptr, n < 256 ? 256 : n);
}

bool uses_sm90_unsupported_feature(const AttentionParams& p) {
  // KV-cache and fp8 calls run on the Hopper kernel unsplit only.
  const bool cache_kernel = p.block_table != nullptr || p.seqused_k != nullptr || p.kv_dtype != KvDType::kSame;
  return (cache_kernel && p.num_splits > 1) ||
         (p.cu_seqlens_q != nullptr && p.total_q <= 0) ||
         (p.cu_seqlens_k != nullptr && p.total_k <= 0);
}

bool sm90_runs(const AttentionParams& p) {
  if (uses_sm90_unsupported_feature(p)) return false;
  CaseConfig cfg;
  cfg.head_dim = std::max(p.head_dim, p.head_dim_v);
  const std::vector<Backend> backends = backends_for(cfg);
  if (std::find(backends.begin(), backends.end(), Backend::kSm90) == backends.end()) return false;
  // What the Hopper kernel's tensor maps describe: packed tensors as one
  // batch of total rows, dense ones as [batch, seqlen, heads].
  // A paged cache is num_pages "batches" of page_size rows.
  const bool varlen_q = p.cu_seqlens_q != nullptr, varlen_k = p.cu_seqlens_k != nullptr;
  const bool paged = p.block_table != nullptr;
  const int64_t q_rows = varlen_q ? p.total_q : p.seqlen_q, q_batch = varlen_q ? 1 : p.batch;
  const int64_t k_rows = paged ? p.page_size : varlen_k ? p.total_k : p.seqlen_k;
  const int64_t k_batch = paged ? p.num_pages : varlen_k ? 1 : p.batch;
  for (int64_t size : {q_batch, q_rows, k_batch, k_rows, p.heads_q, p.heads_kv}) {
    if (size <= 0) return false;
  }
  return tma_strides_describable(p, q_batch, q_rows, k_batch, k_rows);
}

// ---------------------------------------------------------------- FeatureCase

FeatureCase::FeatureCase(const FeatureConfig& cfg, cudaStream_t stream) : cfg_(cfg), stream_(stream) {}

::testing::AssertionResult FeatureCase::check_config() const {
  auto bad = [](const char* why) { return ::testing::AssertionFailure() << "bad FeatureConfig: " << why; };
  if (cfg_.seqlens_q.empty() || cfg_.seqlens_q.size() != cfg_.seqlens_k.size()) {
    return bad("seqlens_q and seqlens_k need the same, nonzero, number of entries");
  }
  for (size_t b = 0; b < cfg_.seqlens_q.size(); ++b) {
    if (cfg_.seqlens_q[b] < 0 || cfg_.seqlens_k[b] < 0) return bad("negative length");
  }
  if (!cfg_.varlen_q && !all_equal(cfg_.seqlens_q)) return bad("dense Q needs equal seqlens_q");
  if (cfg_.tail_rows < 0) return bad("tail_rows must be >= 0");
  if (cfg_.tail_rows > 0 && !cfg_.varlen_q && cfg_.kv != KvLayout::kVarlen) {
    return bad("tail_rows needs packed (varlen) Q or K");
  }
  if (cfg_.heads_q % cfg_.heads_kv != 0) return bad("heads_q must be a multiple of heads_kv");
  if (!cfg_.sinks.empty() && static_cast<int64_t>(cfg_.sinks.size()) != cfg_.heads_q) {
    return bad("sinks needs heads_q entries (or none)");
  }
  if (!cfg_.alibi.empty() && static_cast<int64_t>(cfg_.alibi.size()) != cfg_.heads_q) {
    return bad("alibi needs heads_q entries (or none)");
  }
  for (const auto* f : {&cfg_.k_descale, &cfg_.v_descale}) {
    if (cfg_.kv_dtype == KvDType::kSame && !f->empty()) return bad("descales need kv_dtype e4m3");
    if (!f->empty() && f->size() != 1 && static_cast<int64_t>(f->size()) != cfg_.heads_kv) {
      return bad("a descale needs 1 or heads_kv entries (or none)");
    }
    for (float x : *f) {
      int e = 0;
      if (!(x > 0.f) || std::frexp(x, &e) != 0.5f) return bad("descales must be positive powers of two");
    }
  }
  if (!cfg_.k_descale.empty() && !cfg_.v_descale.empty() && cfg_.k_descale.size() != cfg_.v_descale.size()) {
    return bad("k_descale and v_descale share descale_head_stride: equally many entries");
  }
  switch (cfg_.kv) {
    case KvLayout::kDense: {
      const int64_t capacity = cfg_.k_capacity != 0 ? cfg_.k_capacity : longest(cfg_.seqlens_k);
      if (longest(cfg_.seqlens_k) > capacity) return bad("a sequence has more keys than the capacity");
      if (!cfg_.use_seqused_k && (!all_equal(cfg_.seqlens_k) || cfg_.seqlens_k[0] != capacity)) {
        return bad("dense K without seqused_k needs every seqlens_k equal to the capacity");
      }
      break;
    }
    case KvLayout::kVarlen:
      if (cfg_.use_seqused_k) return bad("varlen K with seqused_k is not modelled");
      break;
    case KvLayout::kPaged:
      if (cfg_.page_size <= 0) return bad("page_size must be positive");
      if (!cfg_.use_seqused_k && !all_equal(cfg_.seqlens_k))
        return bad("paged K without seqused_k needs equal lengths");
      break;
  }
  return ::testing::AssertionSuccess();
}

void FeatureCase::plan() {
  const int64_t d = std::max(cfg_.head_dim, cfg_.value_dim());  // every tensor's row of one head
  // fp8 K/V rows need 16-byte (16-element) alignment.
  const int64_t pad = cfg_.padded ? (cfg_.kv_dtype == KvDType::kSame ? kPad : 2 * kPad) : 0;
  batch_ = cfg_.batch();

  // Rows of [.., heads, head_dim] with padded heads and rows when asked.
  auto rows_of = [&](int64_t heads) {
    Placement t;
    t.offset = pad;
    t.head_stride = d + pad;
    t.seq_stride = heads * t.head_stride + pad;
    return t;
  };

  // Q and O.
  q_ = rows_of(cfg_.heads_q);
  if (cfg_.varlen_q) {
    cu_q_.assign(1, 0);
    for (int64_t len : cfg_.seqlens_q) cu_q_.push_back(cu_q_.back() + static_cast<int32_t>(len));
    rows_ = cu_q_.back();
    seqlen_q_ = longest(cfg_.seqlens_q) + cfg_.max_seqlen_q_slack;
    q_elements_ = q_.offset + (rows_ + cfg_.tail_rows) * q_.seq_stride + pad;
  } else {
    seqlen_q_ = cfg_.seqlens_q[0];
    rows_ = batch_ * seqlen_q_;
    q_.batch_stride = seqlen_q_ * q_.seq_stride + pad;
    q_elements_ = q_.offset + batch_ * q_.batch_stride;
  }
  o_ = q_;
  o_elements_ = q_elements_;

  // K and V.
  k_ = rows_of(cfg_.heads_kv);
  switch (cfg_.kv) {
    case KvLayout::kDense: {
      seqlen_k_ = cfg_.k_capacity != 0 ? cfg_.k_capacity : longest(cfg_.seqlens_k);
      k_.batch_stride = seqlen_k_ * k_.seq_stride + pad;
      k_elements_ = k_.offset + batch_ * k_.batch_stride;
      break;
    }
    case KvLayout::kVarlen: {
      cu_k_.assign(1, 0);
      for (int64_t len : cfg_.seqlens_k) cu_k_.push_back(cu_k_.back() + static_cast<int32_t>(len));
      seqlen_k_ = longest(cfg_.seqlens_k);
      k_elements_ = k_.offset + (cu_k_.back() + cfg_.tail_rows) * k_.seq_stride + pad;
      break;
    }
    case KvLayout::kPaged: {
      const int64_t ps = cfg_.page_size;
      std::vector<int64_t> needed;
      for (int64_t len : cfg_.seqlens_k) needed.push_back((len + ps - 1) / ps);
      num_pages_ = std::accumulate(needed.begin(), needed.end(), int64_t{0}) + cfg_.spare_pages;
      num_pages_ = std::max<int64_t>(num_pages_, 1);
      max_pages_ = std::max<int64_t>(longest(needed) + cfg_.spare_table_entries, 1);
      table_stride_ = max_pages_ + cfg_.table_stride_pad;
      std::vector<int32_t> order(static_cast<size_t>(num_pages_));
      std::iota(order.begin(), order.end(), 0);
      if (cfg_.shuffle_pages) {
        std::mt19937_64 rng(splitmix64(cfg_.seed ^ 0x9A6E5ull));
        std::shuffle(order.begin(), order.end(), rng);
      }
      table_.assign(static_cast<size_t>(batch_ * table_stride_), -1);  // unused entries: -1
      size_t next = 0;
      for (int64_t b = 0; b < batch_; ++b) {
        for (int64_t page = 0; page < needed[b]; ++page) table_[b * table_stride_ + page] = order[next++];
      }
      k_.batch_stride = ps * k_.seq_stride + pad;  // between pages
      k_elements_ = k_.offset + num_pages_ * k_.batch_stride;
      seqlen_k_ = cfg_.use_seqused_k ? (cfg_.seqlen_k_hint != 0 ? cfg_.seqlen_k_hint : longest(cfg_.seqlens_k))
                                     : cfg_.seqlens_k[0];
      break;
    }
  }
  if (cfg_.use_seqused_k) {
    for (int64_t len : cfg_.seqlens_k) seqused_.push_back(static_cast<int32_t>(len));
  }
  lse_elements_ = cfg_.heads_q * rows_;
  q_elements_ = std::max<int64_t>(q_elements_, 64);
  o_elements_ = std::max<int64_t>(o_elements_, 64);
  k_elements_ = std::max<int64_t>(k_elements_, 64);
}

int64_t FeatureCase::q_row(const Placement& t, int64_t b, int64_t i) const {
  if (cfg_.varlen_q) return t.offset + (cu_q_[b] + i) * t.seq_stride;
  return t.offset + b * t.batch_stride + i * t.seq_stride;
}

int64_t FeatureCase::k_row(const Placement& t, int64_t b, int64_t j) const {
  switch (cfg_.kv) {
    case KvLayout::kDense:
      return t.offset + b * t.batch_stride + j * t.seq_stride;
    case KvLayout::kVarlen:
      return t.offset + (cu_k_[b] + j) * t.seq_stride;
    case KvLayout::kPaged: {
      const int64_t page = table_[b * table_stride_ + j / cfg_.page_size];
      return t.offset + page * t.batch_stride + (j % cfg_.page_size) * t.seq_stride;
    }
  }
  return 0;
}

int64_t FeatureCase::check_row(int64_t b, int64_t i) const {
  return cfg_.varlen_q ? cu_q_[b] + i : b * seqlen_q_ + i;
}

int64_t FeatureCase::lse_index(int64_t b, int64_t i, int64_t h) const {
  if (cfg_.varlen_q) return h * rows_ + cu_q_[b] + i;
  return (b * cfg_.heads_q + h) * seqlen_q_ + i;
}

const std::vector<double>& FeatureCase::e4m3_qk_allowance() {
  if (!e4m3_qk_allowance_.empty()) return e4m3_qk_allowance_;
  const int64_t d = cfg_.head_dim;
  const double scale = cfg_.softmax_scale != 0.f ? cfg_.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t q_per_kv = cfg_.heads_q / cfg_.heads_kv;
  std::vector<double> allowance(static_cast<size_t>(lse_elements_), 0.0);
  std::vector<float> q(static_cast<size_t>(d)), k;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t keys = keys_of(b);
    for (int64_t hk = 0; hk < cfg_.heads_kv; ++hk) {
      // |K| of this sequence and head, [keys, d], then every query row against it.
      k.resize(static_cast<size_t>(keys * d));
      for (int64_t j = 0; j < keys; ++j) {
        const int64_t at = k_row(k_, b, j) + hk * k_.head_stride;
        for (int64_t t = 0; t < d; ++t) k[j * d + t] = std::fabs(ref::to_float(k_host_[at + t], cfg_.dtype));
      }
      for (int64_t h = hk * q_per_kv; h < (hk + 1) * q_per_kv; ++h) {
        for (int64_t i = 0; i < cfg_.seqlens_q[b]; ++i) {
          const int64_t at = q_row(q_, b, i) + h * q_.head_stride;
          for (int64_t t = 0; t < d; ++t) q[t] = std::fabs(ref::to_float(q_host_[at + t], cfg_.dtype));
          float largest = 0.f;
          for (int64_t j = 0; j < keys; ++j) {
            float sum = 0.f;
            for (int64_t t = 0; t < d; ++t) sum += q[t] * k[j * d + t];
            largest = std::max(largest, sum);
          }
          allowance[static_cast<size_t>(lse_index(b, i, h))] = std::ldexp(largest * scale, -10);
        }
      }
    }
  }
  e4m3_qk_allowance_ = std::move(allowance);
  return e4m3_qk_allowance_;
}

AttentionParams FeatureCase::check_params() const {
  AttentionParams p;
  p.dtype = cfg_.dtype;
  p.batch = cfg_.varlen_q ? 1 : batch_;
  p.seqlen_q = cfg_.varlen_q ? rows_ : seqlen_q_;
  p.seqlen_k = seqlen_k_;
  p.heads_q = cfg_.heads_q;
  p.heads_kv = cfg_.heads_kv;
  p.head_dim = cfg_.head_dim;
  p.head_dim_v = cfg_.head_dim_v;
  return p;
}

int64_t FeatureCase::rows_seeing_no_key() const {
  int64_t rows = 0;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t len_q = cfg_.seqlens_q[b], len_k = keys_of(b);
    for (int64_t i = 0; i < len_q; ++i) {
      const ref::KeyRange r = ref::visible_keys(i, len_q, len_k, cfg_.causal, cfg_.window_left, cfg_.window_right);
      if (r.first > r.last) rows += cfg_.heads_q;
    }
  }
  return rows;
}

::testing::AssertionResult FeatureCase::init() {
  auto ok = check_config();
  if (!ok) return ok;
  plan();
  const int64_t d = cfg_.head_dim, dv = cfg_.value_dim();

  // Host inputs: NaN everywhere, then random values where a call may read.
  q_host_.assign(static_cast<size_t>(q_elements_), kPoison16);
  k_host_.assign(static_cast<size_t>(k_elements_), kPoison16);
  v_host_.assign(static_cast<size_t>(k_elements_), kPoison16);
  const uint64_t seed_q = splitmix64(cfg_.seed + 0), seed_k = splitmix64(cfg_.seed + 1),
                 seed_v = splitmix64(cfg_.seed + 2);
  // `channel_log2`: per-element powers of two (Q's outlier channels), or empty.
  auto fill_row = [&](std::vector<uint16_t>* host, uint64_t seed, int64_t row, int64_t heads, int64_t head_stride,
                      int64_t width, const std::vector<int>& channel_log2) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t e = 0; e < width; ++e) {
        const int64_t x = row + h * head_stride + e;
        float value = uniform(seed, static_cast<uint64_t>(x), cfg_.input_scale);
        if (!channel_log2.empty()) {
          value = std::ldexp(value, channel_log2[static_cast<size_t>(e) % channel_log2.size()]);
        }
        (*host)[x] = ref::from_float(value, cfg_.dtype);
      }
    }
  };
  const std::vector<int> no_channels;
  // fp8: the finite e4m3 codes of magnitude <= input_scale to draw from.
  const bool fp8 = cfg_.kv_dtype == KvDType::kFloat8E4M3;
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256 && fp8; ++c) {
    const float x = ref::e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isfinite(x) && std::fabs(x) <= cfg_.input_scale) codes.push_back(static_cast<uint8_t>(c));
  }
  if (fp8) {
    k_host8_.assign(static_cast<size_t>(k_elements_), 0x7f);
    v_host8_.assign(static_cast<size_t>(k_elements_), 0x7f);
  }
  bool exact = true;
  // K or V row `row`: random codes, and their dequantised values in dtype.
  auto fill_row8 = [&](std::vector<uint8_t>* bytes, std::vector<uint16_t>* host, const std::vector<float>& descale,
                       uint64_t seed, int64_t row, int64_t width) {
    for (int64_t h = 0; h < cfg_.heads_kv; ++h) {
      const float f = descale.empty() ? 1.f : descale[descale.size() == 1 ? 0 : static_cast<size_t>(h)];
      for (int64_t e = 0; e < width; ++e) {
        const int64_t x = row + h * k_.head_stride + e;
        const uint8_t c = codes[splitmix64(seed ^ splitmix64(static_cast<uint64_t>(x))) % codes.size()];
        (*bytes)[x] = c;
        const float value = ref::e4m3_to_float(c) * f;
        (*host)[x] = ref::from_float(value, cfg_.dtype);
        exact = exact && ref::to_float((*host)[x], cfg_.dtype) == value;
      }
    }
  };
  for (int64_t b = 0; b < batch_; ++b) {
    for (int64_t i = 0; i < cfg_.seqlens_q[b]; ++i) {
      fill_row(&q_host_, seed_q, q_row(q_, b, i), cfg_.heads_q, q_.head_stride, d, cfg_.q_channel_log2);
    }
    for (int64_t j = 0; j < keys_of(b); ++j) {
      if (fp8) {
        fill_row8(&k_host8_, &k_host_, cfg_.k_descale, seed_k, k_row(k_, b, j), d);
        fill_row8(&v_host8_, &v_host_, cfg_.v_descale, seed_v, k_row(k_, b, j), dv);
      } else {
        fill_row(&k_host_, seed_k, k_row(k_, b, j), cfg_.heads_kv, k_.head_stride, d, no_channels);
        fill_row(&v_host_, seed_v, k_row(k_, b, j), cfg_.heads_kv, k_.head_stride, dv, no_channels);
      }
    }
  }
  if (!exact) {
    return ::testing::AssertionFailure() << "bad FeatureConfig: a dequantised e4m3 value is not exact in the dtype "
                                         << "(descales too large or too small)";
  }

  RETURN_IF_CUDA_ERROR(upload(&q_dev_, q_host_, stream_));
  if (fp8) {
    RETURN_IF_CUDA_ERROR(upload(&k_dev_, k_host8_, stream_));
    RETURN_IF_CUDA_ERROR(upload(&v_dev_, v_host8_, stream_));
    if (!cfg_.k_descale.empty()) RETURN_IF_CUDA_ERROR(upload(&k_descale_dev_, cfg_.k_descale, stream_));
    if (!cfg_.v_descale.empty()) RETURN_IF_CUDA_ERROR(upload(&v_descale_dev_, cfg_.v_descale, stream_));
  } else {
    RETURN_IF_CUDA_ERROR(upload(&k_dev_, k_host_, stream_));
    RETURN_IF_CUDA_ERROR(upload(&v_dev_, v_host_, stream_));
  }
  RETURN_IF_CUDA_ERROR(o_dev_.allocate(static_cast<size_t>(o_elements_) * 2));
  RETURN_IF_CUDA_ERROR(lse_dev_.allocate(static_cast<size_t>(std::max<int64_t>(lse_elements_, 1)) * sizeof(float)));
  if (!cu_q_.empty()) RETURN_IF_CUDA_ERROR(upload(&cu_q_dev_, cu_q_, stream_));
  if (!cu_k_.empty()) RETURN_IF_CUDA_ERROR(upload(&cu_k_dev_, cu_k_, stream_));
  if (cfg_.use_seqused_k) RETURN_IF_CUDA_ERROR(upload(&seqused_k_, seqused_, stream_));
  if (!table_.empty()) RETURN_IF_CUDA_ERROR(upload(&table_dev_, table_, stream_));
  if (!cfg_.sinks.empty()) RETURN_IF_CUDA_ERROR(upload(&sinks_dev_, cfg_.sinks, stream_));
  if (!cfg_.alibi.empty()) RETURN_IF_CUDA_ERROR(upload(&alibi_dev_, cfg_.alibi, stream_));

  auto at = [](const DeviceBuffer& buffer, int64_t elements) { return static_cast<char*>(buffer.ptr) + elements * 2; };
  AttentionParams& p = params_;
  p = AttentionParams{};
  p.q = at(q_dev_, q_.offset);
  const int64_t kv_bytes = fp8 ? 1 : 2;
  p.k = static_cast<char*>(k_dev_.ptr) + k_.offset * kv_bytes;
  p.v = static_cast<char*>(v_dev_.ptr) + k_.offset * kv_bytes;
  p.kv_dtype = cfg_.kv_dtype;
  p.k_descale = cfg_.k_descale.empty() ? nullptr : static_cast<const float*>(k_descale_dev_.ptr);
  p.v_descale = cfg_.v_descale.empty() ? nullptr : static_cast<const float*>(v_descale_dev_.ptr);
  const size_t descales = std::max(cfg_.k_descale.size(), cfg_.v_descale.size());
  p.descale_head_stride = descales > 1 ? 1 : 0;
  p.o = at(o_dev_, o_.offset);
  p.lse = cfg_.with_lse ? static_cast<float*>(lse_dev_.ptr) : nullptr;
  p.dtype = cfg_.dtype;
  p.batch = batch_;
  p.seqlen_q = seqlen_q_;
  p.seqlen_k = seqlen_k_;
  p.heads_q = cfg_.heads_q;
  p.heads_kv = cfg_.heads_kv;
  p.head_dim = d;
  p.head_dim_v = cfg_.head_dim_v;
  // Offsets of the tensors are in the pointers; strides relative to them.
  p.q_batch_stride = cfg_.varlen_q ? 0 : q_.batch_stride;
  p.q_seq_stride = q_.seq_stride;
  p.q_head_stride = q_.head_stride;
  p.o_batch_stride = cfg_.varlen_q ? 0 : o_.batch_stride;
  p.o_seq_stride = o_.seq_stride;
  p.o_head_stride = o_.head_stride;
  p.k_batch_stride = p.v_batch_stride = cfg_.kv == KvLayout::kVarlen ? 0 : k_.batch_stride;
  p.k_seq_stride = p.v_seq_stride = k_.seq_stride;
  p.k_head_stride = p.v_head_stride = k_.head_stride;
  p.causal = cfg_.causal;
  p.softmax_scale = cfg_.softmax_scale;
  p.window_left = cfg_.window_left;
  p.window_right = cfg_.window_right;
  p.softcap = cfg_.softcap;
  p.sinks = cfg_.sinks.empty() ? nullptr : static_cast<const float*>(sinks_dev_.ptr);
  p.alibi_slopes = cfg_.alibi.empty() ? nullptr : static_cast<const float*>(alibi_dev_.ptr);
  p.cu_seqlens_q = cfg_.varlen_q ? static_cast<const int32_t*>(cu_q_dev_.ptr) : nullptr;
  p.cu_seqlens_k = cfg_.kv == KvLayout::kVarlen ? static_cast<const int32_t*>(cu_k_dev_.ptr) : nullptr;
  p.seqused_k = cfg_.use_seqused_k ? static_cast<const int32_t*>(seqused_k_.ptr) : nullptr;
  // The rows of the packed tensors, exact (the tail rows are no sequence's).
  p.total_q = cfg_.varlen_q ? rows_ : 0;
  p.total_k = cfg_.kv == KvLayout::kVarlen ? cu_k_.back() : 0;
  if (cfg_.kv == KvLayout::kPaged) {
    p.block_table = static_cast<const int32_t*>(table_dev_.ptr);
    p.block_table_batch_stride = table_stride_;
    p.max_pages_per_seq = max_pages_;
    p.page_size = cfg_.page_size;
    p.num_pages = num_pages_;
  }
  return ::testing::AssertionSuccess();
}

Status FeatureCase::run(Backend backend) {
  AttentionParams p = params_;
  p.backend = backend;
  return run(p);
}

cudaError_t FeatureCase::poison_outputs() {
  const cudaError_t err = ref::poison(o_dev_.ptr, static_cast<size_t>(o_elements_) * 2, stream_);
  if (err != cudaSuccess) return err;
  return ref::poison(lse_dev_.ptr, static_cast<size_t>(std::max<int64_t>(lse_elements_, 1)) * 4, stream_);
}

Status FeatureCase::run(const AttentionParams& p, int workspace_fill) {
  cudaError_t err = poison_outputs();
  if (err == cudaSuccess && p.workspace != nullptr && p.workspace_bytes > 0) {
    err = cudaMemsetAsync(p.workspace, workspace_fill, p.workspace_bytes, stream_);
  }
  if (err != cudaSuccess) {
    Status s;
    s.code = StatusCode::kCudaError;
    std::snprintf(s.message, sizeof(s.message), "poisoning the outputs failed: %s", cudaGetErrorString(err));
    return s;
  }
  return forward_checking_choice(p, stream_);
}

::testing::AssertionResult FeatureCase::read_raw(std::vector<uint16_t>* o, std::vector<float>* lse) {
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  RETURN_IF_CUDA_ERROR(download(o, o_dev_.ptr, static_cast<size_t>(o_elements_)));
  RETURN_IF_CUDA_ERROR(download(lse, lse_dev_.ptr, static_cast<size_t>(lse_elements_)));
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult FeatureCase::read_output(std::vector<float>* o, std::vector<float>* lse) {
  std::vector<uint16_t> raw;
  std::vector<float> raw_lse;
  auto ok = read_raw(&raw, &raw_lse);
  if (!ok) return ok;
  const int64_t d = cfg_.value_dim();
  o->assign(static_cast<size_t>(rows_ * cfg_.heads_q * d), 0.f);
  for (int64_t b = 0; b < batch_; ++b) {
    for (int64_t i = 0; i < cfg_.seqlens_q[b]; ++i) {
      for (int64_t h = 0; h < cfg_.heads_q; ++h) {
        const uint16_t* src = raw.data() + q_row(o_, b, i) + h * o_.head_stride;
        float* dst = o->data() + (check_row(b, i) * cfg_.heads_q + h) * d;
        for (int64_t e = 0; e < d; ++e) dst[e] = ref::to_float(src[e], cfg_.dtype);
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

::testing::AssertionResult FeatureCase::outputs_untouched() {
  std::vector<uint16_t> raw;
  std::vector<float> lse;
  auto ok = read_raw(&raw, &lse);
  if (!ok) return ok;
  return still_poisoned(raw, lse);
}

::testing::AssertionResult FeatureCase::padding_untouched() {
  std::vector<uint16_t> raw;
  std::vector<float> lse;
  auto ok = read_raw(&raw, &lse);
  if (!ok) return ok;
  std::vector<uint8_t> logical(raw.size(), 0);
  for (int64_t b = 0; b < batch_; ++b) {
    for (int64_t i = 0; i < cfg_.seqlens_q[b]; ++i) {
      for (int64_t h = 0; h < cfg_.heads_q; ++h) {
        std::memset(logical.data() + q_row(o_, b, i) + h * o_.head_stride, 1, static_cast<size_t>(cfg_.value_dim()));
      }
    }
  }
  int64_t written = 0;
  size_t first = 0;
  for (size_t x = 0; x < raw.size(); ++x) {
    if (!logical[x] && raw[x] != kPoison16 && written++ == 0) first = x;
  }
  if (written == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << written << " elements outside O's logical elements were written; first at "
                                       << "element " << first << " of the O buffer";
}

::testing::AssertionResult FeatureCase::reference(cublasHandle_t handle, std::vector<double>* o,
                                                  std::vector<double>* lse, SequenceReference which) {
  const int64_t d = cfg_.head_dim, dv = cfg_.value_dim(), hq = cfg_.heads_q, hkv = cfg_.heads_kv;
  o->assign(static_cast<size_t>(rows_ * hq * dv), 0.0);
  lse->assign(static_cast<size_t>(lse_elements_), -INFINITY);

  std::vector<uint16_t> qb, kb, vb;
  std::vector<double> ob, lseb;
  std::vector<float> host;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t len_q = cfg_.seqlens_q[b], len_k = keys_of(b);
    if (len_q == 0) continue;
    if (len_k == 0) {  // rows that see no key: O 0, LSE -inf or the head's sink
      for (int64_t i = 0; i < len_q && !cfg_.sinks.empty(); ++i) {
        for (int64_t h = 0; h < hq; ++h) (*lse)[static_cast<size_t>(lse_index(b, i, h))] = cfg_.sinks[h];
      }
      continue;
    }

    // This sequence's rows, gathered densely: [len, heads, head_dim] (V: head_dim_v).
    qb.resize(static_cast<size_t>(len_q * hq * d));
    kb.resize(static_cast<size_t>(len_k * hkv * d));
    vb.resize(static_cast<size_t>(len_k * hkv * dv));
    for (int64_t i = 0; i < len_q; ++i) {
      for (int64_t h = 0; h < hq; ++h) {
        std::memcpy(qb.data() + (i * hq + h) * d, q_host_.data() + q_row(q_, b, i) + h * q_.head_stride,
                    static_cast<size_t>(d) * 2);
      }
    }
    for (int64_t j = 0; j < len_k; ++j) {
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t src = k_row(k_, b, j) + h * k_.head_stride;
        std::memcpy(kb.data() + (j * hkv + h) * d, k_host_.data() + src, static_cast<size_t>(d) * 2);
        std::memcpy(vb.data() + (j * hkv + h) * dv, v_host_.data() + src, static_cast<size_t>(dv) * 2);
      }
    }

    AttentionParams r;
    r.dtype = cfg_.dtype;
    r.batch = 1;
    r.seqlen_q = len_q;
    r.seqlen_k = len_k;
    r.heads_q = hq;
    r.heads_kv = hkv;
    r.head_dim = d;
    r.head_dim_v = cfg_.head_dim_v;
    r.causal = cfg_.causal;
    r.window_left = cfg_.window_left;
    r.window_right = cfg_.window_right;
    r.softcap = cfg_.softcap;
    r.sinks = cfg_.sinks.empty() ? nullptr : static_cast<const float*>(sinks_dev_.ptr);
    r.alibi_slopes = cfg_.alibi.empty() ? nullptr : static_cast<const float*>(alibi_dev_.ptr);
    r.softmax_scale = cfg_.softmax_scale;
    r.set_contiguous_bnhd();

    if (which == SequenceReference::kCpu) {
      const Status s = ref::cpu_attention(r, qb.data(), kb.data(), vb.data(), &ob, &lseb,
                                          cfg_.sinks.empty() ? nullptr : cfg_.sinks.data(),
                                          cfg_.alibi.empty() ? nullptr : cfg_.alibi.data());
      if (!s.ok()) return ::testing::AssertionFailure() << "sequence " << b << ": cpu_attention: " << s.message;
    } else {
      DeviceBuffer q, k, v, o16, o32, l, workspace;
      RETURN_IF_CUDA_ERROR(upload(&q, qb, stream_));
      RETURN_IF_CUDA_ERROR(upload(&k, kb, stream_));
      RETURN_IF_CUDA_ERROR(upload(&v, vb, stream_));
      const size_t o_count = static_cast<size_t>(len_q * hq * dv);
      RETURN_IF_CUDA_ERROR(o16.allocate(o_count * 2));
      RETURN_IF_CUDA_ERROR(o32.allocate(o_count * sizeof(float)));
      RETURN_IF_CUDA_ERROR(l.allocate(static_cast<size_t>(hq * len_q) * sizeof(float)));
      r.q = q.ptr;
      r.k = k.ptr;
      r.v = v.ptr;
      r.o = o16.ptr;
      r.lse = static_cast<float*>(l.ptr);
      const size_t workspace_bytes = ref::standard_attention_workspace_bytes(r);
      RETURN_IF_CUDA_ERROR(workspace.allocate(workspace_bytes));
      const Status s =
          ref::standard_attention(r, static_cast<float*>(o32.ptr), workspace.ptr, workspace_bytes, handle, stream_);
      if (!s.ok()) return ::testing::AssertionFailure() << "sequence " << b << ": standard_attention: " << s.message;
      RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
      RETURN_IF_CUDA_ERROR(download(&host, o32.ptr, o_count));
      ob.assign(host.begin(), host.end());
      RETURN_IF_CUDA_ERROR(download(&host, l.ptr, static_cast<size_t>(hq * len_q)));
      lseb.assign(host.begin(), host.end());
    }

    // Scatter into check_params()' layout: ob is [len_q, hq, dv], lseb [hq, len_q].
    for (int64_t i = 0; i < len_q; ++i) {
      for (int64_t h = 0; h < hq; ++h) {
        std::copy_n(ob.data() + (i * hq + h) * dv, dv, o->data() + (check_row(b, i) * hq + h) * dv);
        (*lse)[static_cast<size_t>(lse_index(b, i, h))] = lseb[static_cast<size_t>(h * len_q + i)];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace flash::test
