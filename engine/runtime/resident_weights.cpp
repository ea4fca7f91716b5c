#include "engine/runtime/resident_weights.h"

#include <algorithm>
#include <span>
#include <utility>

#include "engine/parallel.h"

namespace psi::rt {

ResidentWeights::ResidentWeights(Runtime& rt, const ckpt::WeightSource& source) : rt_(rt), source_(source) {}

ResidentWeights::Key ResidentWeights::key(std::string_view name, const ckpt::Slice& s) {
  return {std::string(name), s.r0, s.r1, s.c0, s.c1};
}

void ResidentWeights::load(const std::vector<WeightSlice>& tiles) {
  // Copies out of the buffer may still be in flight: the previous block must be over.
  rt_.drain();
  std::map<Key, std::uint64_t> offsets;
  std::vector<std::pair<const WeightSlice*, std::uint64_t>> distinct;
  std::uint64_t total = 0;
  for (const WeightSlice& w : tiles)
    if (offsets.emplace(key(w.tensor, w.slice), total).second) {
      distinct.emplace_back(&w, total);
      total += w.bytes();
    }
  if (total > buffer_.bytes) buffer_ = rt_.allocate_pinned(total, "host-resident weights");
  // Distinct slices go to disjoint bytes and sources read const: the load fans out over the
  // host's threads (SynthInit generation of a full-size block is seconds on one core).
  std::byte* base = buffer_.data;
  psi::parallel_for(std::int64_t(distinct.size()), [&](std::int64_t i) {
    const auto& [w, off] = distinct[std::size_t(i)];
    source_.read(w->tensor, w->slice,
                 std::span<Bf16>(reinterpret_cast<Bf16*>(base + off), std::size_t(w->slice.numel())));
  });
  offsets_ = std::move(offsets);
  used_ = total;
}

std::string ResidentWeights::describe() const { return "host-resident tiles of " + source_.describe(); }

bool ResidentWeights::contains(std::string_view name) const { return source_.contains(name); }

Shape ResidentWeights::shape(std::string_view name) const { return source_.shape(name); }

void ResidentWeights::read(std::string_view name, const ckpt::Slice& s, std::span<Bf16> out) const {
  if (const Bf16* p = resident(name, s)) {
    ckpt::check_slice(name, shape(name), s, out.size());
    std::copy_n(p, out.size(), out.begin());
    return;
  }
  source_.read(name, s, out);
}

const Bf16* ResidentWeights::resident(std::string_view name, const ckpt::Slice& s) const {
  const auto it = offsets_.find(key(name, s));
  return it == offsets_.end() ? nullptr : reinterpret_cast<const Bf16*>(buffer_.data + it->second);
}

}  // namespace psi::rt
