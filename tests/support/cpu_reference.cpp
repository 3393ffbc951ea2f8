// float64 attention on the CPU: the slow, obviously-correct reference for
// small shapes. Scores, softcap, softmax and the P V sum are all in double;
// the only roundings are those of the fp16/bf16 inputs themselves.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "device_tensor.h"
#include "reference.h"

namespace flash::ref {

Status cpu_attention(const AttentionParams& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                     std::vector<double>* o, std::vector<double>* lse, const float* sinks, const float* alibi) {
  o->clear();
  lse->clear();
  if (uses_varlen_or_paging(p)) {
    Status s;
    s.code = StatusCode::kInvalidArgument;
    std::snprintf(s.message, sizeof(s.message),
                  "cpu_attention is dense-only: cu_seqlens_q/k, seqused_k and block_table must be null "
                  "(check varlen and paged calls per sequence)");
    return s;
  }
  const int64_t batch = p.batch, seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k;
  const int64_t heads_q = p.heads_q, head_dim = p.head_dim;
  const int64_t head_dim_v = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;  // V and O
  const int64_t group = p.heads_q / p.heads_kv;
  // The same float the library uses when softmax_scale is left at 0.
  const double scale =
      p.softmax_scale != 0.f ? p.softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const double softcap = p.softcap;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  o->assign(static_cast<size_t>(batch * seqlen_q * heads_q * head_dim_v), 0.0);
  lse->assign(static_cast<size_t>(batch * heads_q * seqlen_q), kNegInf);

  auto load = [&](const uint16_t* base, int64_t offset) {
    return static_cast<double>(to_float(base[offset], p.dtype));
  };
  std::vector<double> q_row(static_cast<size_t>(head_dim));
  std::vector<double> scores(static_cast<size_t>(seqlen_k));

  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < seqlen_q; ++i) {
        // Bottom-right aligned causal mask and sliding window.
        const KeyRange keys = visible_keys(i, seqlen_q, seqlen_k, p.causal, p.window_left, p.window_right);
        // The sink: one more logit in the softmax, with no V row.
        const double sink = sinks != nullptr ? static_cast<double>(sinks[h]) : kNegInf;
        const size_t lse_at = static_cast<size_t>((b * heads_q + h) * seqlen_q + i);
        if (keys.first > keys.last) {  // sees no key: O row 0, LSE the sink (-inf without one)
          (*lse)[lse_at] = sink;
          continue;
        }

        const int64_t q_offset = b * p.q_batch_stride + i * p.q_seq_stride + h * p.q_head_stride;
        for (int64_t d = 0; d < head_dim; ++d) q_row[d] = load(q, q_offset + d);

        double max_score = sink;
        for (int64_t j = keys.first; j <= keys.last; ++j) {
          const int64_t k_offset = b * p.k_batch_stride + j * p.k_seq_stride + hk * p.k_head_stride;
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) dot += q_row[d] * load(k, k_offset + d);
          double score = scale * dot;
          if (softcap > 0) score = softcap * std::tanh(score / softcap);
          if (alibi != nullptr) score -= alibi[h] * std::fabs(static_cast<double>(i + seqlen_k - seqlen_q - j));
          scores[j] = score;
          max_score = std::max(max_score, score);
        }
        double sum = sink == kNegInf ? 0.0 : std::exp(sink - max_score);
        for (int64_t j = keys.first; j <= keys.last; ++j) {
          scores[j] = std::exp(scores[j] - max_score);
          sum += scores[j];
        }

        double* o_row = o->data() + ((b * seqlen_q + i) * heads_q + h) * head_dim_v;
        for (int64_t j = keys.first; j <= keys.last; ++j) {
          const double weight = scores[j] / sum;
          const int64_t v_offset = b * p.v_batch_stride + j * p.v_seq_stride + hk * p.v_head_stride;
          for (int64_t d = 0; d < head_dim_v; ++d) o_row[d] += weight * load(v, v_offset + d);
        }
        (*lse)[lse_at] = max_score + std::log(sum);
      }
    }
  }
  return Status{};
}

}  // namespace flash::ref
