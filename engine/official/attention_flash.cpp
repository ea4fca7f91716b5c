#include "engine/official/attention_flash.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "engine/bf16_scan.h"
#include "engine/error.h"
#include "engine/official/attention_math.h"
#include "engine/official/nv_expf.h"
#include "engine/official/nv_logf.h"
#include "engine/official/tensor_core.h"
#include "engine/parallel.h"

namespace psi::official {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kH200Sms = 132;
constexpr int kMaxSplits = 128;         // set_params_splitkv's cap
// Query rows a task (any grouping gives the same rows): each key and value panel is decoded once
// for all of them.
constexpr std::int64_t kRowBlock = 256;
constexpr int kThreadsPerRow = 4;       // the quad of an MMA fragment sharing a row
constexpr int kCombineThreads = 128;
const float kLn2 = std::bit_cast<float>(0x3f317218u);  // __logf's ln 2

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One split's result for a block of rows: O_s and lse_s (split-KV), or O already normalised
// (plain kernel, rounded to BF16 by the caller).
struct SplitOut {
  std::vector<float> o;    // [rows, d]
  std::vector<float> lse;  // [rows]
};

// Softmax scale constants as set_params_fprop forms them.
struct Scales {
  float scale;  // f32(1/√d)
  float log2;   // f32(f64(scale) · log2 e)
};

Scales scales(std::int64_t d) {
  const float s = float(1.0 / std::sqrt(double(d)));
  return {s, float(double(s) * 1.4426950408889634)};
}

// A head's keys [Nk, d] and transposed values [d, Nk], with the scan (bf16_scan.h) of each key
// tile's keys and values, made once for every query block's products: a tile's own bounds, so that a
// value that keeps one tile from the FP32-product kernel does not keep the others.
struct HeadOperands {
  CBf16Mat k, vt;
  std::vector<Bf16Scan> k_scans, vt_scans;  // [tile]
};

// Runs tiles [t0, t1) of one head for query rows q [rows, d] (`q_scan` its scan, made once for
// all the splits). O = acc · inv; lse as the split kernel writes it.
void run_split(CBf16Mat q, const Bf16Scan& q_scan, const HeadOperands& head, std::int64_t block_n, std::int64_t t0, std::int64_t t1,
               const Scales& sc, SplitOut& out) {
  const CBf16Mat k = head.k, vt = head.vt;
  const std::int64_t rows = q.rows, d = q.cols, Nk = k.rows;
  out.o.assign(rows * d, 0.0f);
  out.lse.assign(rows, kNegInf);
  if (t1 <= t0) return;  // an empty split: O 0, lse −∞
  std::vector<float> row_max(rows, kNegInf), sums(rows * kThreadsPerRow, 0.0f), s(rows * block_n);
  std::vector<Bf16> p(rows * block_n);
  F32Mat o{out.o.data(), rows, d, d};
  for (std::int64_t t = t1 - 1; t >= t0; --t) {
    const bool first = t == t1 - 1;
    const std::int64_t j0 = t * block_n, nk = std::min(block_n, Nk - j0);
    std::fill(s.begin(), s.end(), 0.0f);
    tc::gemm_accumulate(q, {q_scan}, k.block(j0, nk, 0, d), {head.k_scans[std::size_t(t)]},
                        F32Mat{s.data(), rows, nk, block_n});
    for (std::int64_t r = 0; r < rows; ++r) {
      float* sr = s.data() + r * block_n;
      std::fill(sr + nk, sr + block_n, kNegInf);  // keys past the end
      const float m_prev = row_max[r];
      float m = m_prev;
      for (std::int64_t j = 0; j < block_n; ++j) m = std::max(m, sr[j]);
      row_max[r] = m;
      float rescale = 1.0f;
      if (!first) {
        rescale = ex2_approx_ftz((m_prev - m) * sc.log2);
        for (std::int64_t c = 0; c < d; ++c) o.at(r, c) = o.at(r, c) * rescale;
      }
      const float max_scaled = m == kNegInf ? 0.0f : m * sc.log2;
      for (std::int64_t j = 0; j < block_n; ++j) sr[j] = sr[j] * sc.log2 - max_scaled;
      ex2_approx_ftz_lanes(sr, sr, block_n);
      flash_thread_sums(sr, block_n, first, rescale, sums.data() + r * kThreadsPerRow);
      for (std::int64_t j = 0; j < nk; ++j) p[r * block_n + j] = bf16_rne(sr[j]);
    }
    const CBf16Mat pm{p.data(), rows, nk, block_n};
    const Bf16Scan p_scan = scan_bf16(pm);
    tc::gemm_accumulate(pm, {p_scan}, vt.block(0, d, j0, nk), {head.vt_scans[std::size_t(t)]}, o);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float sum = flash_row_sum(sums.data() + r * kThreadsPerRow);
    const bool degenerate = sum == 0.0f || std::isnan(sum);
    const float inv = degenerate ? 1.0f : 1.0f / sum;
    for (std::int64_t c = 0; c < d; ++c) o.at(r, c) = o.at(r, c) * inv;
    // __logf(sum) = lg2.approx(sum) · ln 2, its product contracted into the FMA with m · scale.
    out.lse[r] = degenerate ? kNegInf : std::fma(row_max[r], sc.scale, lg2_approx(sum) * kLn2);
  }
}

// combine_attn_seqk_parallel for one row: the splits' O_s (o[s] + offset) and lse_s.
void combine_row(const std::vector<SplitOut>& parts, std::int64_t row, std::int64_t d, Bf16* out) {
  const int splits = int(parts.size());
  const int block_m = d % 128 == 0 ? 4 : (d % 64 == 0 ? 8 : 16);
  int max_splits = 2;
  while (max_splits < splits) max_splits *= 2;
  const int lanes = std::min(kCombineThreads / block_m, max_splits);
  const int per_lane = (max_splits * block_m + kCombineThreads - 1) / kCombineThreads;
  auto lse = [&](int s) { return s < splits ? parts[std::size_t(s)].lse[std::size_t(row)] : kNegInf; };
  float lse_max = kNegInf;
  for (int s = 0; s < lanes * per_lane; ++s) lse_max = std::max(lse_max, lse(s));
  if (lse_max == kNegInf) lse_max = 0.0f;
  float lane_sum[32];
  for (int t = 0; t < lanes; ++t) {
    lane_sum[t] = nv_expf(lse(t) - lse_max);
    for (int l = 1; l < per_lane; ++l) lane_sum[t] = lane_sum[t] + nv_expf(lse(l * lanes + t) - lse_max);
  }
  const float sum = warp_butterfly_sum(lane_sum, lanes);
  const float lse_all = sum == 0.0f || std::isnan(sum) ? std::numeric_limits<float>::infinity() : nv_logf(sum) + lse_max;
  std::vector<float> acc(std::size_t(d), 0.0f);
  for (int s = 0; s < splits; ++s) {
    const float scale = nv_expf(lse(s) - lse_all);
    const float* os = parts[std::size_t(s)].o.data() + row * d;
    for (std::int64_t c = 0; c < d; ++c) acc[std::size_t(c)] = std::fma(scale, os[c], acc[std::size_t(c)]);
  }
  for (std::int64_t c = 0; c < d; ++c) out[c] = bf16_rne(acc[std::size_t(c)]);
}

}  // namespace

void flash_thread_sums(const float* p, std::int64_t block_n, bool first, float rescale, float sums[4]) {
  for (int th = 0; th < kThreadsPerRow; ++th) {
    float& sum = sums[th];
    for (std::int64_t i = 0; i < block_n / 8; ++i)
      for (int pair = 0; pair < 2; ++pair) {
        const float x = p[8 * i + 2 * th + pair];
        if (i == 0 && pair == 0) sum = first ? x : std::fma(sum, rescale, x);
        else sum = sum + x;
      }
  }
}

float flash_row_sum(const float sums[4]) { return (sums[0] + sums[2]) + (sums[1] + sums[3]); }

int flash_num_splits(int batch_heads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (float(batch_heads_mblocks) >= 0.8f * float(num_sms)) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  auto eligible = [&](int n) { return n == 1 || ceil_div(num_n_blocks, n) != ceil_div(num_n_blocks, n - 1); };
  std::vector<float> efficiency;
  float best = 0.0f;
  for (int n = 1; n <= max_splits; ++n) {
    float eff = 0.0f;
    if (eligible(n)) {
      const float waves = float(batch_heads_mblocks * n) / float(num_sms);
      eff = waves / std::ceil(waves);
      best = std::max(best, eff);
    }
    efficiency.push_back(eff);
  }
  for (int n = 1; n <= max_splits; ++n)
    if (eligible(n) && double(efficiency[std::size_t(n - 1)]) >= 0.85 * double(best)) return n;
  return 1;
}

FlashLaunch flash_launch(std::int64_t heads, std::int64_t Nq, std::int64_t Nk, std::int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128)
    throw Error("sdpa (h200 FLASH core): head dim " + std::to_string(head_dim) +
                " (the kernels' tile shapes are modelled for 64 and 128 only)");
  FlashLaunch l;
  const std::int64_t split_n = head_dim <= 64 ? 256 : 128;
  const std::int64_t split_tiles = ceil_div(Nk, split_n);
  const std::int64_t work = heads * ceil_div(Nq, 64);
  const int splits = work >= std::int64_t(1) << 30 || split_tiles >= std::int64_t(1) << 30
                         ? 1
                         : flash_num_splits(int(work), 2 * kH200Sms, int(split_tiles), kMaxSplits);
  if (splits > 1) {
    l.split_kv = true;
    l.block_n = split_n;
    l.tiles = split_tiles;
    l.splits = splits;
  } else {
    l.block_n = head_dim <= 64 ? 128 : 64;
    l.tiles = ceil_div(Nk, l.block_n);
  }
  l.tiles_per_split = ceil_div(l.tiles, l.splits);
  return l;
}

void sdpa_flash_h200(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, Bf16Mat out) {
  if (heads <= 0 || q.cols % heads != 0 || k.cols != q.cols || v.cols != q.cols || v.rows != k.rows ||
      out.rows != q.rows || out.cols != q.cols || k.rows == 0)
    throw Error("sdpa (h200 FLASH core): q " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ", k " +
                std::to_string(k.rows) + "x" + std::to_string(k.cols) + ", v " + std::to_string(v.rows) + "x" +
                std::to_string(v.cols) + ", out " + std::to_string(out.rows) + "x" + std::to_string(out.cols) +
                " for " + std::to_string(heads) + " heads");
  const std::int64_t d = q.cols / heads, Nq = q.rows, Nk = k.rows;
  const FlashLaunch l = flash_launch(heads, Nq, Nk, d);
  const Scales sc = scales(d);
  // V transposed once ([H·d, Nk]): P·V reduces over keys, the tensor-core product's inner axis.
  const std::vector<Bf16> vt_data = transposed(v);
  const CBf16Mat vt{vt_data.data(), q.cols, Nk, Nk};
  std::vector<HeadOperands> head_ops(static_cast<std::size_t>(heads));
  for (std::int64_t h = 0; h < heads; ++h) {
    auto& ho = head_ops[std::size_t(h)];
    ho.k = k.block(0, Nk, h * d, d);
    ho.vt = vt.block(h * d, d, 0, Nk);
    ho.k_scans.resize(std::size_t(l.tiles));
    ho.vt_scans.resize(std::size_t(l.tiles));
  }
  parallel_for(heads * l.tiles, [&](std::int64_t i) {
    auto& ho = head_ops[std::size_t(i / l.tiles)];
    const std::int64_t t = i % l.tiles, j0 = t * l.block_n, nk = std::min(l.block_n, Nk - j0);
    ho.k_scans[std::size_t(t)] = scan_bf16(ho.k.block(j0, nk, 0, d));
    ho.vt_scans[std::size_t(t)] = scan_bf16(ho.vt.block(0, d, j0, nk));
  });
  const std::int64_t row_blocks = ceil_div(Nq, kRowBlock);
  parallel_for(heads * row_blocks, [&](std::int64_t task) {
    const std::int64_t h = task / row_blocks, i0 = (task % row_blocks) * kRowBlock;
    const std::int64_t rows = std::min(kRowBlock, Nq - i0);
    const CBf16Mat qh = q.block(i0, rows, h * d, d);
    const Bf16Scan q_scan = scan_bf16(qh);
    std::vector<SplitOut> parts(std::size_t(l.splits));
    for (std::int64_t s = 0; s < l.splits; ++s)
      run_split(qh, q_scan, head_ops[std::size_t(h)], l.block_n, s * l.tiles_per_split,
                std::min(l.tiles, (s + 1) * l.tiles_per_split), sc, parts[std::size_t(s)]);
    for (std::int64_t r = 0; r < rows; ++r) {
      Bf16* y = out.row(i0 + r) + h * d;
      if (l.split_kv) combine_row(parts, r, d, y);
      else
        for (std::int64_t c = 0; c < d; ++c) y[c] = bf16_rne(parts[0].o[std::size_t(r * d + c)]);
    }
  });
}

}  // namespace psi::official
