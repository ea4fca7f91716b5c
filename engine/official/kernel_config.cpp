#include "engine/official/kernel_config.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "engine/error.h"

namespace psi::official {

std::string_view chain_kind_name(ChainKind k) {
  switch (k) {
    case ChainKind::tensor_core: return "tensor-core";
    case ChainKind::f32_scores: return "f32-scores";
    case ChainKind::f32_values: return "f32-values";
  }
  return "?";
}

bool parse_chain_kind(std::string_view name, ChainKind& out) {
  for (ChainKind k : {ChainKind::tensor_core, ChainKind::f32_scores, ChainKind::f32_values})
    if (chain_kind_name(k) == name) {
      out = k;
      return true;
    }
  return false;
}

std::string shape_text(const ProductShape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols) + "x" + std::to_string(s.depth);
}

std::vector<std::pair<std::int64_t, std::int64_t>> k_slices(std::int64_t K, KernelChoice c) {
  const std::int64_t per = (K + c.split_k - 1) / c.split_k;
  const std::int64_t width = std::max<std::int64_t>(c.granule, (per + c.granule - 1) / c.granule * c.granule);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t b = 0; b < K; b += width) out.emplace_back(b, std::min(K, b + width));
  if (out.empty()) out.emplace_back(0, K);
  return out;
}

KernelChoice recorded_choice(ChainKind kind, const ProductShape& s) {
  if (kind == ChainKind::tensor_core && s.rows == 1 && s.depth == 4096) return {2, 16};
  return {};
}

KernelChoice KernelConfig::choice(ChainKind kind, const ProductShape& s) const {
  const auto it = overrides_.find({kind, s});
  return it == overrides_.end() ? recorded_choice(kind, s) : it->second;
}

void KernelConfig::set(const ShapeKey& key, KernelChoice c) {
  if (c.split_k < 1 || c.split_k > kMaxSplitK)
    throw Error("kernel config: split_k " + std::to_string(c.split_k) + " for " +
                std::string(chain_kind_name(key.kind)) + " " + shape_text(key.shape) + " is not in 1.." +
                std::to_string(kMaxSplitK));
  if (c.granule < 1)
    throw Error("kernel config: granule " + std::to_string(c.granule) + " for " +
                std::string(chain_kind_name(key.kind)) + " " + shape_text(key.shape) + " is not positive");
  overrides_[key] = c;
}

namespace {

thread_local std::string t_site;
thread_local std::int64_t t_rows_as_if = 0;  // 0: none

struct Log {
  std::mutex mutex;
  bool on = false;
  std::map<ShapeKey, std::pair<std::set<std::string>, std::int64_t>> uses;
};
Log& shape_log() {
  static Log l;
  return l;
}

}  // namespace

KernelChoice kernel_choice(const KernelConfig* c, ChainKind kind, const ProductShape& s) {
  return c ? c->choice(kind, s) : recorded_choice(kind, s);
}

ProductSite::ProductSite(std::string_view name) : restore_(t_site.size()) {
  if (!t_site.empty()) t_site += '.';
  t_site += name;
}
ProductSite::~ProductSite() { t_site.resize(restore_); }
std::string current_product_site() { return t_site; }

RowsAsIf::RowsAsIf(std::int64_t rows) : restore_(t_rows_as_if) { t_rows_as_if = rows; }
RowsAsIf::~RowsAsIf() { t_rows_as_if = restore_; }
std::int64_t rows_as_if(std::int64_t actual) { return actual == 1 && t_rows_as_if > 0 ? t_rows_as_if : actual; }

void start_shape_log() {
  Log& l = shape_log();
  std::lock_guard lock(l.mutex);
  l.uses.clear();
  l.on = true;
}

std::vector<ShapeUse> stop_shape_log() {
  Log& l = shape_log();
  std::lock_guard lock(l.mutex);
  std::vector<ShapeUse> out;
  for (const auto& [key, use] : l.uses) out.push_back({key, {use.first.begin(), use.first.end()}, use.second});
  l.uses.clear();
  l.on = false;
  return out;
}

void log_product(ChainKind kind, const ProductShape& s) {
  Log& l = shape_log();
  std::lock_guard lock(l.mutex);
  if (!l.on) return;
  auto& use = l.uses[{kind, s}];
  use.first.insert(t_site.empty() ? std::string("(unnamed)") : t_site);
  ++use.second;
}

}  // namespace psi::official
