#pragma once
// Host-resident weights: a block's weight tiles read from their source once, before the block
// runs, into one page-locked buffer of the runtime, so that every page fill is a single
// host-to-device copy straight out of it (no staging, no source work on the critical path).
// This is what a serving process holds after loading its checkpoint into pinned memory; the
// block's time then measures transport and arithmetic, which is what the transfer floor
// (weight bytes / pinned copy bandwidth) bounds. Tiles a plan consumes more than once (every
// row tile streams the block's weights again) are held once.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/checkpoint/weight_source.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/runtime.h"

namespace psi::rt {

class ResidentWeights final : public ckpt::WeightSource {
 public:
  // `source` must outlive this object.
  ResidentWeights(Runtime& rt, const ckpt::WeightSource& source);

  // Makes exactly the distinct slices of `tiles` resident (replacing the previous block's); the
  // buffer grows to the largest set seen, by a new pinned allocation.
  void load(const std::vector<WeightSlice>& tiles);
  // Bytes of the slices resident now, and of the pinned buffer.
  std::uint64_t resident_bytes() const { return used_; }
  std::uint64_t buffer_bytes() const { return buffer_.bytes; }

  std::string describe() const override;
  bool contains(std::string_view name) const override;
  Shape shape(std::string_view name) const override;
  // A resident slice is copied out of the buffer; any other is read from the source.
  void read(std::string_view name, const ckpt::Slice& s, std::span<Bf16> out) const override;
  const Bf16* resident(std::string_view name, const ckpt::Slice& s) const override;

 private:
  using Key = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  static Key key(std::string_view name, const ckpt::Slice& s);

  Runtime& rt_;
  const ckpt::WeightSource& source_;
  HostBuffer buffer_;
  std::uint64_t used_ = 0;
  std::map<Key, std::uint64_t> offsets_;  // byte offset of each resident slice in buffer_
};

}  // namespace psi::rt
