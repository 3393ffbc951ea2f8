// What flash_bench and flash_tune (tools/) share: the seed's sweep shape and
// the parsing of their --name=value flags.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flash/flash.hpp"

namespace flash_bench {

constexpr int64_t kSweepTokens = 16384;     // batch * seqlen of the seed's sweep
constexpr int64_t kSweepModelWidth = 2048;  // heads * head_dim of the seed's sweep

// Dense [B, N, H, D] self-attention of one sweep shape: batch = max(1,
// 16384 / N), heads = 2048 / head_dim. Pointers are left null.
inline flash::AttentionParams sweep_params(flash::DType dtype, int64_t head_dim, bool causal, int64_t seqlen) {
  flash::AttentionParams p;
  p.dtype = dtype;
  p.batch = std::max<int64_t>(1, kSweepTokens / seqlen);
  p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = p.heads_kv = kSweepModelWidth / head_dim;
  p.head_dim = head_dim;
  p.causal = causal;
  p.set_contiguous_bnhd();
  return p;
}

// Value of `--name=value` when `arg` is that flag, else nullptr.
inline const char* flag_value(const char* arg, const char* name) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return nullptr;
  return arg + n + 1;
}

inline std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    if (end > begin) items.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

inline bool parse_int(const std::string& text, int64_t min_value, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < min_value) return false;
  *out = value;
  return true;
}

// "" or a message naming `flag` and the bad item.
inline std::string parse_int_list(const char* flag, const char* value, int64_t min_value, std::vector<int64_t>* out) {
  out->clear();
  for (const std::string& item : split_commas(value)) {
    int64_t v = 0;
    if (!parse_int(item, min_value, &v)) {
      return std::string(flag) + ": '" + item + "' is not an integer >= " + std::to_string(min_value);
    }
    out->push_back(v);
  }
  if (out->empty()) return std::string(flag) + ": the list is empty";
  return {};
}

}  // namespace flash_bench
