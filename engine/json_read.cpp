#include "engine/json_read.h"

#include "engine/error.h"

namespace psi {

namespace {

using json = nlohmann::json;

// A first SAX pass that only counts nesting: linear, and it builds nothing.
struct DepthLimit : nlohmann::json_sax<json> {
  int depth = 0;
  bool too_deep = false;
  bool open() {
    if (++depth <= kMaxJsonDepth) return true;
    too_deep = true;
    return false;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return --depth, true; }
  // Malformed JSON: the parse after this pass reports it.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

void check_depth(std::string_view text, const std::string& source) {
  DepthLimit d;
  json::sax_parse(text.begin(), text.end(), &d);
  if (d.too_deep)
    throw Error(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels; refused");
}

}  // namespace

json read_json(std::string_view text, const std::string& source) {
  check_depth(text, source);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(source + ": not valid JSON (" + e.what() + ")");
  }
}

std::optional<json> read_json_if_valid(std::string_view text, const std::string& source, std::string* why) {
  check_depth(text, source);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

}  // namespace psi
