// Operation-level test: every op of every available backend against the scalar
// CPU backend on one thread (the reference), by normalised mean squared error
// NMSE = sum (got - ref)^2 / sum ref^2. A CUDA backend joins the list later.
//
// Tolerances: float ops 1e-10; matmuls over quantized activations 1e-10 too,
// since the SIMD kernels compute the same integer sums (only float summation
// order differs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/model/gguf_writer.h"

namespace sinew::model {
namespace {

constexpr double kTolerance = 1e-10;

struct Candidate {
  std::string simd;
  int32_t threads;
};

std::vector<Candidate> AvailableCandidates() {
  std::vector<Candidate> out;
  for (const char* simd : {"scalar", "avx2", "avx512"}) {
    for (int32_t threads : {1, 3}) {
      if (std::string(simd) == "scalar" && threads == 1) continue;  // the reference itself
      CpuBackendOptions o{threads, simd};
      if (CreateCpuBackend(o).ok()) out.push_back({simd, threads});
    }
  }
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

class BackendOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ref = CreateCpuBackend(CpuBackendOptions{1, "scalar"});
    ASSERT_TRUE(ref.ok());
    reference_ = std::move(ref).value();
    candidates_ = AvailableCandidates();
    ASSERT_FALSE(candidates_.empty());
  }

  // Runs `op` on the reference and on every candidate backend (each with its own
  // copies of the inputs, made by `op` itself) and compares the outputs.
  template <typename Op>
  void Compare(const std::string& what, Op op) {
    const std::vector<float> want = op(*reference_);
    for (const Candidate& c : candidates_) {
      auto backend = CreateCpuBackend(CpuBackendOptions{c.threads, c.simd});
      ASSERT_TRUE(backend.ok());
      const std::vector<float> got = op(**backend);
      ASSERT_EQ(got.size(), want.size());
      const double nmse = Nmse(got, want);
      EXPECT_LT(nmse, kTolerance) << what << " on " << (*backend)->name() << " x" << c.threads;
    }
  }

  std::unique_ptr<Backend> reference_;
  std::vector<Candidate> candidates_;
};

TEST_F(BackendOpsTest, MatMulEveryType) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t m : {1, 7}) {
      const int64_t K = 512, N = 67;
      const std::vector<float> wf = Random(static_cast<size_t>(K * N), 1);
      std::string wdata = EncodeTensorData(type, wf.data(), K * N);
      const std::vector<float> x = Random(static_cast<size_t>(K * m), 2);
      Compare(std::string("MatMul ") + std::string(GgmlTypeName(type)) + " M=" + std::to_string(m),
              [&](Backend& b) {
                Tensor w;
                w.type = type;
                w.ne = {K, N, 1, 1};
                w.data = wdata.data();
                std::vector<float> xin = x, y(static_cast<size_t>(N * m));
                Tensor xt = Tensor::F32(xin.data(), K, m), yt = Tensor::F32(y.data(), N, m);
                b.ops().MatMul(w, xt, yt);
                return y;
              });
    }
  }
  // A row length with a tail that no SIMD width divides (stories260K's 172).
  const int64_t K = 172, N = 9;
  const std::vector<float> wf = Random(static_cast<size_t>(K * N), 3);
  const std::vector<float> x = Random(static_cast<size_t>(K * 2), 4);
  Compare("MatMul F32 K=172", [&](Backend& b) {
    std::vector<float> win = wf, xin = x, y(static_cast<size_t>(N * 2));
    Tensor w = Tensor::F32(win.data(), K, N), xt = Tensor::F32(xin.data(), K, 2);
    Tensor yt = Tensor::F32(y.data(), N, 2);
    b.ops().MatMul(w, xt, yt);
    return y;
  });
}

TEST_F(BackendOpsTest, ElementwiseAndNormOps) {
  const int64_t n = 96, rows = 5;
  const std::vector<float> a = Random(static_cast<size_t>(n * rows), 5);
  const std::vector<float> c = Random(static_cast<size_t>(n * rows), 6);
  const std::vector<float> w = Random(static_cast<size_t>(n), 7);
  Compare("RmsNorm", [&](Backend& b) {
    std::vector<float> x = a, wt = w, out(a.size());
    Tensor xt = Tensor::F32(x.data(), n, rows), o = Tensor::F32(out.data(), n, rows);
    b.ops().RmsNorm(xt, Tensor::F32(wt.data(), n), 1e-5f, o);
    return out;
  });
  Compare("Add+AddBias", [&](Backend& b) {
    std::vector<float> x = a, y = c, wt = w, out(a.size());
    Tensor xt = Tensor::F32(x.data(), n, rows), yt = Tensor::F32(y.data(), n, rows);
    Tensor o = Tensor::F32(out.data(), n, rows);
    b.ops().Add(xt, yt, o);
    b.ops().AddBias(o, Tensor::F32(wt.data(), n));
    return out;
  });
  Compare("SwiGlu", [&](Backend& b) {
    std::vector<float> g = a, u = c, out(a.size());
    Tensor gt = Tensor::F32(g.data(), n, rows), ut = Tensor::F32(u.data(), n, rows);
    Tensor o = Tensor::F32(out.data(), n, rows);
    b.ops().SwiGlu(gt, ut, o);
    return out;
  });
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    const int64_t E = 256, V = 10;
    const std::vector<float> table = Random(static_cast<size_t>(E * V), 8);
    std::string data = EncodeTensorData(type, table.data(), E * V);
    Compare(std::string("GetRows ") + std::string(GgmlTypeName(type)), [&](Backend& b) {
      Tensor t;
      t.type = type;
      t.ne = {E, V, 1, 1};
      t.data = data.data();
      const int32_t ids[] = {3, 0, 9, 3};
      std::vector<float> out(static_cast<size_t>(E * 4));
      Tensor o = Tensor::F32(out.data(), E, 4);
      b.ops().GetRows(t, ids, 4, o);
      return out;
    });
  }
}

TEST_F(BackendOpsTest, RopeBothStyles) {
  const int64_t hd = 64, heads = 3, tokens = 4;
  const std::vector<float> x = Random(static_cast<size_t>(hd * heads * tokens), 9);
  const int32_t pos[] = {0, 5, 6, 300};
  const std::vector<float> factors = Random(16, 10, 0.5f);
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    RopeParams p;
    p.style = style;
    p.n_rot = 32;
    p.freq_base = 500000.0f;
    p.freq_scale = 0.5f;
    std::vector<float> ff(16);
    for (size_t i = 0; i < 16; ++i) ff[i] = 1.0f + std::fabs(factors[i]);
    p.freq_factors = ff.data();
    Compare(style == RopeStyle::kNormal ? "Rope normal" : "Rope neox", [&](Backend& b) {
      std::vector<float> v = x;
      Tensor t = Tensor::F32(v.data(), hd, heads, tokens);
      b.ops().Rope(t, pos, p);
      return v;
    });
  }
}

TEST_F(BackendOpsTest, AttentionF32AndF16Cache) {
  const int64_t hd = 32, n_head = 8, n_kv = 2, tokens = 3, cached = 10;
  const std::vector<float> q = Random(static_cast<size_t>(hd * n_head * tokens), 11);
  const std::vector<float> k = Random(static_cast<size_t>(hd * n_kv * cached), 12);
  const std::vector<float> v = Random(static_cast<size_t>(hd * n_kv * cached), 13);
  const int32_t pos[] = {7, 8, 9};
  for (GgmlType kv_type : {GgmlType::kF32, GgmlType::kF16}) {
    Compare(std::string("Attention ") + std::string(GgmlTypeName(kv_type)), [&](Backend& b) {
      std::vector<float> kin = k, vin = v, qin = q, out(q.size());
      std::string kc(static_cast<size_t>(GgmlRowSize(kv_type, hd * n_kv) * cached), '\0');
      std::string vc = kc;
      Tensor kt, vt;
      kt.type = vt.type = kv_type;
      kt.ne = vt.ne = {hd * n_kv, cached, 1, 1};
      kt.data = kc.data();
      vt.data = vc.data();
      b.ops().CopyRows(Tensor::F32(kin.data(), hd * n_kv, cached), kt, 0);
      b.ops().CopyRows(Tensor::F32(vin.data(), hd * n_kv, cached), vt, 0);
      Tensor qt = Tensor::F32(qin.data(), hd, n_head, tokens);
      Tensor o = Tensor::F32(out.data(), hd, n_head, tokens);
      b.ops().Attention(qt, kt, vt, static_cast<int32_t>(n_kv), pos, 0.17f, o);
      return out;
    });
  }
}

TEST(CpuBackendTest, RejectsBadOptions) {
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{1, "sse9"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCpuBackend(CpuBackendOptions{-1, "auto"}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sinew::model
