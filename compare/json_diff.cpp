#include "compare/json_diff.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/file_attrs.h"
#include "compare/json_exact.h"
#include "engine/json_read.h"
#include "hdf5/schema.h"

namespace psi::compare {

namespace {

// The names two declarations both hold (JSON lists: a table's time_columns, a text's
// time_fields; anything else declares none): a name one side alone declares is compared, so
// that no file can exempt a field the other does not.
std::set<std::string> declared_by_both(const nlohmann::json& a, const nlohmann::json& b) {
  const auto names = [](const nlohmann::json& list) {
    std::set<std::string> out;
    if (list.is_array())
      for (const auto& n : list)
        if (n.is_string()) out.insert(n.get<std::string>());
    return out;
  };
  const std::set<std::string> x = names(a), y = names(b);
  std::set<std::string> both;
  std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::inserter(both, both.end()));
  return both;
}

// The leaves of two JSON values side by side: each leaf (or a leaf on one side only) counted,
// and those that differ recorded by path; a leaf under a time field (a key in `time_keys`, a cell
// of a table's time column) or under a provenance field (a key in `provenance_keys`) is counted
// apart.
struct JsonDiff {
  bool timing = false;
  std::set<std::string> time_keys;        // declared by both files (the dataset's time_fields)
  std::set<std::string> provenance_keys;  // the same for provenance_fields
  std::int64_t leaves = 0, timing_leaves = 0, timing_differing = 0, provenance_leaves = 0;
  std::vector<std::string> differing;  // paths, in document order
  std::string first;                   // "path: A=… B=…" of the first
  std::string first_provenance;        // the same for the first provenance field that differs
  bool in_provenance = false;

  void leaf(const std::string& path, const nlohmann::json* a, const nlohmann::json* b, bool timed) {
    ++leaves;
    // Numbers are their exact values (compare/json_exact.h): == compares those.
    const bool same = a && b && *a == *b;
    if (in_provenance) {
      ++provenance_leaves;
      if (!same && first_provenance.empty())
        first_provenance = path.substr(path.starts_with(".") ? 1 : 0) + ": A=" + (a ? show_exact(*a) : std::string("(absent)")) +
                           " B=" + (b ? show_exact(*b) : std::string("(absent)"));
      return;
    }
    if (timed) {
      ++timing_leaves;
      if (!same) ++timing_differing;
      if (!timing) return;
    }
    if (same) return;
    if (differing.empty())
      first = path + ": A=" + (a ? show_exact(*a) : std::string("(absent)")) + " B=" + (b ? show_exact(*b) : std::string("(absent)"));
    differing.push_back(path);
  }

  void walk(const std::string& path, const nlohmann::json* a, const nlohmann::json* b, bool timed) {
    const bool objects = a && b && a->is_object() && b->is_object();
    const bool arrays = a && b && a->is_array() && b->is_array();
    if (objects) {
      // A rendered table: its cells under a column both sides call a time column are time fields.
      std::vector<bool> timed_column;
      if (a->contains("columns") && a->at("columns").is_array()) {
        const std::set<std::string> time_columns =
            declared_by_both(a->value("time_columns", nlohmann::json()), b->value("time_columns", nlohmann::json()));
        for (const auto& c : a->at("columns")) timed_column.push_back(c.is_string() && time_columns.count(c.get<std::string>()));
      }
      std::set<std::string> keys;
      for (const auto& [k, v] : a->items()) keys.insert(k);
      for (const auto& [k, v] : b->items()) keys.insert(k);
      for (const auto& k : keys) {
        const nlohmann::json* x = a->contains(k) ? &a->at(k) : nullptr;
        const nlohmann::json* y = b->contains(k) ? &b->at(k) : nullptr;
        const std::string sub = path + "." + k;
        if (k == "rows" && !timed_column.empty() && x && y && x->is_array() && y->is_array()) {
          rows(sub, *x, *y, timed_column, timed);
          continue;
        }
        const bool was = in_provenance;
        in_provenance = in_provenance || provenance_keys.count(k);
        walk(sub, x, y, timed || time_keys.count(k));
        in_provenance = was;
      }
    } else if (arrays) {
      for (std::size_t i = 0; i < std::max(a->size(), b->size()); ++i)
        walk(path + "[" + std::to_string(i) + "]", i < a->size() ? &(*a)[i] : nullptr, i < b->size() ? &(*b)[i] : nullptr,
             timed);
    } else {
      leaf(path, a, b, timed);
    }
  }

  void rows(const std::string& path, const nlohmann::json& a, const nlohmann::json& b, const std::vector<bool>& timed_column,
            bool timed) {
    for (std::size_t r = 0; r < std::max(a.size(), b.size()); ++r) {
      const nlohmann::json* x = r < a.size() ? &a[r] : nullptr;
      const nlohmann::json* y = r < b.size() ? &b[r] : nullptr;
      const std::string sub = path + "[" + std::to_string(r) + "]";
      if (!x || !y || !x->is_array() || !y->is_array()) {
        walk(sub, x, y, timed);
        continue;
      }
      for (std::size_t c = 0; c < std::max(x->size(), y->size()); ++c)
        walk(sub + "[" + std::to_string(c) + "]", c < x->size() ? &(*x)[c] : nullptr, c < y->size() ? &(*y)[c] : nullptr,
             timed || (c < timed_column.size() && timed_column[c]));
    }
  }
};

}  // namespace

void compare_json_text(const hdf5::File& a, const std::string& path_a, const hdf5::File& b, const std::string& path_b,
                       const CompareOptions& opt, DatasetComparison& out) {
  const std::string ta = a.read_text(path_a), tb = b.read_text(path_b);
  const nlohmann::json ja = read_json_exact(ta, a.path().string() + ":" + path_a);
  const nlohmann::json jb = read_json_exact(tb, b.path().string() + ":" + path_b);
  JsonDiff d;
  d.timing = opt.timing;
  // The keys that measure time and those that name a path are what the writer declared beside
  // the text (attributes time_fields and provenance_fields, JSON lists), never guessed from
  // their names.
  const auto declared = [](const hdf5::File& f, const std::string& path, const char* attr) {
    const std::string list = string_attr(f, path, attr);
    if (list.empty()) return nlohmann::json();
    return read_json_if_valid(list, f.path().string() + ":" + path + "@" + attr).value_or(nullptr);
  };
  const nlohmann::json da = declared(a, path_a, hdf5::attr::time_fields), db = declared(b, path_b, hdf5::attr::time_fields);
  const nlohmann::json pa = declared(a, path_a, hdf5::attr::provenance_fields),
                       pb = declared(b, path_b, hdf5::attr::provenance_fields);
  d.time_keys = declared_by_both(da, db);
  d.provenance_keys = declared_by_both(pa, pb);
  d.walk("", &ja, &jb, false);
  out.compared = d.leaves;
  out.differing = std::int64_t(d.differing.size());
  // Equal as JSON is not equal bytes (spacing, key order, 1.0 for 1, fields not counted): its own
  // verdict, so that "bitwise equal" always means equal bytes.
  out.status = !d.differing.empty() ? CompareStatus::differs
               : ta == tb           ? CompareStatus::equal
                                    : CompareStatus::equal_as_json;
  out.note = "JSON, compared field by field";
  if (out.status == CompareStatus::equal_as_json) out.note += " (equal as JSON; the texts differ in bytes)";
  if (!d.differing.empty()) out.note += "; first differing field " + d.first.substr(d.first.front() == '.' ? 1 : 0);
  if (!d.first_provenance.empty())
    out.note += "; paths of inputs differ, not counted (provenance: " + d.first_provenance + ")";
  if (d.timing_leaves > 0)
    out.note += opt.timing ? "; timing fields compared (" + std::to_string(d.timing_differing) + " of " +
                                 std::to_string(d.timing_leaves) + " differ)"
                           : "; " + std::to_string(d.timing_leaves) + " timing fields not compared (" +
                                 std::to_string(d.timing_differing) + " differ; --timing compares them)";
  if (da != db)
    out.note += "; the files declare different time fields (A " + da.dump() + ", B " + db.dump() +
                "): only those both declare are counted apart";
  if (pa != pb)
    out.note += "; the files declare different provenance fields (A " + pa.dump() + ", B " + pb.dump() +
                "): only those both declare are counted apart";
}

}  // namespace psi::compare
