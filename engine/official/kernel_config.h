#pragma once
// Which kernel the H200 ran for each product shape, as far as it changes the bits: the K split
// of a chain. cuBLASLt (the BF16 Linears) and cuBLAS (SDPA MATH's FP32 batched products) pick a
// kernel per shape by heuristics; a split-K kernel runs each K slice as a chain of its own from
// +0 and adds the partial sums in FP32, slice after slice, before the epilogue. What the block
// recordings established is the default (recorded_choice); a KernelConfig overrides it per
// shape, so that other choices can be tried on shapes no block recording covers (the tiny
// model's) without rebuilding. A configuration is part of the numerics: it travels with the
// variant (ops::Product's and ops::SdpaOptions' `kernels`) to each product it decides, so a
// reader of a call sees it; the process keeps only a shape log that lists the products a run made.
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace psi::official {

// The chains a product runs: the tensor-core block-FMA chains of a BF16 Linear (tensor_core.h),
// or the FP32 FMA chains of SDPA MATH's two batched products (attention_math.h): the scores
// q'·k'ᵀ (K = head width) and P·V (K = keys).
enum class ChainKind { tensor_core, f32_scores, f32_values };
std::string_view chain_kind_name(ChainKind k);  // "tensor-core", "f32-scores", "f32-values"
bool parse_chain_kind(std::string_view name, ChainKind& out);

// A product's shape as the library saw it: M rows of output, N columns, K deep. For SDPA's
// batched products one head's: scores Nq x Nk x d, values Nq x d x Nk.
struct ProductShape {
  std::int64_t rows = 0, cols = 0, depth = 0;
  friend auto operator<=>(const ProductShape&, const ProductShape&) = default;
};
std::string shape_text(const ProductShape& s);  // "288x256x128"

// The K split: split_k slices of width round_up(ceil(K / split_k), granule), the last one
// shorter, empty ones dropped (so a split wider than K's granules gives fewer slices).
struct KernelChoice {
  int split_k = 1;
  int granule = 16;
  // tensor-core products only: each slice a float32 FMA chain (k ascending, from +0) instead of
  // the tensor core's block FMAs, as a SIMT kernel (gemv or a non-tensor-core GEMM) would run it.
  bool fma_chain = false;
  friend bool operator==(const KernelChoice&, const KernelChoice&) = default;
};
inline constexpr int kMaxSplitK = 64;

// [begin, end) of each K slice of `c` over depth K; one slice [0, K) without a split.
std::vector<std::pair<std::int64_t, std::int64_t>> k_slices(std::int64_t K, KernelChoice c);

// What the recordings established: a one-row tensor-core product over K = 4,096 is a two-way
// split (the full block's one-token text context, tensor_core.h); every other product one chain.
KernelChoice recorded_choice(ChainKind kind, const ProductShape& s);

struct ShapeKey {
  ChainKind kind = ChainKind::tensor_core;
  ProductShape shape;
  friend auto operator<=>(const ShapeKey&, const ShapeKey&) = default;
};

class KernelConfig {
 public:
  // The override for the shape, else recorded_choice.
  KernelChoice choice(ChainKind kind, const ProductShape& s) const;
  // Throws psi::Error for a split outside [1, kMaxSplitK] or a granule below 1.
  void set(const ShapeKey& key, KernelChoice c);
  const std::map<ShapeKey, KernelChoice>& overrides() const { return overrides_; }

 private:
  std::map<ShapeKey, KernelChoice> overrides_;
};

// A configuration as the numerics carry it, shared by the copies of a variant; null: none
// overridden (every product takes recorded_choice).
using KernelConfigRef = std::shared_ptr<const KernelConfig>;

// The choice `c` makes for the shape; recorded_choice when `c` is null.
KernelChoice kernel_choice(const KernelConfig* c, ChainKind kind, const ProductShape& s);

// The place a product is made, for the shape log: scopes nest ("video.attn1.to_q"). Per thread;
// the products of one model forward are issued from the thread that runs it.
class ProductSite {
 public:
  explicit ProductSite(std::string_view name);
  ~ProductSite();
  ProductSite(const ProductSite&) = delete;
  ProductSite& operator=(const ProductSite&) = delete;

 private:
  std::size_t restore_;
};
std::string current_product_site();

// psi computes the per-token AdaLN MLPs once, where the official model runs one identical row
// per token (every token has the same timestep): within this scope a one-row product takes the
// kernel choice (and the log entry) of the `rows`-row product it stands for. Per thread.
class RowsAsIf {
 public:
  explicit RowsAsIf(std::int64_t rows);
  ~RowsAsIf();
  RowsAsIf(const RowsAsIf&) = delete;
  RowsAsIf& operator=(const RowsAsIf&) = delete;

 private:
  std::int64_t restore_;
};
// The rows a product of `actual` rows stands for here.
std::int64_t rows_as_if(std::int64_t actual);

// Every distinct (kind, shape) a run made while the log was on, with the sites and the calls.
struct ShapeUse {
  ShapeKey key;
  std::vector<std::string> sites;  // sorted, distinct
  std::int64_t calls = 0;
};
void start_shape_log();
std::vector<ShapeUse> stop_shape_log();  // sorted by key; the log is off afterwards
// Called by the products themselves (no-op while the log is off).
void log_product(ChainKind kind, const ProductShape& s);

}  // namespace psi::official
