#include "probes/case_context.h"

#include "engine/error.h"
#include "engine/sha256.h"

namespace psi::probes {

namespace detail {

std::vector<model::WeightSpec> recorded_weights(const Manifest& m) {
  std::vector<model::WeightSpec> out;
  for (const ManifestTensor& t : m.tensors)
    if (!t.input) out.push_back({t.name, t.shape});
  return out;
}

void compare_and_keep(CaseContext& ctx, const std::string& variant, Outputs outputs,
                      const std::vector<std::string>& backends,
                      const std::vector<std::pair<std::string, F64Tensor>>* exact) {
  // Each variant of a probe is a unit of work: a signal stops the probe after the current one (or
  // inside its operators, engine/parallel.h).
  if (ctx.progress) ctx.progress->step("variant " + variant);
  for (const auto& output : outputs) {
    // Named, not a structured binding: the lambdas below capture them (clang 14 cannot).
    const std::string& name = output.first;
    const Bf16Tensor& ours = output.second;
    // "<dataset>.<how>" is another computation of the recorded <dataset>.
    const std::string dataset = name.substr(0, name.find('.'));
    // A recording without the tensor would leave its rows out of every table without a word.
    bool recorded = false;
    for (const auto& b : backends) {
      const std::string rel = b.empty() ? dataset : b + "/" + dataset;
      recorded = recorded || ctx.rec.has(rel) || (ctx.flash && ctx.flash->has(rel));
    }
    if (!recorded) {
      std::string looked;
      for (const auto& b : backends) looked += (looked.empty() ? "" : ", ") + ctx.rec.abs(b.empty() ? dataset : b + "/" + dataset);
      throw Error(ctx.rec.path().string() + ": the recording holds no " + dataset + " (looked for " + looked +
                  "); psi computed it and has nothing to compare it with");
    }
    const F64Tensor* values = nullptr;
    if (exact)
      for (const auto& [n, t] : *exact)
        if (n == name) values = &t;
    if (exact && !values) throw Error("probe: the float64 block has no unrounded " + name);
    // The recording against psi's elements [first, first + n): the recording against the
    // float64 values (the reference) when given, else psi's output against the recording.
    const auto measure = [&](const StoredTensor& st, std::int64_t first, std::int64_t n) {
      if (values) return distance(st.data.span(), std::span<const double>(values->ptr() + first, std::size_t(n)));
      return distance(std::span<const Bf16>(ours.ptr() + first, std::size_t(n)), st.data.span());
    };
    for (const auto& b : backends) {
      const std::string rel = b.empty() ? dataset : b + "/" + dataset;
      Recording* src = &ctx.rec;
      if (!src->has(rel) && ctx.flash && ctx.flash->has(rel)) src = ctx.flash;
      if (!src->has(rel)) continue;
      StoredTensor st = src->stored_bf16(rel);
      if (st.full_shape != ours.shape)
        throw Error(src->path().string() + ":" + src->abs(rel) + ": recorded shape " + shape_str(st.full_shape) +
                    ", psi computed " + shape_str(ours.shape));
      TensorResult r;
      r.variant = variant;
      r.tensor = name;
      r.unverified = st.unverified;
      r.shape = ours.shape;
      r.backend = b.empty() ? "official" : b;
      // Channels: every axis after the token axis (axis 1, or axis 0 of a matrix).
      const std::int64_t channels = ours.shape.size() > 2 ? ours.numel() / (ours.dim(0) * ours.dim(1)) : ours.shape.back();
      const auto diff = [&](std::int64_t first, std::int64_t n) {
        if (values || r.distance->bitwise_equal()) return;
        const std::span<const Bf16> mine(ours.ptr() + first, std::size_t(n));
        r.diff = diff_map(mine, st.data.span(), first / channels, n / channels, channels);
        r.first_differences = first_differences(mine, st.data.span(), ours.shape, first, ctx.differences);
      };
      if (st.full) {
        r.rows = "all";
        r.distance = measure(st, 0, ours.numel());
        diff(0, ours.numel());
      } else if (st.row_count > 0) {
        const std::int64_t inner = ours.numel() / (ours.dim(0) * ours.dim(1));
        r.rows = "rows " + std::to_string(st.first_row) + "-" + std::to_string(st.first_row + st.row_count - 1) +
                 " of " + std::to_string(ours.dim(1));
        r.distance = measure(st, st.first_row * inner, st.row_count * inner);
        diff(st.first_row * inner, st.row_count * inner);
      } else {
        r.rows = "sha256 only";
      }
      if (!st.full && !st.sha256_full.empty()) r.full_sha_equal = sha256_hex(ours) == st.sha256_full;
      ctx.report.results.push_back(std::move(r));
    }
  }
  ctx.report.outputs.emplace_back(variant, std::move(outputs));
}

}  // namespace detail

}  // namespace psi::probes
