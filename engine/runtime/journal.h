#pragma once
// The host journal: an indexed host store of BF16 state tensors keyed by
// (block, branch, tensor role, tile). Transports (journal_transport.h) move state between it and
// the arena; the store itself is plain host memory.
#include <compare>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "engine/tensor.h"

namespace psi::rt {

enum class Branch { video, audio };

struct JournalKey {
  int block = 0;
  Branch branch = Branch::video;
  std::string role;  // e.g. "hidden", "ffn.h"
  int tile = 0;

  auto operator<=>(const JournalKey&) const = default;
  std::string str() const;  // "block 3 video ffn.h tile 2"
};

class HostJournal {
 public:
  struct Entry {
    Shape shape;
    std::vector<Bf16> data;
  };

  // The entry for `key`, created or reshaped to `shape` (its values then unspecified).
  Entry& prepare(const JournalKey& key, const Shape& shape);
  // Host-side insert (inputs, tests).
  void put(const JournalKey& key, const Shape& shape, std::span<const Bf16> values);
  // Throws psi::Error naming the key when it was never committed.
  const Entry& get(const JournalKey& key) const;
  Entry& get(const JournalKey& key);
  bool contains(const JournalKey& key) const { return entries_.count(key) != 0; }

  const std::map<JournalKey, Entry>& entries() const { return entries_; }
  std::uint64_t bytes() const;

 private:
  std::map<JournalKey, Entry> entries_;  // std::map: entries never move, so buffers stay put
};

}  // namespace psi::rt
