#include "engine/json_read.h"

#include <cstdint>

#include "engine/error.h"
#include "engine/memory.h"

namespace psi {

namespace {

using json = nlohmann::json;

// A first SAX pass that builds nothing: linear, it counts nesting, and the values and string
// bytes the parsed document will hold.
struct Bounds : nlohmann::json_sax<json> {
  int depth = 0;
  bool too_deep = false;
  std::uint64_t values = 0, string_bytes = 0;
  bool value() { return ++values, true; }
  bool text(const string_t& s) {
    string_bytes += s.size();
    return value();
  }
  bool open() {
    value();
    if (++depth <= kMaxJsonDepth) return true;
    too_deep = true;
    return false;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t& s) override { return text(s); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t& k) override { return text(k); }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return --depth, true; }
  // Malformed JSON: the parse after this pass reports it.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// What a parsed value costs at most per value: the value itself, and an object member's tree node
// and key string.
constexpr std::uint64_t kBytesPerValue = 128;

void check_bounds(std::string_view text, const std::string& source) {
  Bounds b;
  json::sax_parse(text.begin(), text.end(), &b);
  if (b.too_deep)
    throw Error(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels; refused");
  // Parsed, a document takes many times its text (each small number a whole value): checked
  // against the machine's memory before it is built.
  const std::uint64_t memory = physical_memory_bytes();
  if (b.string_bytes > memory || b.values > memory / kBytesPerValue || b.values * kBytesPerValue > memory - b.string_bytes)
    throw Error(source + ": JSON of " + std::to_string(b.values) + " values would take more than this machine's memory (" +
                std::to_string(memory) + " bytes) once parsed; refused");
}

}  // namespace

json read_json(std::string_view text, const std::string& source) {
  check_bounds(text, source);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(source + ": not valid JSON (" + e.what() + ")");
  }
}

std::optional<json> read_json_if_valid(std::string_view text, const std::string& source, std::string* why) {
  check_bounds(text, source);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

}  // namespace psi
