#include "engine/runtime/journal.h"

#include <algorithm>
#include <utility>

#include "engine/error.h"

namespace psi::rt {

std::string JournalKey::str() const {
  return "block " + std::to_string(block) + (branch == Branch::video ? " video " : " audio ") + role + " tile " +
         std::to_string(tile);
}

HostJournal::Entry& HostJournal::prepare(const JournalKey& key, const Shape& shape) {
  Entry& e = entries_[key];
  if (e.shape != shape) {
    e.shape = shape;
    e.data.assign(std::size_t(numel(shape)), Bf16{});
  }
  return e;
}

void HostJournal::put(const JournalKey& key, const Shape& shape, std::span<const Bf16> values) {
  if (std::int64_t(values.size()) != numel(shape))
    throw Error("journal: " + key.str() + ": " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Entry& e = prepare(key, shape);
  std::copy(values.begin(), values.end(), e.data.begin());
}

const HostJournal::Entry& HostJournal::get(const JournalKey& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw Error("journal: no entry for " + key.str(), Exit::run_failed);
  return it->second;
}

HostJournal::Entry& HostJournal::get(const JournalKey& key) {
  return const_cast<Entry&>(std::as_const(*this).get(key));
}

std::uint64_t HostJournal::bytes() const {
  std::uint64_t n = 0;
  for (const auto& [k, e] : entries_) n += e.data.size() * sizeof(Bf16);
  return n;
}

}  // namespace psi::rt
