// Comparison of an attention output with a reference, with the error
// measure of DESIGN.md ("Verifying"): relative L2 error of O, max abs error
// of O, LSE error, and NaN never passes. Header-only and test-only (it
// needs GoogleTest, which flash_reference itself must not).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include "flash/flash.hpp"

namespace flash::test {

// What poison() (device_tensor.h) leaves in a 16-bit O element: all ones, a
// NaN in fp16 and bf16; the LSE's float32 elements become 0xFFFFFFFF.
constexpr uint16_t kPoison16 = 0xFFFF;

// Nothing in O (its raw 16-bit elements) or the LSE was written: all still poison.
inline ::testing::AssertionResult still_poisoned(const std::vector<uint16_t>& o, const std::vector<float>& lse) {
  for (size_t x = 0; x < o.size(); ++x) {
    if (o[x] != kPoison16) return ::testing::AssertionFailure() << "O buffer element " << x << " was written";
  }
  for (size_t x = 0; x < lse.size(); ++x) {
    uint32_t bits;
    std::memcpy(&bits, &lse[x], 4);
    if (bits != 0xFFFFFFFFu) return ::testing::AssertionFailure() << "LSE element " << x << " was written";
  }
  return ::testing::AssertionSuccess();
}

// Error bounds against a float32/float64 reference.
//
// The kernel rounds P = exp(s - m) to the input dtype before P V and rounds
// O to the dtype at the end; the cuBLAS reference rounds P too, at other
// points (normalised, one global max). Unit roundoff is u = 2^-8 for bf16
// (8 significant bits) and 2^-11 for fp16 (11), so one rounding has an rms
// relative error of about 0.4u; DESIGN.md measures a relative L2 error of
// about u overall (4e-3 bf16, 5e-4 fp16). The L2 bounds, 1e-2 and 2e-3,
// leave a 2.5-4x margin over that. The max abs error, relative to the
// largest |O|, is one element's worst case, a few u: bounded at 2.5e-2
// (~6u) and 4e-3 (~8u). The LSE is float32 throughout: 1e-3 relative.
struct ErrorBounds {
  double rel_l2;       // bound on ||out - ref||_2 / ||ref||_2
  double max_abs_rel;  // bound on max |out - ref| / max |ref|
  double lse_rel;      // bound on |lse - ref| / max(1, |ref|)
};

inline ErrorBounds bounds_for(DType dtype) {
  if (dtype == DType::kBFloat16) return {1e-2, 2.5e-2, 1e-3};
  return {2e-3, 4e-3, 1e-3};
}

// What one comparison measured.
struct Errors {
  double rel_l2 = 0;
  double max_abs = 0;
  double max_ref = 0;
  double max_lse = 0;  // max |lse - ref| / max(1, |ref|) over rows that see a key
  // With an LSE allowance: max |lse - ref| / the row's allowance.
  double max_of_allowance = 0;
  int64_t empty_rows = 0;

  double max_abs_rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

// The running worst errors over many cases, for a summary line.
struct WorstErrors {
  Errors worst;
  int64_t cases = 0;
  void add(const Errors& e) {
    ++cases;
    worst.rel_l2 = std::max(worst.rel_l2, e.rel_l2);
    worst.max_lse = std::max(worst.max_lse, e.max_lse);
    worst.max_of_allowance = std::max(worst.max_of_allowance, e.max_of_allowance);
    if (e.max_abs_rel() > worst.max_abs_rel()) {
      worst.max_abs = e.max_abs;
      worst.max_ref = e.max_ref;
    }
  }
};

// Compares O (float, dense [batch, seqlen_q, heads_q, head_dim_v or head_dim], NaN where
// the kernel wrote nothing) and, when `lse` is non-empty, the LSE
// ([batch, heads_q, seqlen_q]) with the reference. Rows whose reference LSE
// is -inf see no key: their LSE must be exactly -inf and their O exactly 0.
// Shape and dtype come from `p`; the measured errors go to `errors`.
// `lse_allowance` (in the LSE's layout, when given) widens each row's LSE
// bound by an absolute amount: the error of a Q K^T whose accumulator is
// coarser than float32 (FeatureCase::e4m3_qk_allowance).
inline ::testing::AssertionResult check_attention(const AttentionParams& p, const std::vector<float>& o,
                                                  const std::vector<float>& lse, const std::vector<double>& ref_o,
                                                  const std::vector<double>& ref_lse, Errors* errors = nullptr,
                                                  const std::vector<double>* lse_allowance = nullptr) {
  const ErrorBounds bounds = bounds_for(p.dtype);
  const int64_t head_dim = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;  // O's width
  const size_t rows = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q);
  if (o.size() != rows * head_dim || ref_o.size() != o.size() || ref_lse.size() != rows ||
      (!lse.empty() && lse.size() != rows) || (lse_allowance != nullptr && lse_allowance->size() != rows)) {
    return ::testing::AssertionFailure() << "size mismatch: o " << o.size() << ", ref_o " << ref_o.size()
                                         << ", lse " << lse.size() << ", ref_lse " << ref_lse.size()
                                         << ", lse_allowance " << (lse_allowance ? lse_allowance->size() : 0);
  }
  // Element e of the dense O is row r = (b * seqlen_q + i) * heads_q + h; its
  // LSE index is (b * heads_q + h) * seqlen_q + i.
  auto lse_index = [&](size_t r) {
    const int64_t h = static_cast<int64_t>(r) % p.heads_q;
    const int64_t bi = static_cast<int64_t>(r) / p.heads_q;
    const int64_t i = bi % p.seqlen_q;
    const int64_t b = bi / p.seqlen_q;
    return static_cast<size_t>((b * p.heads_q + h) * p.seqlen_q + i);
  };
  auto where = [&](size_t element) {
    const size_t r = element / head_dim;
    const int64_t h = static_cast<int64_t>(r) % p.heads_q;
    const int64_t bi = static_cast<int64_t>(r) / p.heads_q;
    std::ostringstream s;
    s << "[b=" << bi / p.seqlen_q << ", i=" << bi % p.seqlen_q << ", h=" << h << ", d=" << element % head_dim << "]";
    return s.str();
  };

  Errors e;
  int64_t non_finite = 0;
  size_t first_non_finite = 0;
  size_t worst = 0;
  double diff_sq = 0, ref_sq = 0;
  for (size_t x = 0; x < o.size(); ++x) {
    if (!std::isfinite(o[x])) {
      if (non_finite++ == 0) first_non_finite = x;
      continue;
    }
    const double d = std::abs(static_cast<double>(o[x]) - ref_o[x]);
    diff_sq += d * d;
    ref_sq += ref_o[x] * ref_o[x];
    e.max_ref = std::max(e.max_ref, std::abs(ref_o[x]));
    if (d > e.max_abs) {
      e.max_abs = d;
      worst = x;
    }
  }
  e.rel_l2 = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);

  std::ostringstream failure;
  if (non_finite > 0) {
    failure << "\n  " << non_finite << " elements of O are NaN/Inf (unwritten or overflowed), first at "
            << where(first_non_finite);
  }
  int64_t lse_bad = 0, empty_bad = 0;
  size_t first_lse_bad = 0, first_empty_bad = 0;
  for (size_t r = 0; r < rows; ++r) {
    const size_t li = lse_index(r);
    const double ref = ref_lse[li];
    if (ref == -INFINITY) {
      ++e.empty_rows;
      bool row_ok = lse.empty() || lse[li] == -INFINITY;
      for (int64_t d = 0; d < head_dim; ++d) row_ok = row_ok && o[r * head_dim + d] == 0.f;
      if (!row_ok && empty_bad++ == 0) first_empty_bad = r;
      continue;
    }
    if (lse.empty()) continue;
    const double err = std::abs(static_cast<double>(lse[li]) - ref) / std::max(1.0, std::abs(ref));
    const double allowed = lse_allowance != nullptr ? (*lse_allowance)[li] / std::max(1.0, std::abs(ref)) : 0.0;
    if (!std::isfinite(lse[li]) || !(err <= bounds.lse_rel + allowed)) {
      if (lse_bad++ == 0) first_lse_bad = r;
    }
    if (std::isfinite(err)) e.max_lse = std::max(e.max_lse, err);
    if (lse_allowance != nullptr && (*lse_allowance)[li] > 0 && std::isfinite(lse[li])) {
      e.max_of_allowance =
          std::max(e.max_of_allowance, std::abs(static_cast<double>(lse[li]) - ref) / (*lse_allowance)[li]);
    }
  }
  if (empty_bad > 0) {
    failure << "\n  " << empty_bad << " rows that see no key are not exactly O = 0, LSE = -inf; first "
            << where(first_empty_bad * head_dim) << " (lse " << (lse.empty() ? 0.f : lse[lse_index(first_empty_bad)])
            << ")";
  }
  if (lse_bad > 0) {
    const size_t li = lse_index(first_lse_bad);
    failure << "\n  " << lse_bad << " LSE values off by more than " << bounds.lse_rel << " * max(1, |ref|)"
            << (lse_allowance != nullptr ? " + the row's allowance" : "") << "; first " << where(first_lse_bad * head_dim)
            << ": " << lse[li] << " vs ref " << ref_lse[li];
    if (lse_allowance != nullptr) failure << " (allowance " << (*lse_allowance)[li] << ")";
  }
  if (!(e.rel_l2 <= bounds.rel_l2)) failure << "\n  relative L2 error exceeds the bound " << bounds.rel_l2;
  if (!(e.max_abs <= bounds.max_abs_rel * e.max_ref)) {
    failure << "\n  max abs error exceeds the bound " << bounds.max_abs_rel << " * max|ref|; worst at " << where(worst)
            << ": " << o[worst] << " vs ref " << ref_o[worst];
  }
  if (errors != nullptr) *errors = e;
  const std::string message = failure.str();
  if (message.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rel_l2 " << e.rel_l2 << ", max_abs " << e.max_abs << " (max|ref| "
                                       << e.max_ref << ", ratio " << e.max_abs_rel() << "), max lse err "
                                       << e.max_lse << ", rows seeing no key " << e.empty_rows << message;
}

}  // namespace flash::test
