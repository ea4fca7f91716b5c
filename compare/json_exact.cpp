#include "compare/json_exact.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/error.h"
#include "engine/json_read.h"

namespace psi::compare {

namespace {

using nlohmann::json;

bool digit(char c) { return c >= '0' && c <= '9'; }

// RFC 8259's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool valid_number(std::string_view s) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && digit(s[i])) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') ++i;
  else if (!digits()) return false;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// A valid number's exact value as "[-]<digits>e<exponent>": digits without leading or trailing
// zeros, "0" or "-0" for a zero (its sign kept).
std::string canonical(std::string_view s, const std::string& source) {
  const bool negative = s.front() == '-';
  if (negative) s.remove_prefix(1);
  const std::size_t e = s.find_first_of("eE");
  const std::string_view mantissa = s.substr(0, e);
  const std::size_t point = mantissa.find('.');
  std::string digits(mantissa.substr(0, point));
  const std::string_view fraction = point == std::string_view::npos ? "" : mantissa.substr(point + 1);
  digits += fraction;
  std::int64_t exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view x = s.substr(e + 1);
    const bool down = x.front() == '-';
    if (x.front() == '+' || x.front() == '-') x.remove_prefix(1);
    x.remove_prefix(std::min(x.find_first_not_of('0'), x.size()));
    if (x.size() > 18)
      throw Error(source + ": the number " + std::string(s.substr(0, 40)) + "... has an exponent of " +
                  std::to_string(x.size()) + " digits (psi compares exponents of up to 18)");
    for (char c : x) exponent = exponent * 10 + (c - '0');
    if (down) exponent = -exponent;
  }
  exponent -= std::int64_t(fraction.size());
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.empty()) return negative ? "-0" : "0";
  const std::size_t last = digits.find_last_not_of('0');
  exponent += std::int64_t(digits.size() - last - 1);
  digits.erase(last + 1);
  return (negative ? "-" : "") + digits + "e" + std::to_string(exponent);
}

// Builds the document from the parser's events, numbers from the lexemes in document order.
class Builder : public nlohmann::json_sax<json> {
 public:
  Builder(const std::vector<std::string>& numbers, const std::string& source) : numbers_(numbers), source_(source) {}
  json root;
  std::string error;

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t) override { return number(); }
  bool number_unsigned(number_unsigned_t) override { return number(); }
  bool number_float(number_float_t, const string_t&) override { return number(); }
  bool string(string_t& v) override { return put(v); }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) {
      error = source_ + ": duplicate key '" + k.substr(0, 80) + "' in the object at " + (path_.empty() ? "the top" : path_) +
              " (JSON text psi compares names each key once)";
      return false;
    }
    key_ = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = source_ + ": not valid JSON (" + e.what() + ")";
    return false;
  }

 private:
  bool number() {
    const std::string& c = numbers_.at(next_++);
    return put(json::binary(json::binary_t::container_type(c.begin(), c.end())));
  }
  json* place(json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool put(json v) {
    place(std::move(v));
    return true;
  }
  bool open(json v) {
    const std::string at = stack_.empty() ? "" : stack_.back()->is_array() ? "[" + std::to_string(stack_.back()->size()) + "]" : "." + key_;
    stack_.push_back(place(std::move(v)));
    keys_.emplace_back();
    lengths_.push_back(path_.size());
    path_ += at;
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    path_.resize(lengths_.back());
    lengths_.pop_back();
    return true;
  }

  const std::vector<std::string>& numbers_;
  std::string source_;
  std::size_t next_ = 0;
  std::vector<json*> stack_;  // the open containers; an array grows only while it is the innermost
  std::vector<std::set<std::string>> keys_;
  std::vector<std::size_t> lengths_;
  std::string path_, key_;
};

std::string number_text(const json::binary_t& b) {
  const std::string c(b.begin(), b.end());
  if (c == "0" || c == "-0") return c;
  const bool negative = c.front() == '-';
  const std::size_t e = c.find('e');
  const std::string digits = c.substr(negative, e - negative);
  const std::int64_t exponent = std::stoll(c.substr(e + 1));
  const std::int64_t n = std::int64_t(digits.size());
  std::string out;
  if (exponent >= 0 && exponent <= 20) out = digits + std::string(std::size_t(exponent), '0');
  else if (exponent < 0 && -exponent < n) out = digits.substr(0, std::size_t(n + exponent)) + "." + digits.substr(std::size_t(n + exponent));
  else if (exponent < 0 && -exponent - n <= 6) out = "0." + std::string(std::size_t(-exponent - n), '0') + digits;
  else out = digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "") + "e" + std::to_string(exponent + n - 1);
  return (negative ? "-" : "") + out;
}

}  // namespace

json read_json_exact(std::string_view text, const std::string& source) {
  // Each number is taken out as its exact value and a 0 left in its place, so that the parser
  // sees only numbers it holds exactly (it would refuse 1e400 as an overflow).
  std::string plain;
  plain.reserve(text.size());
  std::vector<std::string> numbers;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      const std::size_t n = c == '\\' && i + 1 < text.size() ? 2 : 1;
      plain.append(text.substr(i, n));
      in_string = c != '"';
      i += n;
    } else if (c == '-' || digit(c)) {
      std::size_t j = i;
      while (j < text.size() && std::string_view("+-.eE0123456789").find(text[j]) != std::string_view::npos) ++j;
      const std::string_view lexeme = text.substr(i, j - i);
      if (!valid_number(lexeme))
        throw Error(source + ": not valid JSON (the number '" + std::string(lexeme.substr(0, 40)) + "')");
      numbers.push_back(canonical(lexeme, source));
      plain += '0';
      i = j;
    } else {
      in_string = c == '"';
      plain += c;
      ++i;
    }
  }
  read_json(plain, source);  // the one reader's bounds (depth, memory) and its reasons
  Builder b(numbers, source);
  if (!json::sax_parse(plain.begin(), plain.end(), &b)) throw Error(b.error);
  return std::move(b.root);
}

std::string show_exact(const json& j) {
  if (j.is_binary()) return number_text(j.get_binary());
  std::string out;
  if (j.is_array()) {
    for (const auto& e : j) out += (out.empty() ? "" : ",") + show_exact(e);
    return "[" + out + "]";
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) out += (out.empty() ? "" : ",") + json(k).dump() + ":" + show_exact(v);
    return "{" + out + "}";
  }
  return j.dump();
}

}  // namespace psi::compare
