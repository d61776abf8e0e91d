// Operation-level test: every op of every backend against the scalar CPU
// backend on one thread (the reference), by normalised mean squared error
// NMSE = sum (got - ref)^2 / sum ref^2. Every tensor is allocated through the
// backend's own Allocate, filled with Write and read back with Read, so the
// same test runs on device memory.
//
// Built twice: as sinew_model_backend_ops_test (candidates: every CPU SIMD level
// with 1 and 3 threads) and, with SINEW_OPS_TEST_CUDA, as the gpu-labelled
// sinew_model_cuda_ops_test (candidate: CUDA device 0; skipped with the reason
// when there is none).
//
// Tolerances: CPU candidates 1e-10 (the SIMD kernels compute the same integer
// sums over quantized activations; only float summation order differs). CUDA:
// 1e-6 for float ops, F32/F16/BF16 matmuls and the F32/F16 caches; 1e-4 for
// quantized matmuls and the Q8_0 cache (the CPU reference quantizes the
// activations to 8 bits, which alone costs ~1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/model/gguf_writer.h"

namespace sinew::model {
namespace {

struct Candidate {
  std::string label;
  std::function<Result<std::unique_ptr<Backend>>()> make;
  bool device = false;  // a GPU backend: the looser tolerances
};

std::vector<Candidate> AvailableCandidates(std::string* why_none) {
  std::vector<Candidate> out;
#ifdef SINEW_OPS_TEST_CUDA
  auto cuda = CreateCudaBackend(CudaBackendOptions{0});
  if (cuda.ok()) {
    out.push_back({"cuda:0", [] { return CreateCudaBackend(CudaBackendOptions{0}); }, true});
  } else {
    *why_none = "no CUDA backend: " + cuda.status().ToString();
  }
#else
  for (const char* simd : {"scalar", "avx2", "avx512"}) {
    for (int32_t threads : {1, 3}) {
      if (std::string(simd) == "scalar" && threads == 1) continue;  // the reference itself
      CpuBackendOptions o{threads, simd};
      if (CreateCpuBackend(o).ok()) {
        out.push_back({std::string(simd) + " x" + std::to_string(threads),
                       [o] { return CreateCpuBackend(o); }, false});
      }
    }
  }
  if (out.empty()) *why_none = "no CPU candidate";
#endif
  return out;
}

std::vector<float> Random(size_t n, uint64_t seed, float spread = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-spread, spread);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double Nmse(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return norm == 0 ? err : err / norm;
}

void Must(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.ToString());
}

// A tensor in a backend's memory.
struct Buf {
  std::unique_ptr<BackendBuffer> buffer;
  Tensor t;
};

// A tensor of `type` and shape `ne` in b's memory holding `bytes` (t.bytes() of them).
Buf Upload(Backend& b, GgmlType type, std::array<int64_t, 4> ne, const void* bytes) {
  Buf out;
  out.t.type = type;
  out.t.ne = ne;
  auto buffer = b.memory().Allocate(static_cast<size_t>(out.t.bytes()));
  Must(buffer.status());
  out.buffer = std::move(buffer).value();
  out.t.data = out.buffer->data();
  if (bytes != nullptr) Must(out.buffer->Write(0, bytes, static_cast<size_t>(out.t.bytes())));
  return out;
}

Buf UploadF32(Backend& b, const std::vector<float>& v, int64_t ne0, int64_t ne1 = 1,
              int64_t ne2 = 1) {
  if (static_cast<int64_t>(v.size()) != ne0 * ne1 * ne2) throw std::logic_error("shape");
  return Upload(b, GgmlType::kF32, {ne0, ne1, ne2, 1}, v.data());
}

Buf ZerosF32(Backend& b, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
  return Upload(b, GgmlType::kF32, {ne0, ne1, ne2, 1}, nullptr);
}

std::vector<float> Download(Backend& b, const Buf& buf) {
  Must(b.ops().Synchronize());
  std::vector<float> out(static_cast<size_t>(buf.t.elements()));
  Must(buf.buffer->Read(0, out.data(), out.size() * 4));
  return out;
}

class BackendOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ref = CreateCpuBackend(CpuBackendOptions{1, "scalar"});
    ASSERT_TRUE(ref.ok());
    reference_ = std::move(ref).value();
    std::string why_none;
    candidates_ = AvailableCandidates(&why_none);
    if (candidates_.empty()) GTEST_SKIP() << why_none;
    for (const Candidate& c : candidates_) {
      auto b = c.make();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      backends_.push_back(std::move(b).value());
    }
  }

  // Runs `op` on the reference and on every candidate backend (each with its
  // own copies of the inputs, made by `op` itself) and compares the outputs.
  // `device_tolerance` applies to device backends, 1e-10 to CPU ones.
  template <typename Op>
  void Compare(const std::string& what, double device_tolerance, Op op) {
    const std::vector<float> want = op(*reference_);
    double norm = 0;
    for (float v : want) norm += static_cast<double>(v) * v;
    ASSERT_GT(norm, 0) << what << ": the reference output is all zeros";
    for (size_t i = 0; i < backends_.size(); ++i) {
      Backend& b = *backends_[i];
      std::vector<float> got;
      try {
        got = op(b);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << " on " << candidates_[i].label << ": " << e.what();
        continue;
      }
      ASSERT_EQ(got.size(), want.size());
      const double nmse = Nmse(got, want);
      const double tolerance = candidates_[i].device ? device_tolerance : 1e-10;
      EXPECT_LE(nmse, tolerance) << what << " on " << b.name() << " (" << candidates_[i].label
                                 << ")";
    }
  }

  std::unique_ptr<Backend> reference_;
  std::vector<Candidate> candidates_;
  std::vector<std::unique_ptr<Backend>> backends_;
};

// The CUDA build names its suite apart, so ctest shows both binaries' tests.
#ifdef SINEW_OPS_TEST_CUDA
class CudaBackendOpsTest : public BackendOpsTest {};
#define OPS_TEST(name) TEST_F(CudaBackendOpsTest, name)
#else
#define OPS_TEST(name) TEST_F(BackendOpsTest, name)
#endif

bool IsFloatType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

std::vector<float> RunMatMul(Backend& b, GgmlType type, const std::string& wdata,
                             const std::vector<float>& x, int64_t K, int64_t N, int64_t M) {
  Buf w = Upload(b, type, {K, N, 1, 1}, wdata.data());
  Buf xt = UploadF32(b, x, K, M);
  Buf y = ZerosF32(b, N, M);
  Must(b.ops().MatMul(w.t, xt.t, y.t));
  return Download(b, y);
}

// A backend that says RowInvariant() computes every row of a matrix product
// bit for bit as it computes that row alone, whatever the batch: 9 rows at once
// (two groups of four and a single) against each row by itself, every type, row
// lengths with and without SIMD tails, on every candidate and the reference.
OPS_TEST(MatMulRowsBitIdenticalWhateverTheBatch) {
  std::vector<Backend*> all = {reference_.get()};
  for (auto& b : backends_) all.push_back(b.get());
  for (Backend* b : all) {
    if (!b->ops().MakeRowInvariant()) continue;
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                          GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      std::vector<int64_t> ks = {512};
      if (GgmlBlockSize(type) <= 32) ks.push_back(96);
      if (IsFloatType(type)) ks.push_back(172);
      for (int64_t K : ks) {
        const int64_t N = 19, M = 9;
        const std::vector<float> wf = Random(static_cast<size_t>(K * N), 5);
        const std::string wdata = EncodeTensorData(type, wf.data(), K * N);
        const std::vector<float> x = Random(static_cast<size_t>(K * M), 6);
        const std::vector<float> batched = RunMatMul(*b, type, wdata, x, K, N, M);
        for (int64_t m = 0; m < M; ++m) {
          const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
          const std::vector<float> alone = RunMatMul(*b, type, wdata, row, K, N, 1);
          for (int64_t n = 0; n < N; ++n) {
            ASSERT_EQ(batched[static_cast<size_t>(m * N + n)], alone[static_cast<size_t>(n)])
                << GgmlTypeName(type) << " K=" << K << " row " << m << " col " << n << " on "
                << b->name();
          }
        }
      }
    }
  }
}

OPS_TEST(MatMulEveryTypeAndBatch) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    // K = 512 for every type; K = 96 (not a multiple of 256) where blocks allow.
    std::vector<int64_t> ks = {512};
    if (GgmlBlockSize(type) <= 32) ks.push_back(96);
    for (int64_t K : ks) {
      for (int64_t M : {1, 2, 5, 8, 17, 67}) {
        const int64_t N = 67;
        const std::vector<float> wf = Random(static_cast<size_t>(K * N), 1);
        const std::string wdata = EncodeTensorData(type, wf.data(), K * N);
        const std::vector<float> x = Random(static_cast<size_t>(K * M), 2);
        Compare(std::string("MatMul ") + std::string(GgmlTypeName(type)) + " K=" +
                    std::to_string(K) + " M=" + std::to_string(M),
                IsFloatType(type) ? 1e-6 : 1e-4,
                [&](Backend& b) { return RunMatMul(b, type, wdata, x, K, N, M); });
      }
    }
  }
  // A row length with a tail that no SIMD width divides (stories260K's 172), and N = 1.
  for (int64_t N : {9, 1}) {
    const int64_t K = 172;
    const std::vector<float> wf = Random(static_cast<size_t>(K * N), 3);
    const std::string wdata(reinterpret_cast<const char*>(wf.data()), wf.size() * 4);
    const std::vector<float> x = Random(static_cast<size_t>(K * 2), 4);
    Compare("MatMul F32 K=172 N=" + std::to_string(N), 1e-6,
            [&](Backend& b) { return RunMatMul(b, GgmlType::kF32, wdata, x, K, N, 2); });
  }
}

// Made row invariant (the ServingEngine's batch-invariant mode), a backend
// computes prompt-sized products another way on a GPU (no tensor cores): those
// agree with the reference too.
OPS_TEST(MatMulOfARowInvariantBackendEveryTypeAndBatch) {
  for (auto& b : backends_) b->ops().MakeRowInvariant();
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t M : {9, 67}) {
      const int64_t K = 512, N = 35;
      const std::vector<float> wf = Random(static_cast<size_t>(K * N), 7);
      const std::string wdata = EncodeTensorData(type, wf.data(), K * N);
      const std::vector<float> x = Random(static_cast<size_t>(K * M), 8);
      Compare(std::string("row-invariant MatMul ") + std::string(GgmlTypeName(type)) +
                  " M=" + std::to_string(M),
              IsFloatType(type) ? 1e-6 : 1e-4,
              [&](Backend& b) { return RunMatMul(b, type, wdata, x, K, N, M); });
    }
  }
}

OPS_TEST(ElementwiseAndNormOps) {
  const int64_t n = 96, rows = 5;
  const std::vector<float> a = Random(static_cast<size_t>(n * rows), 5);
  const std::vector<float> c = Random(static_cast<size_t>(n * rows), 6);
  const std::vector<float> w = Random(static_cast<size_t>(n), 7);
  Compare("RmsNorm", 1e-6, [&](Backend& b) {
    Buf x = UploadF32(b, a, n, rows), wt = UploadF32(b, w, n), o = ZerosF32(b, n, rows);
    Must(b.ops().RmsNorm(x.t, wt.t, 1e-5f, o.t));
    return Download(b, o);
  });
  Compare("RmsNorm in place", 1e-6, [&](Backend& b) {
    Buf x = UploadF32(b, a, n, rows), wt = UploadF32(b, w, n);
    Must(b.ops().RmsNorm(x.t, wt.t, 1e-5f, x.t));
    return Download(b, x);
  });
  Compare("Add+AddBias", 1e-6, [&](Backend& b) {
    Buf x = UploadF32(b, a, n, rows), y = UploadF32(b, c, n, rows), wt = UploadF32(b, w, n);
    Buf o = ZerosF32(b, n, rows);
    Must(b.ops().Add(x.t, y.t, o.t));
    Must(b.ops().AddBias(o.t, wt.t));
    Must(b.ops().Add(o.t, x.t, o.t));  // aliasing the output
    return Download(b, o);
  });
  Compare("SwiGlu", 1e-6, [&](Backend& b) {
    Buf g = UploadF32(b, a, n, rows), u = UploadF32(b, c, n, rows);
    Must(b.ops().SwiGlu(g.t, u.t, g.t));
    return Download(b, g);
  });
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t E = 256, V = 10;
    const std::vector<float> table = Random(static_cast<size_t>(E * V), 8);
    const std::string data = EncodeTensorData(type, table.data(), E * V);
    Compare(std::string("GetRows ") + std::string(GgmlTypeName(type)), 1e-6, [&](Backend& b) {
      Buf t = Upload(b, type, {E, V, 1, 1}, data.data());
      const std::vector<int32_t> ids = {3, 0, 9, 3};
      Buf o = ZerosF32(b, E, 4);
      Must(b.ops().GetRows(t.t, ids, o.t));
      return Download(b, o);
    });
  }
}

OPS_TEST(RopeBothStylesAndHeadSizes) {
  const std::vector<int32_t> pos = {0, 5, 6, 300};
  for (int64_t hd : {64, 80, 128}) {
    const int64_t heads = 3, tokens = 4;
    const std::vector<float> x = Random(static_cast<size_t>(hd * heads * tokens), 9);
    for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
      for (bool factors : {false, true}) {
        RopeParams p;
        p.style = style;
        p.n_rot = static_cast<int32_t>(hd == 80 ? 64 : hd / 2);  // partial rotation too
        p.freq_base = 500000.0f;
        p.freq_scale = 0.5f;
        const std::vector<float> raw = Random(static_cast<size_t>(p.n_rot / 2), 10, 0.5f);
        std::vector<float> ff(raw.size());
        for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + std::fabs(raw[i]);
        if (factors) p.freq_factors = ff.data();
        Compare(std::string(style == RopeStyle::kNormal ? "Rope normal" : "Rope neox") +
                    " hd=" + std::to_string(hd) + (factors ? " factors" : ""),
                1e-6, [&](Backend& b) {
                  Buf t = UploadF32(b, x, hd, heads, tokens);
                  Must(b.ops().Rope(t.t, pos, p));
                  return Download(b, t);
                });
      }
    }
  }
}

// Paged attention: a sequence of `n_pos` positions in blocks of 16 scattered
// over a cache of 8 blocks (the table is not in order), queries for its last
// `tokens` positions; every KV type, head size and GQA ratio.
// Random queries for `tokens` tokens at the last positions of n_pos = 37 (across block
// boundaries), and keys and values for every position; `seed` picks the numbers.
struct AttentionCase {
  AttentionCase(int64_t head_dim, int64_t kv_heads, int64_t group, int64_t tokens, uint32_t seed)
      : hd(head_dim), n_kv(kv_heads), n_head(kv_heads * group),
        q(Random(static_cast<size_t>(hd * n_head * tokens), seed)),
        k(Random(static_cast<size_t>(hd * n_kv * n_pos), seed + 1)),
        v(Random(static_cast<size_t>(hd * n_kv * n_pos), seed + 2)) {
    for (int32_t p = n_pos - static_cast<int32_t>(tokens); p < n_pos; ++p) pos.push_back(p);
  }
  int64_t hd, n_kv, n_head;
  int32_t n_pos = 37;
  std::vector<float> q, k, v;
  std::vector<int32_t> pos;
};

// Attention over a cache of kv_type with blocks of `block` positions placed by `table`,
// the keys and values of `c` stored in two pieces (the second starting inside a block),
// for the queries `q` at positions `pos` (by default all of `c`'s); the output rows.
std::vector<float> RunAttention(Backend& b, GgmlType kv_type, int32_t block,
                                const std::vector<int32_t>& table, const AttentionCase& c,
                                const std::vector<float>& q, const std::vector<int32_t>& pos) {
  const int64_t kv_dim = c.hd * c.n_kv;
  const int64_t tokens = static_cast<int64_t>(pos.size());
  Buf kc = Upload(b, kv_type, {kv_dim, 8 * block, 1, 1}, nullptr);
  Buf vc = Upload(b, kv_type, {kv_dim, 8 * block, 1, 1}, nullptr);
  for (int32_t p0 : {0, 20}) {
    const int32_t p1 = p0 == 0 ? 20 : c.n_pos;
    const std::vector<float> ks(c.k.begin() + p0 * kv_dim, c.k.begin() + p1 * kv_dim);
    const std::vector<float> vs(c.v.begin() + p0 * kv_dim, c.v.begin() + p1 * kv_dim);
    Buf kt = UploadF32(b, ks, kv_dim, p1 - p0), vt = UploadF32(b, vs, kv_dim, p1 - p0);
    std::vector<int32_t> piece;
    for (int32_t p = p0; p < p1; ++p) piece.push_back(p);
    const KvSeq seq{p1 - p0, table};
    const KvBatch batch{std::span<const KvSeq>(&seq, 1), block};
    Must(b.ops().StoreKv(kt.t, kc.t, batch, piece));
    Must(b.ops().StoreKv(vt.t, vc.t, batch, piece));
  }
  Buf qt = UploadF32(b, q, c.hd, c.n_head, tokens), o = ZerosF32(b, c.hd, c.n_head, tokens);
  const KvSeq seq{static_cast<int32_t>(tokens), table};
  const KvBatch batch{std::span<const KvSeq>(&seq, 1), block};
  Must(b.ops().Attention(qt.t, kc.t, vc.t, batch, static_cast<int32_t>(c.n_kv), pos, 0.17f, o.t));
  return Download(b, o);
}

// Three sequences in one cache of 12 blocks of 16, each with its own scattered
// blocks: a prompt chunk of 5 tokens at positions 30..34 (across a block's
// end), a decode at position 40, and a chunk of 3 at positions 0..2. `batched`
// stores all their new keys and values and attends in one call each;
// otherwise each sequence gets its own calls. Returns the output rows in batch
// order.
std::vector<float> RunMixedBatch(Backend& b, GgmlType kv_type, bool batched) {
  const int64_t hd = 64, n_kv = 2, n_head = 6, kv_dim = hd * n_kv;
  const std::vector<std::vector<int32_t>> tables = {{3, 9, 0}, {11, 1, 6}, {4}};
  const std::vector<std::vector<int32_t>> new_pos = {{30, 31, 32, 33, 34}, {40}, {0, 1, 2}};
  const std::vector<int32_t> first_new = {30, 40, 0};
  Buf kc = Upload(b, kv_type, {kv_dim, 12 * 16, 1, 1}, nullptr);
  Buf vc = Upload(b, kv_type, {kv_dim, 12 * 16, 1, 1}, nullptr);
  // The positions before the new ones, one sequence at a time.
  for (size_t i = 0; i < tables.size(); ++i) {
    if (first_new[i] == 0) continue;
    std::vector<int32_t> old;
    for (int32_t p = 0; p < first_new[i]; ++p) old.push_back(p);
    const auto n = static_cast<int64_t>(old.size());
    Buf kt = UploadF32(b, Random(static_cast<size_t>(kv_dim * n), 40 + static_cast<uint32_t>(i)),
                       kv_dim, n);
    Buf vt = UploadF32(b, Random(static_cast<size_t>(kv_dim * n), 50 + static_cast<uint32_t>(i)),
                       kv_dim, n);
    const KvSeq seq{static_cast<int32_t>(n), tables[i]};
    const KvBatch one{std::span<const KvSeq>(&seq, 1), 16};
    Must(b.ops().StoreKv(kt.t, kc.t, one, old));
    Must(b.ops().StoreKv(vt.t, vc.t, one, old));
  }
  std::vector<int32_t> pos;
  std::vector<KvSeq> seqs;
  for (size_t i = 0; i < tables.size(); ++i) {
    pos.insert(pos.end(), new_pos[i].begin(), new_pos[i].end());
    seqs.push_back({static_cast<int32_t>(new_pos[i].size()), tables[i]});
  }
  const auto rows = static_cast<int64_t>(pos.size());
  const std::vector<float> k = Random(static_cast<size_t>(kv_dim * rows), 60);
  const std::vector<float> v = Random(static_cast<size_t>(kv_dim * rows), 61);
  const std::vector<float> q = Random(static_cast<size_t>(hd * n_head * rows), 62);
  std::vector<float> out;
  if (batched) {
    const KvBatch all{seqs, 16};
    Buf kt = UploadF32(b, k, kv_dim, rows), vt = UploadF32(b, v, kv_dim, rows);
    Must(b.ops().StoreKv(kt.t, kc.t, all, pos));
    Must(b.ops().StoreKv(vt.t, vc.t, all, pos));
    Buf qt = UploadF32(b, q, hd, n_head, rows), o = ZerosF32(b, hd, n_head, rows);
    Must(b.ops().Attention(qt.t, kc.t, vc.t, all, static_cast<int32_t>(n_kv), pos, 0.17f, o.t));
    return Download(b, o);
  }
  int64_t r0 = 0;
  for (const KvSeq& seq : seqs) {
    const int64_t n = seq.n_rows;
    const KvBatch one{std::span<const KvSeq>(&seq, 1), 16};
    const std::span<const int32_t> p(pos.data() + r0, static_cast<size_t>(n));
    auto slice = [&](const std::vector<float>& all, int64_t width) {
      return std::vector<float>(all.begin() + r0 * width, all.begin() + (r0 + n) * width);
    };
    Buf kt = UploadF32(b, slice(k, kv_dim), kv_dim, n),
        vt = UploadF32(b, slice(v, kv_dim), kv_dim, n);
    Must(b.ops().StoreKv(kt.t, kc.t, one, p));
    Must(b.ops().StoreKv(vt.t, vc.t, one, p));
    Buf qt = UploadF32(b, slice(q, hd * n_head), hd, n_head, n), o = ZerosF32(b, hd, n_head, n);
    Must(b.ops().Attention(qt.t, kc.t, vc.t, one, static_cast<int32_t>(n_kv), p, 0.17f, o.t));
    const std::vector<float> got = Download(b, o);
    out.insert(out.end(), got.begin(), got.end());
    r0 += n;
  }
  return out;
}

OPS_TEST(PagedAttentionEveryCacheType) {
  // Blocks of 16, and of 6 (not a multiple of the CPU's four-key tiles).
  for (const auto& [block, table] : std::vector<std::pair<int32_t, std::vector<int32_t>>>{
           {16, {5, 2, 7, 0}}, {6, {5, 2, 7, 0, 3, 6, 1}}}) {
    for (GgmlType kv_type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
      for (int64_t hd : {64, 80, 128}) {
        for (int64_t group : {1, 3, 4, 8}) {
          const AttentionCase c(hd, 2, group, 3, 11);
          const bool exact = kv_type != GgmlType::kQ8_0;
          Compare(std::string("Attention ") + std::string(GgmlTypeName(kv_type)) + " block=" +
                      std::to_string(block) + " hd=" + std::to_string(hd) +
                      " gqa=" + std::to_string(group),
                  exact ? 1e-6 : 1e-4,
                  [&](Backend& b) { return RunAttention(b, kv_type, block, table, c, c.q, c.pos); });
        }
      }
    }
  }
}

// A token's attention is the same bits alone as in a batch (prefill chunk or decode),
// on backends whose ops compute each row alike whatever the batch.
OPS_TEST(AttentionRowsBitIdenticalWhateverTheBatch) {
  std::vector<Backend*> all = {reference_.get()};
  for (auto& b : backends_) all.push_back(b.get());
  const std::vector<int32_t> table = {5, 2, 7, 0};
  for (Backend* b : all) {
    if (!b->ops().MakeRowInvariant()) continue;
    for (GgmlType kv_type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
      const AttentionCase c(64, 2, 3, 9, 21);
      const std::vector<float> batched = RunAttention(*b, kv_type, 16, table, c, c.q, c.pos);
      const int64_t row = c.hd * c.n_head;
      for (size_t t = 0; t < c.pos.size(); ++t) {
        const std::vector<float> qt(c.q.begin() + static_cast<int64_t>(t) * row,
                                    c.q.begin() + static_cast<int64_t>(t + 1) * row);
        const std::vector<float> alone = RunAttention(*b, kv_type, 16, table, c, qt, {c.pos[t]});
        for (int64_t i = 0; i < row; ++i) {
          ASSERT_EQ(batched[t * static_cast<size_t>(row) + static_cast<size_t>(i)],
                    alone[static_cast<size_t>(i)])
              << GgmlTypeName(kv_type) << " token " << t << " element " << i << " on " << b->name();
        }
      }
    }
  }
}

// Sequences of different lengths, decode rows and prompt chunks mixed, in one
// StoreKv and one Attention call: the reference's results sequence by sequence,
// on every backend (bit for bit on row-invariant ones).
OPS_TEST(OneCallAttendsABatchOfSequencesThroughTheirOwnTables) {
  std::vector<Backend*> all = {reference_.get()};
  for (auto& b : backends_) all.push_back(b.get());
  for (GgmlType kv_type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
    Compare(std::string("batched attention ") + std::string(GgmlTypeName(kv_type)),
            kv_type == GgmlType::kQ8_0 ? 1e-4 : 1e-6,
            [&](Backend& b) { return RunMixedBatch(b, kv_type, /*batched=*/true); });
    for (Backend* b : all) {
      if (!b->ops().RowInvariant()) continue;
      EXPECT_EQ(RunMixedBatch(*b, kv_type, true), RunMixedBatch(*b, kv_type, false))
          << GgmlTypeName(kv_type) << " on " << b->name();
    }
  }
}

// Batches that do not fit their cache or tables are refused before anything
// is written.
OPS_TEST(KvBatchesOutsideTheirTablesAreRefused) {
  for (auto& b : backends_) {
    Buf kc = Upload(*b, GgmlType::kF16, {64, 4 * 16, 1, 1}, nullptr);
    Buf kt = UploadF32(*b, Random(64 * 2, 70), 64, 2);
    const std::vector<int32_t> table = {2, 1};
    const std::vector<int32_t> inside = {5, 31};
    const KvSeq two{2, table};
    EXPECT_TRUE(b->ops().StoreKv(kt.t, kc.t, KvBatch{std::span(&two, 1), 16}, inside).ok());
    const std::vector<int32_t> past_table = {5, 32};
    const std::vector<int32_t> bad_block = {2, 4};
    const KvSeq one{1, table}, bad{2, bad_block};
    for (const auto& [what, seq, pos] :
         std::vector<std::tuple<const char*, KvSeq, std::vector<int32_t>>>{
             {"past the table", two, past_table},
             {"block outside the cache", bad, inside},
             {"rows that do not add up", one, inside},
             {"too few positions", two, {5}}}) {
      const Status s = b->ops().StoreKv(kt.t, kc.t, KvBatch{std::span(&seq, 1), 16}, pos);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
      Buf q = UploadF32(*b, Random(64 * 2, 71), 64, 1, 2), o = ZerosF32(*b, 64, 1, 2);
      const Status a =
          b->ops().Attention(q.t, kc.t, kc.t, KvBatch{std::span(&seq, 1), 16}, 1, pos, 0.1f, o.t);
      EXPECT_EQ(a.code(), StatusCode::kInvalidArgument) << what << ": " << a.ToString();
    }
  }
}

OPS_TEST(ArgmaxPerRow) {
  const int64_t n = 32000, rows = 3;
  std::vector<float> x = Random(static_cast<size_t>(n * rows), 14);
  x[7] = 5.0f;                    // row 0: a clear maximum early
  x[n + n - 1] = 5.0f;            // row 1: at the very end
  x[2 * n + 100] = 5.0f;          // row 2: a tie, the first wins
  x[2 * n + 200] = 5.0f;
  Compare("Argmax", 0.0, [&](Backend& b) {
    Buf t = UploadF32(b, x, n, rows);
    std::vector<int32_t> ids(static_cast<size_t>(rows), -1);
    Must(b.ops().Argmax(t.t, ids));
    return std::vector<float>(ids.begin(), ids.end());
  });
  std::vector<int32_t> ids(3);
  std::vector<float> copy = x;
  ASSERT_TRUE(reference_->ops().Argmax(Tensor::F32(copy.data(), n, rows), ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{7, static_cast<int32_t>(n - 1), 100}));
}

// Every transform of RowSampling, masks, both vocabulary sizes of the models,
// sampled on each backend from the same logits as on the scalar reference. The
// CPU backends run ChooseToken itself: equal ids. A device sums in another
// order (sample_select.h), so a draw within rounding of a boundary could pick
// a neighbour: at most one such row is allowed there, and greedy rows never.
OPS_TEST(SampleRowsEveryTransformAndMask) {
  for (const int64_t n : {int64_t{32000}, int64_t{1001}}) {
    const int64_t n_rows = 6;
    std::vector<float> base = Random(static_cast<size_t>(n * n_rows), 33);
    for (float& v : base) v *= 6.0f;
    base[static_cast<size_t>(n + 40)] = base[static_cast<size_t>(n + 41)] = 30.0f;  // a tie
    // Each entry samples its own copy of a base row (a row is sampled once).
    constexpr int kVariants = 8;
    std::vector<float> x;
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int variant = 0; variant < kVariants; ++variant) {
        x.insert(x.end(), base.begin() + r * n, base.begin() + (r + 1) * n);
      }
    }
    const int64_t words = MaskWords(n);
    std::vector<uint32_t> masks(static_cast<size_t>(2 * words), 0);
    for (int64_t i = 0; i < n; i += 3) masks[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
    for (int64_t i : {int64_t{5}, n - 1, n / 2}) {  // a grammar's few choices
      masks[static_cast<size_t>(words + i / 32)] |= 1u << (i % 32);
    }
    std::vector<RowSampling> rows;
    uint32_t state = 9;
    auto next_u = [&state] {
      state = state * 1664525u + 1013904223u;
      return static_cast<double>(state >> 8) / 16777216.0;
    };
    for (int32_t r = 0; r < n_rows; ++r) {
      for (int variant = 0; variant < kVariants; ++variant) {
        RowSampling s;
        s.row = r * kVariants + variant;
        s.greedy = variant == 0;
        s.temperature = 0.3f + 0.25f * static_cast<float>(variant);
        s.top_k = variant == 2 ? 40 : variant == 3 ? 1 : 0;
        s.top_p = variant == 4 ? 0.9f : variant == 5 ? 0.3f : 1.0f;
        s.min_p = variant == 6 ? 0.1f : 0.0f;
        s.mask = variant == 7 ? r % 2 : -1;
        s.u = next_u();
        rows.push_back(s);
      }
    }
    auto run = [&](Backend& b) {
      Buf t = UploadF32(b, x, n, n_rows * kVariants);
      std::vector<SampledToken> out(rows.size());
      Must(b.ops().SampleRows(t.t, rows, masks, out));
      return out;
    };
    const std::vector<SampledToken> want = run(*reference_);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_GE(want[i].id, 0);
      if (rows[i].mask >= 0) {
        const uint32_t* m = masks.data() + rows[i].mask * words;
        EXPECT_TRUE(m[want[i].id / 32] >> (want[i].id % 32) & 1u) << "entry " << i;
      }
    }
    EXPECT_EQ(want[8].id, 40) << "greedy takes the first of a tie (row 1)";
    for (size_t c = 0; c < backends_.size(); ++c) {
      const std::vector<SampledToken> got = run(*backends_[c]);
      int differ = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        if (got[i].id == want[i].id) {
          EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4 * (1 + std::fabs(want[i].logprob)));
          continue;
        }
        ++differ;
        EXPECT_FALSE(rows[i].greedy) << candidates_[c].label << " entry " << i;
      }
      EXPECT_LE(differ, candidates_[c].device ? 1 : 0) << candidates_[c].label << " n " << n;
    }
  }
}

OPS_TEST(SampleRowsRefusesWhatIsOutOfRange) {
  const int64_t n = 100;
  std::vector<float> x = Random(static_cast<size_t>(n * 2), 5);
  const std::vector<uint32_t> one_mask(static_cast<size_t>(MaskWords(n)), ~0u);
  for (const auto& b : backends_) {
    Buf t = UploadF32(*b, x, n, 2);
    for (const auto& [what, bad] : std::vector<std::pair<std::string, RowSampling>>{
             {"row past the logits", RowSampling{.row = 2}},
             {"negative row", RowSampling{.row = -1}},
             {"mask past the masks", RowSampling{.mask = 1}},
             {"top_p of 0", RowSampling{.greedy = false, .top_p = 0.0f}},
             {"u of 1", RowSampling{.greedy = false, .u = 1.0}},
             {"negative top_k", RowSampling{.top_k = -1}}}) {
      std::vector<SampledToken> out(1);
      const Status s = b->ops().SampleRows(t.t, std::span(&bad, 1), one_mask, out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << b->name() << ": " << what;
    }
    RowSampling fine;
    const RowSampling twice[2] = {fine, fine};
    std::vector<SampledToken> two(2);
    EXPECT_EQ(b->ops().SampleRows(t.t, twice, one_mask, two).code(), StatusCode::kInvalidArgument)
        << b->name() << ": one row sampled twice";
    std::vector<SampledToken> none;
    EXPECT_EQ(b->ops().SampleRows(t.t, std::span(&fine, 1), one_mask, none).code(),
              StatusCode::kInvalidArgument)
        << b->name() << ": no room for the token";
    const std::vector<uint32_t> ragged(3, ~0u);
    std::vector<SampledToken> out(1);
    EXPECT_EQ(b->ops().SampleRows(t.t, std::span(&fine, 1), ragged, out).code(),
              StatusCode::kInvalidArgument)
        << b->name() << ": a partial mask";
    // An empty mask allows nothing: no token, not an error.
    const std::vector<uint32_t> empty(static_cast<size_t>(MaskWords(n)), 0u);
    RowSampling masked{.mask = 0};
    ASSERT_TRUE(b->ops().SampleRows(t.t, std::span(&masked, 1), empty, out).ok());
    EXPECT_EQ(out[0].id, -1) << b->name();
  }
}

// QueueSampleRows leaves its tokens where GetRows reads FedToken ids, before
// TakeSampled brings them to the host (the scheduler's step overlap): rows of
// an embedding table picked by sampled tokens equal the rows picked by the
// tokens themselves, row 0 for an entry whose mask allowed nothing; ids outside
// the table or the sample are refused, as is taking into the wrong room.
OPS_TEST(QueuedSamplesFeedGetRowsBeforeTheHostHasThem) {
  const int64_t n = 300, n_embd = 40;
  std::vector<float> logits = Random(static_cast<size_t>(n * 3), 91);
  logits[17] = 9.0f;         // row 0: token 17
  logits[n + 250] = 9.0f;    // row 1: token 250
  logits[2 * n + 3] = 9.0f;  // row 2: masked out entirely below
  const std::vector<float> table = Random(static_cast<size_t>(n_embd * n), 92);
  std::vector<uint32_t> masks(static_cast<size_t>(MaskWords(n)), 0u);  // allows nothing
  const RowSampling rows[3] = {{.row = 0}, {.row = 1}, {.row = 2, .mask = 0}};
  Compare("GetRows of fed tokens", 0.0, [&](Backend& b) {
    Buf x = UploadF32(b, logits, n, 3);
    Buf t = UploadF32(b, table, n_embd, n);
    Buf fed = ZerosF32(b, n_embd, 4);
    Buf direct = ZerosF32(b, n_embd, 4);
    Must(b.ops().QueueSampleRows(x.t, rows, masks));
    const int32_t fed_ids[4] = {FedToken(1), 5, FedToken(0), FedToken(2)};
    Must(b.ops().GetRows(t.t, fed_ids, fed.t));
    std::vector<SampledToken> out(3);
    Must(b.ops().TakeSampled(out));
    EXPECT_EQ(out[0].id, 17) << b.name();
    EXPECT_EQ(out[1].id, 250) << b.name();
    EXPECT_EQ(out[2].id, -1) << b.name();
    const int32_t direct_ids[4] = {250, 5, 17, 0};
    Must(b.ops().GetRows(t.t, direct_ids, direct.t));
    std::vector<float> got = Download(b, fed);
    EXPECT_EQ(got, Download(b, direct)) << b.name();
    // Refused: a row past the table, an entry past the sample, the wrong room.
    for (const int32_t bad : {static_cast<int32_t>(n), FedToken(3)}) {
      EXPECT_EQ(b.ops().GetRows(t.t, std::span(&bad, 1), fed.t).code(),
                StatusCode::kInvalidArgument)
          << b.name() << " id " << bad;
    }
    std::vector<SampledToken> short_room(2);
    EXPECT_EQ(b.ops().TakeSampled(short_room).code(), StatusCode::kInvalidArgument) << b.name();
    return got;
  });
}

OPS_TEST(SupportsEveryOpTheModelsUse) {
  for (const auto& b : backends_) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                          GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      EXPECT_TRUE(b->ops().Supports(Op::kMatMul, type)) << b->name() << " " << GgmlTypeName(type);
      EXPECT_TRUE(b->ops().Supports(Op::kGetRows, type)) << b->name() << " " << GgmlTypeName(type);
    }
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
      EXPECT_TRUE(b->ops().Supports(Op::kStoreKv, type)) << b->name();
      EXPECT_TRUE(b->ops().Supports(Op::kAttention, type)) << b->name();
    }
    EXPECT_FALSE(b->ops().Supports(Op::kAttention, GgmlType::kQ4_K)) << b->name();
    EXPECT_FALSE(b->ops().Supports(Op::kRmsNorm, GgmlType::kQ8_0)) << b->name();
    EXPECT_TRUE(b->ops().Supports(Op::kSampleRows, GgmlType::kF32)) << b->name();
  }
}

OPS_TEST(BufferBoundsAreChecked) {
  for (const auto& b : backends_) {
    auto buf = b->memory().Allocate(64);
    ASSERT_TRUE(buf.ok());
    char bytes[65] = {};
    EXPECT_EQ((*buf)->Write(1, bytes, 64).code(), StatusCode::kOutOfRange) << b->name();
    EXPECT_EQ((*buf)->Read(0, bytes, 65).code(), StatusCode::kOutOfRange) << b->name();
    EXPECT_TRUE((*buf)->Write(0, bytes, 64).ok()) << b->name();
  }
}

#ifndef SINEW_OPS_TEST_CUDA
TEST(CpuBackendTest, RejectsBadOptions) {
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{1, "sse9"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{-1, "auto"}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BackendForDeviceTest, ParsesDevices) {
  auto cpu = CreateBackendForDevice("cpu", CpuBackendOptions{1, "scalar"});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->device(), "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:0x", ""}) {
    EXPECT_EQ(CreateBackendForDevice(bad, CpuBackendOptions{}).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  // Without CUDA in the build, or without a GPU, asking for one is a clear error.
  auto cuda = CreateBackendForDevice("cuda:0", CpuBackendOptions{});
  if (!cuda.ok()) {
    EXPECT_TRUE(cuda.status().code() == StatusCode::kUnimplemented ||
                cuda.status().code() == StatusCode::kUnavailable)
        << cuda.status().ToString();
    EXPECT_NE(cuda.status().message().find(HaveCudaBackend() ? "CUDA" : "SINEW_CUDA"),
              std::string::npos)
        << cuda.status().ToString();
  }
}
#endif

}  // namespace
}  // namespace sinew::model
