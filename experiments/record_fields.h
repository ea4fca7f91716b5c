#pragma once
// One field list per record: a case record (or a part of one) names each key once, with how it is
// written and read back, in a static `fields()`, and the to_json / from_json below are its JSON.
// Adding a field to a record is one line beside the member. nlohmann's
// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE macros cannot say "absent in earlier reports", "not written
// when unset" or "written flat into the parent record", which the recorded reports need: every
// report written before a key was added must still read (`psi report`, `psi merge`), and the
// reports written now must stay byte for byte what they were.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace psi::exp {

// How one field is recorded and read back.
enum class Rule {
  required,    // always written; a record without it is malformed
  if_present,  // always written; absent in earlier reports: keeps the member's default
  when_set,    // a number, bool or string: written unless it has the type's default value;
               // absent: keeps the default
  optional,    // a std::optional: written when set; absent: std::nullopt
  nullable,    // a std::optional: written as null when unset; the key is required
  flat,        // a sub-record (or std::optional of one) whose keys are written into this record; an
               // optional one is present when its first key is
};

template <class R, class T>
struct Field {
  const char* key;  // null for a flat sub-record
  T R::*member;
  Rule rule;
  // A record that must have the key when this holds (read after every field): a complete run's
  // measurements, a failed run's reason.
  bool (*required_if)(const R&) = nullptr;
  // The key, in this field or inside the JSON it holds, whose values measure time (a wall time, a
  // rate): they differ from run to run, and psi compare counts them apart (time_keys_of).
  const char* time_key = nullptr;
  // This field says where an input or an output lay (a path as given), not what it held: psi
  // compare shows its differences and does not count them (provenance_keys_of).
  bool names_a_path = false;
  constexpr Field when(bool (*predicate)(const R&)) const {
    Field f = *this;
    f.required_if = predicate;
    return f;
  }
  // This field is a time.
  constexpr Field measures_time() const { return holds_time(key); }
  // A JSON field of another layer's record that holds times under `inner` (its "wall_s").
  constexpr Field holds_time(const char* inner) const {
    Field f = *this;
    f.time_key = inner;
    return f;
  }
  // This field is a path (names_a_path).
  constexpr Field provenance() const {
    Field f = *this;
    f.names_a_path = true;
    return f;
  }
};

template <class R, class T>
constexpr Field<R, T> field(const char* key, T R::*m) { return {key, m, Rule::required}; }
template <class R, class T>
constexpr Field<R, T> field_if_present(const char* key, T R::*m) { return {key, m, Rule::if_present}; }
template <class R, class T>
constexpr Field<R, T> field_when_set(const char* key, T R::*m) { return {key, m, Rule::when_set}; }
template <class R, class T>
constexpr Field<R, std::optional<T>> field_optional(const char* key, std::optional<T> R::*m) {
  return {key, m, Rule::optional};
}
template <class R, class T>
constexpr Field<R, std::optional<T>> field_nullable(const char* key, std::optional<T> R::*m) {
  return {key, m, Rule::nullable};
}
template <class R, class T>
constexpr Field<R, T> fields_flat(T R::*m) { return {nullptr, m, Rule::flat}; }

// The field list of `R`: its static fields(), or a specialisation for a type of another layer.
template <class R>
struct FieldsOf;
template <class R>
  requires requires { R::fields(); }
struct FieldsOf<R> {
  static auto list() { return R::fields(); }
};

template <class R>
concept Record = requires { FieldsOf<R>::list(); };

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <Record R>
void write_fields(nlohmann::json& j, const R& r);
template <Record R>
void read_fields(const nlohmann::json& j, R& r);

// The first key of a flat sub-record: its presence marks the sub-record present.
template <Record R>
const char* first_key() {
  return std::get<0>(FieldsOf<R>::list()).key;
}

// Each rule applies to the member types it names; a field list that pairs a rule with another
// type writes and reads nothing for it.
template <class R, class T>
void write_field(nlohmann::json& j, const R& r, const Field<R, T>& f) {
  const T& v = r.*f.member;
  if constexpr (is_optional<T>::value) {
    if (f.rule == Rule::flat) {
      if constexpr (Record<typename T::value_type>)
        if (v) write_fields(j, *v);
    } else if (v) {
      if constexpr (std::is_constructible_v<nlohmann::json, const typename T::value_type&>) j[f.key] = *v;
    } else if (f.rule == Rule::nullable) {
      j[f.key] = nullptr;
    }
  } else if (f.rule == Rule::flat) {
    if constexpr (Record<T>) write_fields(j, v);
  } else if constexpr (std::is_constructible_v<nlohmann::json, const T&>) {
    if (f.rule != Rule::when_set) {
      j[f.key] = v;
    } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      if (v != T{}) j[f.key] = v;
    }
  }
}

template <class R, class T>
void read_field(const nlohmann::json& j, R& r, const Field<R, T>& f) {
  T& v = r.*f.member;
  if constexpr (is_optional<T>::value) {
    // Read into a local and moved in: clang caches a nested record's default-constructibility as
    // false while its enclosing record is being defined, which rules out v.emplace() and get<V>().
    using V = typename T::value_type;
    v.reset();
    V read{};
    if (f.rule == Rule::flat) {
      if constexpr (Record<V>)
        if (j.contains(first_key<V>())) {
          read_fields(j, read);
          v = std::move(read);
        }
    } else if (f.rule == Rule::nullable) {
      if constexpr (requires { j.get_to(read); })
        if (const nlohmann::json& value = j.at(f.key); !value.is_null()) {
          value.get_to(read);
          v = std::move(read);
        }
    } else if (const auto it = j.find(f.key); it != j.end()) {
      if constexpr (requires { j.get_to(read); }) {
        it->get_to(read);
        v = std::move(read);
      }
    }
  } else if (f.rule == Rule::flat) {
    if constexpr (Record<T>) read_fields(j, v);
  } else if constexpr (requires { j.get_to(v); }) {
    if (f.rule == Rule::required) {
      j.at(f.key).get_to(v);
    } else if (const auto it = j.find(f.key); it != j.end()) {
      it->get_to(v);
    }
  }
}

template <Record R>
void write_fields(nlohmann::json& j, const R& r) {
  if (!j.is_object()) j = nlohmann::json::object();
  std::apply([&](const auto&... f) { (write_field(j, r, f), ...); }, FieldsOf<R>::list());
}

template <Record R>
void read_fields(const nlohmann::json& j, R& r) {
  const auto fields = FieldsOf<R>::list();
  std::apply([&](const auto&... f) { (read_field(j, r, f), ...); }, fields);
  std::apply([&](const auto&... f) { ((f.required_if && f.required_if(r) ? (void)j.at(f.key) : void()), ...); },
             fields);
  if constexpr (requires { r.check(); }) r.check();
}

// nlohmann's (de)serialisation of every record of namespace psi::exp (found by ADL).
template <Record R>
void to_json(nlohmann::json& j, const R& r) {
  j = nlohmann::json::object();
  write_fields(j, r);
}
template <Record R>
void from_json(const nlohmann::json& j, R& r) {
  read_fields(j, r);
}

// The record a member holds (itself, or what a std::optional, std::vector or std::map of
// records holds), for walking nested field lists.
template <class T>
struct held {
  using type = T;
};
template <class T>
struct held<std::optional<T>> : held<T> {};
template <class T>
struct held<std::vector<T>> : held<T> {};
template <class K, class T>
struct held<std::map<K, T>> : held<T> {};

// The keys `pick` names over the fields of `R` and of the records nested in it (pick: a field ->
// its key to declare, or null).
template <Record R, class Pick>
void add_declared_keys(std::set<std::string>& out, const Pick& pick) {
  const auto one = [&](const auto& f) {
    if (const char* k = pick(f)) out.insert(k);
    using Member = std::remove_cvref_t<decltype(std::declval<R>().*(f.member))>;
    if constexpr (Record<typename held<Member>::type>) add_declared_keys<typename held<Member>::type>(out, pick);
  };
  std::apply([&](const auto&... f) { (one(f), ...); }, FieldsOf<R>::list());
}

// Every key that measures time in a record of `R`, its nested records' included: what a report
// declares beside its cases (attribute `time_fields`), so that psi compare knows them by their
// record, never by their names' words.
template <Record R>
std::vector<std::string> time_keys_of() {
  std::set<std::string> keys;
  add_declared_keys<R>(keys, [](const auto& f) { return f.time_key; });
  return {keys.begin(), keys.end()};
}

// Every key of `R` (nested records' included) that names a path: what a report declares beside
// its cases (attribute `provenance_fields`).
template <Record R>
std::vector<std::string> provenance_keys_of() {
  std::set<std::string> keys;
  add_declared_keys<R>(keys, [](const auto& f) { return f.names_a_path ? f.key : nullptr; });
  return {keys.begin(), keys.end()};
}

// A recorded case read through the record `R` and written again: what the report would hold had
// this build written it (Experiment::reread).
template <Record R>
nlohmann::json reread_as(const nlohmann::json& recorded) {
  return recorded.get<R>();
}

}  // namespace psi::exp
