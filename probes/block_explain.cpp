// Attribution of a block's differences from the MATH recording (psi probe --explain-differences).
//
// The block's modules feed each other only through the residual streams, and every residual
// update is a recorded probe. Re-running the block with the recorded probes as the updates
// (model::block_forward's teacher forcing) therefore gives each module on the inputs the
// official block gave it. An element that differs in psi's block but not in the forced module
// was inherited from upstream; one that differs in both departs inside the module itself.
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/model/block_catalogue.h"
#include "probes/case_context.h"

namespace psi::probes::detail {

namespace {

enum class Stream { video, audio };

struct ProbeInfo {
  Bf16Tensor model::BlockTaps::*member;
  Stream stream;
  std::vector<int> upstream;  // indices into probe_info(), spec order
};

// Per probe of the catalogue (model::kTapNames, spec order), the same index as its name: its
// member, its stream and which earlier probes reach it.
std::span<const ProbeInfo> probe_info() {
  using P = model::BlockTaps;
  static const ProbeInfo info[] = {
      {&P::attn1, Stream::video, {}},
      {&P::attn2, Stream::video, {0}},
      {&P::audio_attn1, Stream::audio, {}},
      {&P::audio_attn2, Stream::audio, {2}},
      {&P::audio_to_video_attn, Stream::video, {0, 1, 2, 3}},
      {&P::video_to_audio_attn, Stream::audio, {0, 1, 2, 3}},
      {&P::ff, Stream::video, {0, 1, 4}},
      {&P::audio_ff, Stream::audio, {2, 3, 5}},
      {&P::video_out, Stream::video, {0, 1, 4, 6}},
      {&P::audio_out, Stream::audio, {2, 3, 5, 7}},
  };
  static_assert(std::size(info) == model::kTapCount, "one entry per catalogue probe");
  // The member at each index must be the one BlockTaps::named() pairs with that index's name.
  static const std::span<const ProbeInfo> checked = [] {
    const P probes{};
    const auto named = probes.named();
    for (std::size_t k = 0; k < model::kTapCount; ++k)
      if (named[k].second != &(probes.*info[k].member))
        throw Error("explain: probe " + named[k].first + " is out of catalogue order");
    return std::span<const ProbeInfo>(info);
  }();
  return checked;
}

// Per token row: whether any element of the row differs.
std::vector<char> differing_rows(const Bf16Tensor& a, const Bf16Tensor& b) {
  const std::int64_t width = a.shape.back(), rows = a.numel() / width;
  std::vector<char> out(rows, 0);
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (a.data[i].bits != b.data[i].bits) out[i / width] = 1;
  return out;
}

}  // namespace

void explain_block(CaseContext& ctx, const model::ModelConfig& c, const model::BlockWeights& w,
                   const model::BlockInputs& in, const model::NumericsVariant& v, const model::BlockTaps& computed) {
  const auto info = probe_info();
  auto name_of = [](std::size_t k) { return std::string(model::kTapNames[k]); };
  const std::string path = v.claims == "flash" ? "flash" : "math";
  model::BlockTaps recorded;
  for (std::size_t k = 0; k < info.size(); ++k) {
    const ProbeInfo& p = info[k];
    const std::string rel = path + "/" + name_of(k);
    Recording& src = ctx.flash && ctx.flash->has(rel) ? *ctx.flash : ctx.rec;
    if (!src.has(rel)) {
      ctx.report.notes.push_back("explain " + v.name + ": not attributed, the recording has no " + rel);
      return;
    }
    StoredTensor st = src.stored_bf16(rel);
    if (!st.full) {
      ctx.report.notes.push_back("explain " + v.name + ": not attributed, the recording stores " + rel +
                                 " only in part (teacher forcing needs every probe in full)");
      return;
    }
    if (st.data.shape != (computed.*p.member).shape)
      throw Error(src.path().string() + ": recorded " + rel + " is " + shape_str(st.data.shape) +
                  ", psi computed " + shape_str((computed.*p.member).shape));
    recorded.*p.member = std::move(st.data);
  }
  const model::BlockTaps forced = model::block_forward(c, w, in, v, &recorded);

  std::vector<std::vector<char>> rows_differ;
  std::vector<bool> differs_anywhere;
  for (const auto& p : info) {
    rows_differ.push_back(differing_rows(computed.*p.member, recorded.*p.member));
    bool any = false;
    for (char r : rows_differ.back()) any = any || r;
    differs_anywhere.push_back(any);
  }
  for (std::size_t k = 0; k < info.size(); ++k) {
    const ProbeInfo& p = info[k];
    const Bf16Tensor &ours = computed.*p.member, &rec = recorded.*p.member, &alone = forced.*p.member;
    ProbeAttribution a;
    a.variant = v.name;
    a.tensor = name_of(k);
    a.against = path;
    a.total = ours.numel();
    std::vector<std::int64_t> by_upstream(info.size(), 0);
    std::int64_t unexplained = 0;
    const std::int64_t width = ours.shape.back();
    for (std::int64_t i = 0; i < ours.numel(); ++i) {
      const bool module_differs = alone.data[i].bits != rec.data[i].bits;
      a.module_alone += module_differs;
      if (ours.data[i].bits == rec.data[i].bits) continue;
      ++a.differing;
      if (module_differs) {
        ++a.own;
        continue;
      }
      // Inherited: the first upstream probe that differs in this token row, else anywhere.
      int first = -1;
      for (int u : p.upstream)
        if (info[u].stream == p.stream ? rows_differ[u][i / width] : differs_anywhere[u]) {
          first = u;
          break;
        }
      if (first < 0)
        for (int u : p.upstream)
          if (differs_anywhere[u]) {
            first = u;
            break;
          }
      if (first < 0) ++unexplained;
      else ++by_upstream[first];
    }
    for (char r : differing_rows(alone, rec)) a.module_alone_rows += r;
    for (std::size_t u = 0; u < info.size(); ++u)
      if (by_upstream[u]) a.inherited.emplace_back(name_of(u), by_upstream[u]);
    // Inherited with no upstream probe differing cannot happen: forcing changed nothing then.
    if (unexplained)
      throw Error("explain: " + name_of(k) + " has " + std::to_string(unexplained) +
                  " elements that differ only with psi's own upstream probes, yet none of them differs");
    ctx.report.attributions.push_back(std::move(a));
  }
}

}  // namespace psi::probes::detail
