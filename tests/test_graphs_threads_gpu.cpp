// flash::attention_forward in a CUDA graph and from many host threads at
// once (DESIGN.md: "no allocation, no host sync and no device-wide state in
// the hot path, so a call can be captured in a CUDA graph. Thread-safe.
// Deterministic."):
//   - a call captured on a stream returns success during the capture, leaves
//     only kernel nodes in the graph, and every replay on fresh inputs
//     matches the cuBLAS reference and an eager call bitwise;
//   - eight threads, each with its own stream and shape, calling it
//     repeatedly and concurrently, each get the reference's result and the
//     same bits on every repeat.
// scripts/sanitize.sh runs these (filter GraphsThreads.*) under
// compute-sanitizer, so they stay small.
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device_tensor.h"
#include "gpu_case.h"

namespace flash::test {
namespace {

constexpr uint64_t kSeedBase = 2u << 20;  // apart from the matrix's and the edge cases' seeds

// `wanted` when compiled, else the other of 64/128, else any compiled head dim (0: none).
int64_t pick_head_dim(int64_t wanted) {
  if (head_dim_compiled(wanted)) return wanted;
  for (int64_t d : {64, 128, 32, 96, 256}) {
    if (head_dim_compiled(d)) return d;
  }
  return 0;
}

CaseConfig make_case(DType dtype, int64_t head_dim, bool causal, int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                     int64_t heads_q, int64_t heads_kv, Layout layout, uint64_t index) {
  CaseConfig cfg;
  cfg.dtype = dtype;
  cfg.head_dim = pick_head_dim(head_dim);
  cfg.causal = causal;
  cfg.batch = batch;
  cfg.seqlen_q = seqlen_q;
  cfg.seqlen_k = seqlen_k;
  cfg.heads_q = heads_q;
  cfg.heads_kv = heads_kv;
  cfg.layout = layout;
  cfg.seed = case_seed(kSeedBase + index);
  return cfg;
}

// A stream owned by the test, destroyed on scope exit.
struct OwnedStream {
  cudaStream_t stream = nullptr;
  OwnedStream() = default;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

// A captured graph and its executable instance, destroyed on scope exit.
struct OwnedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  OwnedGraph() = default;
  OwnedGraph(const OwnedGraph&) = delete;
  OwnedGraph& operator=(const OwnedGraph&) = delete;
  ~OwnedGraph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

::testing::AssertionResult cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " failed: " << cudaGetErrorString(err);
}

// Refills Q, K and V of a densely packed case (kBNHD or kBHND) in place with
// fresh values drawn from `seed`: same pointers, so a captured graph reads them.
::testing::AssertionResult refill_inputs(const AttentionCase& c, uint64_t seed, cudaStream_t stream) {
  const CaseConfig& cfg = c.config();
  const AttentionParams& p = c.params();
  const size_t q_count = static_cast<size_t>(cfg.batch * cfg.seqlen_q * cfg.heads_q * cfg.head_dim);
  const size_t kv_count = static_cast<size_t>(cfg.batch * cfg.seqlen_k * cfg.heads_kv * cfg.head_dim);
  auto ok = cuda_ok(ref::fill_uniform(const_cast<void*>(p.q), cfg.dtype, q_count, splitmix64(seed + 0),
                                      cfg.input_scale, stream), "filling Q");
  if (ok) ok = cuda_ok(ref::fill_uniform(const_cast<void*>(p.k), cfg.dtype, kv_count, splitmix64(seed + 1),
                                         cfg.input_scale, stream), "filling K");
  if (ok) ok = cuda_ok(ref::fill_uniform(const_cast<void*>(p.v), cfg.dtype, kv_count, splitmix64(seed + 2),
                                         cfg.input_scale, stream), "filling V");
  return ok;
}

// Poisons O and the LSE of a densely packed case, as AttentionCase::run_flash
// does before an eager call.
::testing::AssertionResult poison_outputs(const AttentionCase& c, cudaStream_t stream) {
  const CaseConfig& cfg = c.config();
  const size_t rows = static_cast<size_t>(cfg.batch * cfg.seqlen_q * cfg.heads_q);
  auto ok = cuda_ok(ref::poison(c.params().o, rows * cfg.head_dim * 2, stream), "poisoning O");
  if (ok && c.params().lse != nullptr) ok = cuda_ok(ref::poison(c.params().lse, rows * 4, stream), "poisoning LSE");
  return ok;
}

class GraphsThreads : public GpuTest {
 protected:
  // Captures one call of `cfg` with `backend` into a graph and replays it
  // three times on fresh inputs; see the test below.
  void check_graph_replays(const CaseConfig& cfg, Backend backend);
};

void GraphsThreads::check_graph_replays(const CaseConfig& cfg, Backend backend) {
  SCOPED_TRACE(cfg.name() + ", " + backend_name(backend) + ", seed " + std::to_string(cfg.seed));
  ASSERT_TRUE(cfg.layout == Layout::kBNHD || cfg.layout == Layout::kBHND) << "refill_inputs needs dense tensors";
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  AttentionParams p = c.params();
  p.backend = backend;

  // Global mode: while the capture is open, an unsafe call from any thread
  // (cudaMalloc, a synchronisation, a synchronous copy) fails and
  // invalidates the capture. It is the strictest mode and the one
  // frameworks capture with by default (torch.cuda.graph), so an allocation
  // or sync hidden in attention_forward fails here as it would for them.
  // (ThreadLocal would catch the same calls from this thread only; nothing
  // else runs during this test, so Global cannot trip over an unrelated call.)
  // No warm-up call first: the captured call may be the first use of its
  // kernel in the process, as it often is for a user (drivers of CUDA 12.3
  // and later load a kernel during a capture).
  OwnedGraph g;
  ASSERT_TRUE(cuda_ok(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture"));
  const Status s = attention_forward(p, stream_);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(stream_, &capture);
  const cudaError_t end = cudaStreamEndCapture(stream_, &g.graph);  // always end it: the stream stays usable
  ASSERT_TRUE(s.ok()) << "attention_forward during capture: " << s.message;
  ASSERT_TRUE(cuda_ok(query, "cudaStreamIsCapturing"));
  EXPECT_EQ(capture, cudaStreamCaptureStatusActive) << "attention_forward invalidated the capture";
  ASSERT_TRUE(cuda_ok(end, "cudaStreamEndCapture"));
  ASSERT_NE(g.graph, nullptr);

  // Only kernels: no memory allocation, memset, copy or host node.
  size_t num_nodes = 0;
  ASSERT_TRUE(cuda_ok(cudaGraphGetNodes(g.graph, nullptr, &num_nodes), "cudaGraphGetNodes"));
  EXPECT_GE(num_nodes, 1u) << "nothing was captured";
  std::vector<cudaGraphNode_t> nodes(num_nodes);
  ASSERT_TRUE(cuda_ok(cudaGraphGetNodes(g.graph, nodes.data(), &num_nodes), "cudaGraphGetNodes"));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    ASSERT_TRUE(cuda_ok(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType"));
    EXPECT_EQ(type, cudaGraphNodeTypeKernel) << "captured a node of type " << static_cast<int>(type);
  }
  ASSERT_TRUE(cuda_ok(cudaGraphInstantiate(&g.exec, g.graph, 0), "cudaGraphInstantiate"));

  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    ASSERT_TRUE(refill_inputs(c, splitmix64(cfg.seed ^ (0x100u + replay)), stream_));
    std::vector<double> ref_o, ref_lse;
    ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
    ASSERT_TRUE(poison_outputs(c, stream_));
    ASSERT_TRUE(cuda_ok(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch"));
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse));

    // The replay gives the bits an eager call gives.
    std::vector<uint16_t> graph_o, eager_o;
    std::vector<float> graph_lse, eager_lse;
    ASSERT_TRUE(c.read_raw(&graph_o, &graph_lse));
    const Status eager = c.run_flash_with(p);
    ASSERT_TRUE(eager.ok()) << eager.message;
    ASSERT_TRUE(c.read_raw(&eager_o, &eager_lse));
    EXPECT_TRUE(graph_o == eager_o) << "O of the graph replay differs from an eager call";
    EXPECT_EQ(std::memcmp(graph_lse.data(), eager_lse.data(), graph_lse.size() * sizeof(float)), 0)
        << "LSE of the graph replay differs from an eager call";
  }
}

TEST_F(GraphsThreads, CapturedCallReplaysOnFreshInputs) {
  const CaseConfig cases[] = {
      make_case(DType::kBFloat16, 128, false, 2, 512, 512, 8, 8, Layout::kBNHD, 1),
      // Causal GQA (8 query heads per K/V head), ragged lengths, seqlen_q < seqlen_k.
      make_case(DType::kFloat16, 64, true, 2, 300, 1000, 16, 2, Layout::kBHND, 2),
      // Causal GQA with seqlen_q > seqlen_k: the top rows see no key.
      make_case(DType::kBFloat16, 128, true, 1, 333, 129, 8, 2, Layout::kBNHD, 3),
  };
  for (const CaseConfig& cfg : cases) {
    if (cfg.head_dim == 0) GTEST_SKIP() << "no head dim compiled";
    for (Backend backend : backends_for(cfg)) {
      check_graph_replays(cfg, backend);
      if (HasFatalFailure()) return;
    }
  }
}

// What one thread of the test below did.
struct ThreadRun {
  Backend backend = Backend::kAuto;
  std::vector<Status> statuses;            // one per call made
  std::vector<std::vector<uint16_t>> o;    // O's raw bytes after each call
  std::vector<std::vector<float>> lse;     // the LSE after each call
  std::string error;                       // a failed read, if any
};

TEST_F(GraphsThreads, ConcurrentCallsFromHostThreads) {
  constexpr int kThreads = 8;
  constexpr int kRepeats = 5;
  // Every thread its own shape: head dims 64/128, causal or not, both
  // dtypes, MHA/GQA/MQA, ragged lengths both ways, three layouts.
  const CaseConfig configs[kThreads] = {
      make_case(DType::kBFloat16, 128, false, 1, 512, 512, 8, 8, Layout::kBNHD, 10),
      make_case(DType::kFloat16, 64, true, 2, 700, 700, 8, 2, Layout::kBNHD, 11),
      make_case(DType::kBFloat16, 64, true, 1, 257, 1000, 16, 4, Layout::kBHND, 12),
      make_case(DType::kFloat16, 128, false, 3, 129, 383, 4, 1, Layout::kPadded, 13),
      make_case(DType::kBFloat16, 128, true, 2, 384, 200, 8, 8, Layout::kBNHD, 14),
      make_case(DType::kFloat16, 64, false, 1, 1000, 65, 6, 2, Layout::kBHND, 15),
      make_case(DType::kBFloat16, 64, false, 2, 96, 2049, 4, 4, Layout::kPadded, 16),
      make_case(DType::kFloat16, 128, true, 1, 1024, 1024, 8, 1, Layout::kBNHD, 17),
  };
  if (configs[0].head_dim == 0) GTEST_SKIP() << "no head dim compiled";

  int device = 0;
  ASSERT_TRUE(cuda_ok(cudaGetDevice(&device), "cudaGetDevice"));
  OwnedStream streams[kThreads];
  std::vector<std::unique_ptr<AttentionCase>> cases;
  std::vector<ThreadRun> runs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(cuda_ok(cudaStreamCreateWithFlags(&streams[t].stream, cudaStreamNonBlocking), "cudaStreamCreate"));
    cases.push_back(std::make_unique<AttentionCase>(configs[t], streams[t].stream));
    ASSERT_TRUE(cases.back()->init()) << configs[t].name();
    // Rotate through the backends (and kAuto) so different kernels run side by side.
    std::vector<Backend> backends = backends_for(configs[t]);
    backends.push_back(Backend::kAuto);
    runs[t].backend = backends[t % backends.size()];
  }

  // The threads wait at a gate so that their calls overlap. No GoogleTest
  // assertion runs on them: they record, the main thread checks.
  std::mutex mutex;
  std::condition_variable gate;
  bool open = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadRun& run = runs[t];
      const cudaError_t set = cudaSetDevice(device);  // the current device is per thread
      {
        std::unique_lock<std::mutex> lock(mutex);
        gate.wait(lock, [&] { return open; });
      }
      if (set != cudaSuccess) {
        run.error = std::string("cudaSetDevice: ") + cudaGetErrorString(set);
        return;
      }
      run.o.resize(kRepeats);
      run.lse.resize(kRepeats);
      for (int r = 0; r < kRepeats; ++r) {
        run.statuses.push_back(cases[t]->run_flash(run.backend));
        if (!run.statuses.back().ok()) return;
        const ::testing::AssertionResult read = cases[t]->read_raw(&run.o[r], &run.lse[r]);
        if (!read) {
          run.error = read.message();
          return;
        }
      }
    });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
  }
  gate.notify_all();
  for (std::thread& thread : threads) thread.join();

  // References afterwards, one at a time, with the fixture's cuBLAS handle.
  for (int t = 0; t < kThreads; ++t) {
    const ThreadRun& run = runs[t];
    AttentionCase& c = *cases[t];
    SCOPED_TRACE("thread " + std::to_string(t) + ": " + c.config().name() + ", " + backend_name(run.backend) +
                 ", seed " + std::to_string(c.config().seed));
    bool all_ran = run.error.empty() && run.statuses.size() == static_cast<size_t>(kRepeats);
    EXPECT_TRUE(run.error.empty()) << run.error;
    for (size_t r = 0; r < run.statuses.size(); ++r) {
      EXPECT_TRUE(run.statuses[r].ok()) << "call " << r << ": " << run.statuses[r].message;
      all_ran = all_ran && run.statuses[r].ok();
    }
    if (!all_ran) {
      ADD_FAILURE() << "the thread did not complete its " << kRepeats << " calls";
      continue;
    }
    for (int r = 1; r < kRepeats; ++r) {
      EXPECT_TRUE(run.o[r] == run.o[0]) << "O of call " << r << " differs bitwise from call 0";
      ASSERT_EQ(run.lse[r].size(), run.lse[0].size());
      EXPECT_EQ(std::memcmp(run.lse[r].data(), run.lse[0].data(), run.lse[0].size() * sizeof(float)), 0)
          << "LSE of call " << r << " differs bitwise from call 0";
    }
    // O still holds the last call's result.
    std::vector<double> ref_o, ref_lse;
    ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse));
    EXPECT_TRUE(c.padding_untouched());
  }
}

}  // namespace
}  // namespace flash::test
