// Tuning keys, the thread-safe in-memory cache, its persistent file and the
// rule that picks cache, tuning or heuristic (see tune_cache.h). The JSON
// text itself is cache_json.cpp's.
//
// Everything here runs under noexcept library entry points, so no exception
// leaves these functions: they catch internally and degrade (a failed store
// drops the result, a failed lookup reports a miss, a failed load or save
// returns false with a message).
#include "tune_cache.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <memory>
#include <string_view>
#include <system_error>

#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "cache_json.h"

namespace flash::detail {
namespace {

// A cache file is a few hundred entries; anything this big is not one, and
// reading it whole would cost the caller that much memory.
constexpr size_t kMaxCacheFileBytes = size_t{16} << 20;
constexpr int64_t kMaxPow2 = int64_t{1} << 62;

const char* dtype_tag(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
  }
  return "dtype?";
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// Sets *out to `text`, never throwing (a message is best effort when memory
// has run out).
void set_message(std::string* out, std::string_view prefix, const char* text) noexcept {
  if (out == nullptr) return;
  try {
    *out = std::string(prefix) + text;
  } catch (...) {
    out->clear();
  }
}

// A value read from the file, for a message: as is when it is short plain
// text, else quoted with its control characters escaped (messages are one line).
std::string printable(const std::string& s) {
  const bool plain = s.size() <= 64 && !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
                       return c > 0x20 && c < 0x7F && c != '"' && c != '\\';
                     });
  return plain ? s : quote_for_message(s);
}

enum class ReadResult { kOk, kMissing, kFailed };

ReadResult read_whole_file(const std::string& path, std::string* text, std::string* why) {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::string too_big = "it is larger than " + std::to_string(kMaxCacheFileBytes >> 20) +
                              " MiB, so it is not a cache file this flash wrote";
  errno = 0;
#if defined(_WIN32)
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
#else
  // Only a regular file is read, and opening never blocks: O_NONBLOCK makes
  // open() return at once on a FIFO without a writer (which fstat then
  // rejects) instead of waiting for one forever; on a regular file it
  // changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return ReadResult::kMissing;
    *why = "cannot open it: " + errno_text(err);
    return ReadResult::kFailed;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    *why = "cannot stat it: " + errno_text(err);
    return ReadResult::kFailed;
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    *why = "it is not a regular file (a FIFO, device or directory is never read)";
    return ReadResult::kFailed;
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxCacheFileBytes) {
    ::close(fd);
    *why = too_big;
    return ReadResult::kFailed;
  }
  std::unique_ptr<std::FILE, Closer> file(::fdopen(fd, "rb"));
  if (!file) ::close(fd);
#endif
  if (!file) {
    const int err = errno;
    if (err == ENOENT) return ReadResult::kMissing;
    *why = "cannot open it: " + errno_text(err);
    return ReadResult::kFailed;
  }
  // Read in chunks up to one byte past the limit: a pipe or a file that
  // grows while it is read is caught too.
  constexpr size_t kChunk = size_t{1} << 16;
  while (true) {
    const size_t old_size = text->size();
    text->resize(old_size + kChunk);
    const size_t n = std::fread(&(*text)[old_size], 1, kChunk, file.get());
    text->resize(old_size + n);
    if (text->size() > kMaxCacheFileBytes) {
      *why = too_big;
      return ReadResult::kFailed;
    }
    if (n < kChunk) break;
  }
  if (std::ferror(file.get())) {
    *why = "cannot read it: " + errno_text(errno);
    return ReadResult::kFailed;
  }
  return ReadResult::kOk;
}

// "" when a file written under `file` may be used under `expected`, else why not.
std::string header_mismatch(const CacheFileHeader& file, const CacheFileHeader& expected) {
  if (file.flash_version != expected.flash_version) {
    return "written by flash " + printable(file.flash_version) + ", this is " + printable(expected.flash_version);
  }
  if (file.cuda_runtime != expected.cuda_runtime) {
    return "written under CUDA runtime " + std::to_string(file.cuda_runtime) + ", this is " +
           std::to_string(expected.cuda_runtime);
  }
  if (file.gpu != expected.gpu) {
    return "written for GPU " + quote_for_message(file.gpu) + ", this is " + quote_for_message(expected.gpu);
  }
  return {};
}

// Writes `text` to `tmp`, flushes it to disk and renames it over `path`, so
// a reader sees the old file or the new one, never a part. "" or why not;
// `tmp` never remains, whatever happens (an exception included).
std::string write_atomically(const std::string& tmp, const std::string& path, const std::string& text) {
  struct TempFile {
    const std::string& name;
    std::FILE* file = nullptr;
    bool renamed = false;
    ~TempFile() {
      if (file != nullptr) std::fclose(file);
      if (!renamed) std::remove(name.c_str());
    }
  };
#if !defined(_WIN32)
  // The rename would replace whatever `path` names: only a regular file (or
  // nothing) is replaced, never a FIFO, a device or a directory.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return path + " exists and is not a regular file";
  }
#endif
  std::FILE* file = std::fopen(tmp.c_str(), "wbx");  // x: fail rather than reuse an existing file
  if (file == nullptr) return "cannot create " + tmp + ": " + errno_text(errno);
  TempFile guard{tmp, file};
  if (std::fwrite(text.data(), 1, text.size(), file) != text.size() || std::fflush(file) != 0) {
    return "cannot write " + tmp + ": " + errno_text(errno);
  }
#if !defined(_WIN32)
  // Without it a crash soon after the rename can leave an empty file.
  if (::fsync(::fileno(file)) != 0) return "cannot sync " + tmp + ": " + errno_text(errno);
#endif
  guard.file = nullptr;
  if (std::fclose(file) != 0) return "cannot close " + tmp + ": " + errno_text(errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return "cannot rename " + tmp + " to " + path + ": " + errno_text(errno);
  }
  guard.renamed = true;
#if !defined(_WIN32)
  // Make the rename itself durable; best effort, the data is already safe.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
#endif
  return {};
}

}  // namespace

int64_t bucket_pow2(int64_t n) {
  if (n <= 0) return 0;
  if (n > kMaxPow2) return INT64_MAX;  // 2^63 does not fit; saturate
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::string TuneKey::str() const {
  std::string s = gpu;
  s += '|';
  s += std::to_string(sm_count);
  s += '|';
  s += dtype_tag(dtype);
  s += "|d" + std::to_string(head_dim);
  if (head_dim_v != 0) s += "v" + std::to_string(head_dim_v);
  s += causal ? "|causal" : "|full";
  s += "|g" + std::to_string(gqa_ratio);
  s += "|q" + std::to_string(seqlen_q_bucket);
  s += "|k" + std::to_string(seqlen_k_bucket);
  s += "|bh" + std::to_string(batch_heads_bucket);
  return s;
}

TuneKey make_tune_key(const AttentionParams& p, const std::string& gpu, int sm_count) {
  TuneKey key;
  key.gpu = gpu;
  key.sm_count = sm_count;
  key.dtype = p.dtype;
  key.head_dim = p.head_dim;
  key.head_dim_v = p.head_dim_v != 0 && p.head_dim_v != p.head_dim ? p.head_dim_v : 0;
  key.causal = p.causal;
  key.gqa_ratio = p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1;  // validate() rejects heads_kv < 1
  key.seqlen_q_bucket = bucket_pow2(p.seqlen_q);
  key.seqlen_k_bucket = bucket_pow2(p.seqlen_k);
  int64_t batch_heads = 0;
  if (__builtin_mul_overflow(p.batch, p.heads_q, &batch_heads)) batch_heads = INT64_MAX;
  key.batch_heads_bucket = bucket_pow2(batch_heads);
  return key;
}

std::optional<CacheEntry> TuneCache::lookup(const std::string& key) const {
  try {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  } catch (...) {
    return std::nullopt;  // out of memory copying the entry: a miss
  }
}

void TuneCache::store(const std::string& key, const CacheEntry& entry) {
  try {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    map_.insert_or_assign(key, entry);
  } catch (...) {
    // Out of memory: the result is dropped and the shape tuned again later.
  }
}

size_t TuneCache::size() const {
  try {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return map_.size();
  } catch (...) {
    return 0;  // the lock failed (std::system_error); nothing can be said
  }
}

std::vector<std::pair<std::string, CacheEntry>> TuneCache::entries() const {
  std::vector<std::pair<std::string, CacheEntry>> out;
  try {
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      out.assign(map_.begin(), map_.end());
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  } catch (...) {
    out.clear();
  }
  return out;
}

bool TuneCache::load_file(const std::string& path, const CacheFileHeader& expected, std::string* warning) {
  if (warning != nullptr) warning->clear();
  try {
    const std::string prefix = "flash: ignoring autotune cache " + path + ": ";
    std::string text, why;
    const ReadResult read = read_whole_file(path, &text, &why);
    if (read == ReadResult::kMissing) return true;
    // Everything is parsed and checked before the cache is touched, so a
    // rejected file changes nothing.
    CacheFileContents contents;
    if (read == ReadResult::kOk && parse_cache_json(text, &contents, &why)) {
      why = header_mismatch(contents.header, expected);
    }
    if (!why.empty()) {
      set_message(warning, prefix, why.c_str());
      return false;
    }
    std::unique_lock<std::shared_mutex> lock(mutex_);
    // Walking the file backwards with try_emplace keeps the last of
    // duplicate keys, and keeps a key already in memory: a result this
    // process measured (or loaded earlier) is never replaced by the file's.
    for (auto it = contents.entries.rbegin(); it != contents.entries.rend(); ++it) {
      map_.try_emplace(std::move(it->first), std::move(it->second));
    }
    return true;
  } catch (const std::exception& e) {
    set_message(warning, "flash: ignoring autotune cache: ", e.what());
  } catch (...) {
    set_message(warning, "flash: ignoring autotune cache: ", "unexpected error");
  }
  return false;
}

bool TuneCache::save_file(const std::string& path, const CacheFileHeader& header, std::string* error) const {
  if (error != nullptr) error->clear();
  // One name per save, so concurrent saves (threads or processes) never
  // share a temporary file; the last rename wins.
  static std::atomic<uint64_t> counter{0};
  try {
    const std::string prefix = "flash: cannot save autotune cache " + path + ": ";
    std::string text, why;
    if (!write_cache_json(header, entries(), &text, &why)) {
      set_message(error, prefix, why.c_str());
      return false;
    }
#if defined(_WIN32)
    const long long pid = 0;
#else
    const long long pid = static_cast<long long>(::getpid());
#endif
    const std::string tmp = path + ".tmp." + std::to_string(pid) + "." + std::to_string(counter.fetch_add(1));
    why = write_atomically(tmp, path, text);
    if (!why.empty()) {
      set_message(error, prefix, why.c_str());
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    set_message(error, "flash: cannot save autotune cache: ", e.what());
  } catch (...) {
    set_message(error, "flash: cannot save autotune cache: ", "unexpected error");
  }
  return false;
}

TuneAction decide_tune_action(bool tuning_enabled, bool stream_capturing, bool cached) {
  if (cached) return TuneAction::kUseCache;
  if (tuning_enabled && !stream_capturing) return TuneAction::kTune;
  return TuneAction::kHeuristic;
}

}  // namespace flash::detail
