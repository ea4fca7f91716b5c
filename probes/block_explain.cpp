// Attribution of a block's differences from the MATH recording (psi probe --explain-differences).
//
// The block's modules feed each other only through the residual streams, and every residual
// update is a recorded probe. Re-running the block with the recorded probes as the updates
// (model::block_forward's teacher forcing) therefore gives each module on the inputs the
// official block gave it. An element that differs in psi's block but not in the forced module
// was inherited from upstream; one that differs in both departs inside the module itself.
#include <string>
#include <vector>

#include "engine/error.h"
#include "probes/probe_internal.h"

namespace psi::probes::detail {

namespace {

enum class Stream { video, audio };

struct ProbeInfo {
  const char* name;
  Bf16Tensor model::BlockProbes::*member;
  Stream stream;
  std::vector<int> upstream;  // indices into probe_info(), spec order
};

// The ten probes in spec order, and which earlier probes reach each one.
const std::vector<ProbeInfo>& probe_info() {
  using P = model::BlockProbes;
  static const std::vector<ProbeInfo> info{
      {"attn1", &P::attn1, Stream::video, {}},
      {"attn2", &P::attn2, Stream::video, {0}},
      {"audio_attn1", &P::audio_attn1, Stream::audio, {}},
      {"audio_attn2", &P::audio_attn2, Stream::audio, {2}},
      {"audio_to_video_attn", &P::audio_to_video_attn, Stream::video, {0, 1, 2, 3}},
      {"video_to_audio_attn", &P::video_to_audio_attn, Stream::audio, {0, 1, 2, 3}},
      {"ff", &P::ff, Stream::video, {0, 1, 4}},
      {"audio_ff", &P::audio_ff, Stream::audio, {2, 3, 5}},
      {"video_out", &P::video_out, Stream::video, {0, 1, 4, 6}},
      {"audio_out", &P::audio_out, Stream::audio, {2, 3, 5, 7}},
  };
  return info;
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
                   const model::BlockInputs& in, const model::NumericsVariant& v, const model::BlockProbes& computed) {
  const auto& info = probe_info();
  model::BlockProbes recorded;
  for (const auto& p : info) {
    StoredTensor st = ctx.rec.stored_bf16("math/" + std::string(p.name));
    if (!st.full) {
      ctx.report.notes.push_back("explain " + v.name + ": not attributed, the recording stores " + p.name +
                                 " only in part (teacher forcing needs every MATH probe in full)");
      return;
    }
    if (st.data.shape != (computed.*p.member).shape)
      throw Error(ctx.rec.path().string() + ": recorded " + p.name + " is " + shape_str(st.data.shape) +
                  ", psi computed " + shape_str((computed.*p.member).shape));
    recorded.*p.member = std::move(st.data);
  }
  const model::BlockProbes forced = model::block_forward(c, w, in, v, &recorded);

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
    a.tensor = p.name;
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
      if (by_upstream[u]) a.inherited.emplace_back(info[u].name, by_upstream[u]);
    // Inherited with no upstream probe differing cannot happen: forcing changed nothing then.
    if (unexplained)
      throw Error(std::string("explain: ") + p.name + " has " + std::to_string(unexplained) +
                  " elements that differ only with psi's own upstream probes, yet none of them differs");
    ctx.report.attributions.push_back(std::move(a));
  }
}

}  // namespace psi::probes::detail
