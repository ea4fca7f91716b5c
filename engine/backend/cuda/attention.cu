// The attention family's OpKernels (ops/attention.h): the per-head gate and scaled dot-product
// attention, online and MATH. One block per (query row, head); scores are em::score (the CPU's
// dot order), computed for up to 1,024 keys at a time into shared memory; the running maximum is
// folded by one thread in key order (std::max's semantics, signed zeros and NaN included);
// softmax sums are reduce.h lane sums over 1,024-key chunks; each output channel accumulates its
// keys in key order (online) or in reduce.h's chunked lanes (MATH's P·V GEMM). Scores are
// recomputed (bit-identically) instead of being stored, so the shared working set does not grow
// with the key count.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr int kAttnThreads = 128;
constexpr std::int64_t kMaxHeadDim = 1024;

struct Sigmoid {
  Mat<u16> z;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { z.at(r, c) = em::sigmoid(z.at(r, c)); }
};

struct Gate {
  Mat<u16> a;  // the first heads·head_dim columns
  Mat<const u16> z;
  std::int64_t head_dim;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    a.at(r, c) = em::gate_apply(a.at(r, c), em::gate_factor(z.at(r, c / head_dim)));
  }
};

struct OnlineEnd {
  Mat<const float> l, o;
  Mat<u16> out;
  std::int64_t d;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    const float lv = l.at(r, c / d);
    out.at(r, c) = lv == 0.0f ? u16(0) : em::round_bf16(em::div(o.at(r, c), lv));
  }
};

struct AttnShared {
  float q[kMaxHeadDim];  // the scaled query head
  float o[kMaxHeadDim];  // the float32 accumulator
  float p[em::kChunk];   // scores, then probabilities, of up to 1,024 keys
  float lanes[em::kLanes];
  float m, l, m_new, alpha;
};

// Scores of keys [j0, j0 + n) (n ≤ 1,024) into sh.p.
__device__ void scores(AttnShared& sh, const Mat<const u16>& k, std::int64_t j0, std::int64_t n, std::int64_t col0,
                       std::int64_t d, float factor) {
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sh.p[j] = em::score(sh.q, k.row(j0 + j) + col0, factor, d);
}

__device__ void load_query(AttnShared& sh, const Mat<const u16>& q, std::int64_t i, std::int64_t col0, std::int64_t d,
                           float factor) {
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.q[c] = em::mul(em::widen(q.at(i, col0 + c)), factor);
}

// ops' online form for one (query row, head) over keys k, v in tiles of key_tile. With a state
// (m.data set) it continues and stores it (sdpa_online_update); without one it starts from
// (−∞, 0, 0) and writes bf(o / l) to out (ops::sdpa's online form).
__global__ void online_kernel(Mat<const u16> q, Mat<const u16> k, Mat<const u16> v, std::int64_t d, float factor,
                              std::int64_t key_tile, bool p_bf16, Mat<float> m, Mat<float> l, Mat<float> o, Mat<u16> out) {
  __shared__ AttnShared sh;
  const std::int64_t i = blockIdx.x, h = blockIdx.y, col0 = h * d, nk = k.rows;
  load_query(sh, q, i, col0, d, factor);
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = m.data ? o.at(i, col0 + c) : 0.0f;
  if (threadIdx.x == 0) {
    sh.m = m.data ? m.at(i, h) : kNegInf;
    sh.l = m.data ? l.at(i, h) : 0.0f;
  }
  __syncthreads();
  for (std::int64_t j0 = 0; j0 < nk; j0 += key_tile) {
    const std::int64_t nt = lesser(key_tile, nk - j0);
    // The tile's maximum, folded in key order.
    float tile_max = kNegInf;
    for (std::int64_t c0 = 0; c0 < nt; c0 += em::kChunk) {
      const std::int64_t cn = lesser(em::kChunk, nt - c0);
      scores(sh, k, j0 + c0, cn, col0, d, factor);
      __syncthreads();
      if (threadIdx.x == 0)
        for (std::int64_t j = 0; j < cn; ++j) tile_max = em::fold_max(tile_max, sh.p[j]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sh.m_new = em::fold_max(sh.m, tile_max);
      sh.alpha = em::exp_f32(em::sub(sh.m, sh.m_new));
    }
    __syncthreads();
    const float m_new = sh.m_new, alpha = sh.alpha;
    if (m_new == kNegInf) continue;  // every key so far is masked (all threads agree)
    if (alpha != 1.0f)
      for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = em::mul(sh.o[c], alpha);
    float tile_sum = 0.0f;  // thread 0's
    for (std::int64_t c0 = 0; c0 < nt; c0 += em::kChunk) {
      const std::int64_t cn = lesser(em::kChunk, nt - c0);
      scores(sh, k, j0 + c0, cn, col0, d, factor);
      __syncthreads();
      for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x) sh.p[j] = em::exp_f32(em::sub(sh.p[j], m_new));
      __syncthreads();
      if (threadIdx.x < em::kLanes) sh.lanes[threadIdx.x] = em::lane_sum(sh.p, cn, int(threadIdx.x));
      // Each channel adds its keys in key order: o += P_j · v_j.
      for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = sh.o[c];
        for (std::int64_t j = 0; j < cn; ++j) {
          const float pj = p_bf16 ? em::bf(sh.p[j]) : sh.p[j];
          acc = em::add(acc, em::mul(pj, em::widen(v.at(j0 + c0 + j, col0 + c))));
        }
        sh.o[c] = acc;
      }
      __syncthreads();
      if (threadIdx.x == 0) tile_sum = em::add(tile_sum, em::lane_tree(sh.lanes));
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sh.l = em::add(em::mul(sh.l, alpha), tile_sum);
      sh.m = m_new;
    }
    __syncthreads();
  }
  if (m.data) {
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) o.at(i, col0 + c) = sh.o[c];
    if (threadIdx.x == 0) {
      m.at(i, h) = sh.m;
      l.at(i, h) = sh.l;
    }
  } else {
    const float lv = sh.l;
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x)
      out.at(i, col0 + c) = lv == 0.0f ? u16(0) : em::round_bf16(em::div(sh.o[c], lv));
  }
}

// ops' MATH form for one (query row, head): the maximum, the softmax sum in reduce.h's order,
// then P·V with each channel's keys in reduce.h's chunked lanes, one BF16 write.
__global__ void math_kernel(Mat<const u16> q, Mat<const u16> k, Mat<const u16> v, std::int64_t d, float factor,
                            Mat<u16> out) {
  __shared__ AttnShared sh;
  const std::int64_t i = blockIdx.x, h = blockIdx.y, col0 = h * d, nk = k.rows;
  load_query(sh, q, i, col0, d, factor);
  __syncthreads();
  float mx = kNegInf;  // thread 0's
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    if (threadIdx.x == 0)
      for (std::int64_t j = 0; j < cn; ++j) mx = em::fold_max(mx, sh.p[j]);
    __syncthreads();
  }
  if (threadIdx.x == 0) sh.m = mx;
  __syncthreads();
  const float m = sh.m;
  if (m == kNegInf) {  // safe softmax: a row that attends to nothing writes zeros
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out.at(i, col0 + c) = 0;
    return;
  }
  float total = 0.0f;  // thread 0's
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x) sh.p[j] = em::exp_f32(em::sub(sh.p[j], m));
    __syncthreads();
    if (threadIdx.x < em::kLanes) sh.lanes[threadIdx.x] = em::lane_sum(sh.p, cn, int(threadIdx.x));
    __syncthreads();
    if (threadIdx.x == 0) total = em::add(total, em::lane_tree(sh.lanes));
    __syncthreads();
  }
  if (threadIdx.x == 0) sh.l = total;
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = 0.0f;
  __syncthreads();
  const float l = sh.l;
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x)
      sh.p[j] = em::div(em::exp_f32(em::sub(sh.p[j], m)), l);
    __syncthreads();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      float lane[em::kLanes] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      for (std::int64_t j = 0; j < cn; ++j)
        lane[j % em::kLanes] = em::add(lane[j % em::kLanes], em::mul(sh.p[j], em::widen(v.at(c0 + j, col0 + c))));
      sh.o[c] = em::add(sh.o[c], em::lane_tree(lane));
    }
    __syncthreads();
  }
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out.at(i, col0 + c) = em::round_bf16(sh.o[c]);
}

// The head width d of q [rows, heads·d] against k and v; the kernels' limits on it.
std::int64_t head_width(const MatRef& q, const MatRef& k, const MatRef& v, std::int64_t heads,
                        const ops::SdpaOptions& opt, const char* what) {
  if (opt.mask) fail(std::string(what) + ": an additive mask is not supported by the CUDA kernels");
  if (heads <= 0 || q.cols % heads != 0)
    fail(std::string(what) + ": width " + std::to_string(q.cols) + " does not split into " + std::to_string(heads) +
         " heads");
  if (k.cols != q.cols || v.cols != q.cols || v.rows != k.rows)
    fail(std::string(what) + ": q " + dims(q) + ", k " + dims(k) + ", v " + dims(v));
  const std::int64_t d = q.cols / heads;
  if (d % em::kLanes != 0 || d > kMaxHeadDim)
    fail(std::string(what) + ": head width " + std::to_string(d) + " must be a multiple of 8 and at most 1024");
  if (heads > 65535) fail(std::string(what) + ": " + std::to_string(heads) + " heads exceed the grid");
  return d;
}

// The online state matches `rows` queries of `heads` heads over `width` channels.
void check_state(const OnlineRef& s, std::int64_t rows, std::int64_t heads, std::int64_t width,
                 const char* what) {
  if (s.m.rows != rows || s.m.cols != heads || s.l.rows != rows || s.l.cols != heads || s.o.rows != rows ||
      s.o.cols != width)
    fail(std::string(what) + ": state m " + dims(s.m) + ", l " + dims(s.l) + ", o " + dims(s.o) + " for " +
         std::to_string(rows) + " rows of " + std::to_string(heads) + " heads, width " + std::to_string(width));
}

}  // namespace

void CudaKernels::attention_gate(const KernelContext& k, const MatRef& z, const MatRef& a, std::int64_t heads,
                                 std::int64_t head_dim) const {
  if (heads < 0 || head_dim <= 0 || z.rows != a.rows || z.cols < heads || a.cols < heads * head_dim)
    fail("attention_gate: gate " + dims(z) + ", values " + dims(a) + " for " + std::to_string(heads) + " heads of " +
         std::to_string(head_dim));
  const auto Z = mat<u16>(k, z, "attention_gate z");
  const auto A = mat<u16>(k, a, "attention_gate a");
  launch_each("attention_gate sigmoid", stream_of(k), Z.rows, Z.cols, Sigmoid{Z});
  launch_each("attention_gate multiply", stream_of(k), A.rows, heads * head_dim,
              Gate{A, Mat<const u16>{Z.data, Z.rows, Z.cols, Z.ld}, head_dim});
}

void CudaKernels::sdpa_online_begin(const KernelContext& k, const OnlineRef& s) const {
  if (s.l.rows != s.m.rows || s.l.cols != s.m.cols || s.o.rows != s.m.rows)
    fail("sdpa_online_begin: m " + dims(s.m) + ", l " + dims(s.l) + ", o " + dims(s.o));
  const cudaStream_t st = stream_of(k);
  launch_each("sdpa_online_begin m", st, s.m.rows, s.m.cols, FillF32{mat<float>(k, s.m, "online m"), kNegInf});
  launch_each("sdpa_online_begin l", st, s.l.rows, s.l.cols, FillF32{mat<float>(k, s.l, "online l"), 0.0f});
  launch_each("sdpa_online_begin o", st, s.o.rows, s.o.cols, FillF32{mat<float>(k, s.o, "online o"), 0.0f});
}

void CudaKernels::sdpa_online_update(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v,
                                     std::int64_t heads, const ops::SdpaOptions& opt, const OnlineRef& s) const {
  const std::int64_t d = head_width(q, kk, v, heads, opt, "sdpa_online_update");
  if (opt.key_tile <= 0) fail("sdpa_online_update: key tile " + std::to_string(opt.key_tile) + " must be positive");
  check_state(s, q.rows, heads, q.cols, "sdpa_online_update");
  if (q.rows == 0 || kk.rows == 0) return;
  online_kernel<<<dim3(unsigned(q.rows), unsigned(heads)), kAttnThreads, 0, stream_of(k)>>>(
      mat<const u16>(k, q, "online q"), mat<const u16>(k, kk, "online k"), mat<const u16>(k, v, "online v"), d,
      em::qk_factor(d), opt.key_tile, opt.p_bf16, mat<float>(k, s.m, "online m"), mat<float>(k, s.l, "online l"),
      mat<float>(k, s.o, "online o"), Mat<u16>{});
  check_launch("sdpa_online_update");
}

void CudaKernels::sdpa_online_end(const KernelContext& k, const OnlineRef& s, const MatRef& out) const {
  const std::int64_t heads = s.m.cols;
  if (out.rows != s.o.rows || out.cols != s.o.cols || heads <= 0 || s.o.cols % heads != 0 || s.l.rows != s.o.rows ||
      s.l.cols != heads)
    fail("sdpa_online_end: output " + dims(out) + " for a state o " + dims(s.o) + ", l " + dims(s.l));
  launch_each("sdpa_online_end", stream_of(k), out.rows, out.cols,
              OnlineEnd{mat<const float>(k, s.l, "online l"), mat<const float>(k, s.o, "online o"),
                        mat<u16>(k, out, "online out"), s.o.cols / heads});
}

void CudaKernels::sdpa(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v, std::int64_t heads,
                       const ops::SdpaOptions& opt, const MatRef& out) const {
  const std::int64_t d = head_width(q, kk, v, heads, opt, "sdpa");
  if (out.rows != q.rows || out.cols != q.cols) fail("sdpa: output " + dims(out) + " for queries " + dims(q));
  if (q.rows == 0) return;
  const auto Q = mat<const u16>(k, q, "sdpa q");
  const auto K = mat<const u16>(k, kk, "sdpa k");
  const auto V = mat<const u16>(k, v, "sdpa v");
  const auto O = mat<u16>(k, out, "sdpa out");
  const dim3 grid(unsigned(q.rows), unsigned(heads));
  if (opt.form == ops::SoftmaxForm::online) {
    if (opt.key_tile <= 0) fail("sdpa: key tile " + std::to_string(opt.key_tile) + " must be positive");
    online_kernel<<<grid, kAttnThreads, 0, stream_of(k)>>>(Q, K, V, d, em::qk_factor(d), opt.key_tile,
                                                             opt.p_bf16, Mat<float>{}, Mat<float>{}, Mat<float>{}, O);
    check_launch("sdpa (online)");
  } else {
    math_kernel<<<grid, kAttnThreads, 0, stream_of(k)>>>(Q, K, V, d, em::qk_factor(d), O);
    check_launch("sdpa (math)");
  }
}

}  // namespace psi::rt::cuda
