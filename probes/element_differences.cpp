#include "probes/element_differences.h"

#include <cstdio>

#include "engine/error.h"
#include "engine/distance.h"

namespace psi::probes {

std::vector<ElementDifference> first_differences(std::span<const Bf16> ours, std::span<const Bf16> ref,
                                                 const Shape& full_shape, std::int64_t offset, std::int64_t limit) {
  if (ours.size() != ref.size())
    throw Error("first_differences: " + std::to_string(ours.size()) + " elements against a reference of " +
                std::to_string(ref.size()));
  std::vector<ElementDifference> out;
  for (std::size_t i = 0; i < ours.size() && std::int64_t(out.size()) < limit; ++i) {
    if (ours[i].bits == ref[i].bits) continue;
    ElementDifference d;
    d.flat_index = offset + std::int64_t(i);
    d.index.assign(full_shape.size(), 0);
    std::int64_t rest = d.flat_index;
    for (std::size_t k = full_shape.size(); k-- > 0;) {
      d.index[k] = rest % full_shape[k];
      rest /= full_shape[k];
    }
    d.ours = ours[i];
    d.ref = ref[i];
    out.push_back(std::move(d));
  }
  return out;
}

std::string format_difference(const ElementDifference& d, const std::string& ours_name, const std::string& ref_name) {
  const auto value = [](Bf16 v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "0x%04x (%.9g)", unsigned(v.bits), double(v.to_float()));
    return std::string(buf);
  };
  std::string how;
  if (d.ours.is_nan() || d.ref.is_nan()) how = "NaN";
  else if (is_sign_flip(d.ours, d.ref)) how = "sign flip";
  else {
    const std::int64_t u = bf16_ulp_distance(d.ours, d.ref);
    how = std::to_string(u) + (u == 1 ? " ulp" : " ulps");
  }
  return shape_str(d.index) + " (flat " + std::to_string(d.flat_index) + "): " + ours_name + " " + value(d.ours) +
         " " + ref_name + " " + value(d.ref) + ", " + how;
}

std::vector<std::string> difference_lines(const std::string& what, const Bf16Tensor& ours, const Bf16Tensor& ref,
                                          const std::string& ours_name, const std::string& ref_name,
                                          std::int64_t limit) {
  if (ours.shape != ref.shape)
    throw Error("difference_lines: " + what + ": shape " + shape_str(ours.shape) + " against " + shape_str(ref.shape));
  const auto shown = first_differences(ours.span(), ref.span(), ours.shape, 0, limit);
  if (shown.empty()) return {};
  std::int64_t differing = 0;
  for (std::size_t i = 0; i < ours.data.size(); ++i) differing += ours.data[i].bits != ref.data[i].bits;
  std::vector<std::string> lines{what + ": the first " + std::to_string(shown.size()) + " of " +
                                 std::to_string(differing) + " differing elements, by index in the " +
                                 shape_str(ours.shape) + " tensor"};
  for (const auto& d : shown) lines.push_back("  " + format_difference(d, ours_name, ref_name));
  return lines;
}

}  // namespace psi::probes
