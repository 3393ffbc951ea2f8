#include "results.h"

#include <ctime>
#include <map>
#include <mutex>
#include <tuple>

#include "options.h"

namespace flash_bench {
namespace {

struct Figures {
  double median_ms = 0.0;
  double tflops = 0.0;
  bool valid = false;
  std::string config;
};

struct Row {
  Figures flash;
  Figures standard;
  Figures tuned;
};

// The registry. Google Benchmark runs rows one at a time on the main
// thread; the mutex only keeps that assumption from being load-bearing.
std::mutex g_mutex;
std::map<ShapeKey, Row>& registry() {
  static std::map<ShapeKey, Row> rows;
  return rows;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

}  // namespace

// bf16 first, then fp16: the order of the sweep.
bool ShapeKey::operator<(const ShapeKey& o) const {
  return std::make_tuple(dtype != flash::DType::kBFloat16, head_dim, causal, seqlen) <
         std::make_tuple(o.dtype != flash::DType::kBFloat16, o.head_dim, o.causal, o.seqlen);
}

void record_attention(const ShapeKey& key, Impl impl, double median_ms, double tflops, const std::string& config) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Row& row = registry()[key];
  Figures& f = impl == Impl::kFlash ? row.flash : impl == Impl::kTuned ? row.tuned : row.standard;
  f.median_ms = median_ms;
  f.tflops = tflops;
  f.valid = true;
  f.config = config;
}

void print_summary(std::FILE* out, const std::string& gpu_name, const char* backend, double ceiling_tflops) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(out, "\n## flash_bench summary\n\n");
  std::fprintf(out, "- GPU: %s\n", gpu_name.c_str());
  std::fprintf(out, "- date: %s\n", utc_now().c_str());
  std::fprintf(out, "- flash %s, backend %s\n", flash::version(), backend);
  std::fprintf(out, "- ceiling: cuBLAS bf16 GEMM 8192^3 (fp32 accumulate), median: %.1f TFLOP/s\n", ceiling_tflops);
  std::fprintf(out, "- layout [B, N, H, D], B*N = 16384 tokens, H*D = 2048; causal square FLOPs = half of "
                    "4*B*H*N^2*D (FlashAttention convention)\n\n");
  if (registry().empty()) {
    std::fprintf(out, "(no attention rows ran)\n");
    return;
  }
  std::fprintf(out, "| dtype | head_dim | causal | N | flash TFLOP/s | frac of GEMM | standard TFLOP/s | speedup |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, row] : registry()) {
    char flash_tflops[32] = "-";
    char frac[32] = "-";
    char standard_tflops[32] = "-";
    char speedup[32] = "-";
    if (row.flash.valid) {
      std::snprintf(flash_tflops, sizeof(flash_tflops), "%.1f", row.flash.tflops);
      if (ceiling_tflops > 0.0) std::snprintf(frac, sizeof(frac), "%.3f", row.flash.tflops / ceiling_tflops);
    }
    if (row.standard.valid) std::snprintf(standard_tflops, sizeof(standard_tflops), "%.1f", row.standard.tflops);
    if (row.flash.valid && row.standard.valid && row.flash.median_ms > 0.0) {
      std::snprintf(speedup, sizeof(speedup), "%.1fx", row.standard.median_ms / row.flash.median_ms);
    }
    std::fprintf(out, "| %s | %lld | %s | %lld | %s | %s | %s | %s |\n", dtype_name(key.dtype),
                 static_cast<long long>(key.head_dim), key.causal ? "yes" : "no", static_cast<long long>(key.seqlen),
                 flash_tflops, frac, standard_tflops, speedup);
  }
  bool any_tuned = false;
  for (const auto& entry : registry()) any_tuned = any_tuned || entry.second.tuned.valid;
  if (any_tuned) {
    // Gains under 3% are within the run-to-run noise seen on the H200 (docs/perf/measurement.md).
    std::fprintf(out, "\n### heuristic vs autotuned\n\n");
    std::fprintf(out, "| dtype | head_dim | causal | N | heuristic | TFLOP/s | autotuned | TFLOP/s | gain |\n");
    std::fprintf(out, "|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& [key, row] : registry()) {
      if (!row.tuned.valid || !row.flash.valid) continue;
      const double gain = row.flash.median_ms / row.tuned.median_ms - 1.0;
      std::fprintf(out, "| %s | %lld | %s | %lld | %s | %.1f | %s | %.1f | %+.1f%%%s |\n", dtype_name(key.dtype),
                   static_cast<long long>(key.head_dim), key.causal ? "yes" : "no",
                   static_cast<long long>(key.seqlen), row.flash.config.c_str(), row.flash.tflops,
                   row.tuned.config.c_str(), row.tuned.tflops, 100.0 * gain, gain >= 0.03 ? " **" : "");
    }
    std::fprintf(out, "\n(** : the autotuned configuration beats the heuristic by >= 3%%)\n");
  }
  std::fflush(out);
}

}  // namespace flash_bench
