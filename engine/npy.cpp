#include "engine/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>

#include "engine/error.h"
#include "engine/file_bytes.h"

namespace psi {

namespace {

static_assert(std::endian::native == std::endian::little, "psi keeps elements little-endian");

constexpr std::string_view kMagic = "\x93NUMPY";

// The header's dict literal, read as numpy writes it (and as Python's literal syntax allows):
// quoted keys, a quoted string, True/False, a tuple of whole numbers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<Shape> shape;
  };

  Fields parse() {
    Fields f;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (f.descr) fail("'descr' is given twice");
        if (peek() == '[') fail("a structured dtype (a list of fields): psi reads arrays of one numeric type");
        f.descr = quoted();
      } else if (key == "fortran_order") {
        if (f.fortran_order) fail("'fortran_order' is given twice");
        f.fortran_order = boolean();
      } else if (key == "shape") {
        if (f.shape) fail("'shape' is given twice");
        f.shape = tuple();
      } else {
        fail("unknown key '" + key.substr(0, 40) + "' (an .npy header has descr, fortran_order and shape)");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}' at header byte " + std::to_string(i_));
    }
    ++i_;
    skip_space();
    if (i_ != s_.size()) fail("text after the header's dict");
    if (!f.descr || !f.fortran_order || !f.shape) fail("the header lacks descr, fortran_order or shape");
    return f;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(name_ + ": not a valid .npy header: " + why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' at header byte " + std::to_string(i_));
    ++i_;
  }
  std::string quoted() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string at header byte " + std::to_string(i_));
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("a string that does not end");
    std::string v(s_.substr(i_ + 1, end - i_ - 1));
    if (v.find('\\') != std::string::npos) fail("an escaped string (numpy writes none)");
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    if (s_.substr(i_).starts_with("True")) return i_ += 4, true;
    if (s_.substr(i_).starts_with("False")) return i_ += 5, false;
    fail("fortran_order is neither True nor False");
  }
  std::int64_t whole() {
    skip_space();
    std::int64_t v = 0;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (std::numeric_limits<std::int64_t>::max() - (s_[i_] - '0')) / 10) fail("a dimension past 2^63 - 1");
      v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ == start) fail("a dimension that is not a whole number at header byte " + std::to_string(start));
    if (peek() == 'L') ++i_;  // Python 2's long suffix
    return v;
  }
  Shape tuple() {
    if (peek() != '(') fail("the shape is not a tuple");
    ++i_;
    Shape shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      shape.push_back(whole());
      if (shape.size() > 64) fail("a shape of more than 64 dimensions");
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++i_;
    return shape;
  }

  std::string_view s_;
  const std::string& name_;
  std::size_t i_ = 0;
};

struct TypeOf {
  NpyType type;
  int bytes;
  bool big_endian;
};

TypeOf type_of(const std::string& descr, const std::string& name) {
  const std::string shown = "'" + descr.substr(0, 40) + "'";
  if (descr.size() >= 2 && (descr[1] == 'O'))
    throw Error(name + ": an object array (dtype " + shown +
                "): its elements are pickled Python objects, which psi does not unpickle; save a numeric array");
  const std::string supported =
      "psi reads float32 '<f4', float64 '<f8', uint8 '|u1', uint16 '<u2' (BF16 bits), int64 '<i8', either byte order";
  if (descr.size() < 3) throw Error(name + ": dtype " + shown + " is not one " + supported);
  const char order = descr[0];
  const std::string type = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw Error(name + ": dtype " + shown + " has no byte order ('<', '>', '|' or '='); " + supported);
  const bool big = order == '>';
  std::optional<TypeOf> t;
  if (type == "f4") t = TypeOf{NpyType::f32, 4, big};
  else if (type == "f8") t = TypeOf{NpyType::f64, 8, big};
  else if (type == "u1") t = TypeOf{NpyType::u8, 1, false};
  else if (type == "u2") t = TypeOf{NpyType::u16, 2, big};
  else if (type == "i8") t = TypeOf{NpyType::i64, 8, big};
  if (!t) throw Error(name + ": dtype " + shown + " is not one " + supported);
  if ((order == '|') != (t->bytes == 1))
    throw Error(name + ": dtype " + shown + ": '|' (no byte order) is for one-byte types only");
  return *t;
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  if (!bytes.starts_with(kMagic)) throw Error(name + ": not a NumPy .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 10) throw Error(name + ": truncated: " + std::to_string(bytes.size()) + " bytes, within the .npy preamble");
  const int major = std::uint8_t(bytes[6]), minor = std::uint8_t(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw Error(name + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                "; psi reads 1.0, 2.0 and 3.0");
  std::uint64_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = std::uint8_t(bytes[8]) | std::uint64_t(std::uint8_t(bytes[9])) << 8;
    start = 10;
  } else {
    if (bytes.size() < 12) throw Error(name + ": truncated: " + std::to_string(bytes.size()) + " bytes, within the .npy preamble");
    for (int i = 0; i < 4; ++i) header_len |= std::uint64_t(std::uint8_t(bytes[8 + i])) << (8 * i);
    start = 12;
  }
  if (header_len > bytes.size() - start)
    throw Error(name + ": truncated: the header declares " + std::to_string(header_len) + " bytes, the file holds " +
                std::to_string(bytes.size() - start) + " after the preamble");
  const std::string_view header = bytes.substr(start, header_len);
  if (major < 3 && std::any_of(header.begin(), header.end(), [](char c) { return std::uint8_t(c) >= 0x80; }))
    throw Error(name + ": not a valid .npy header: a byte outside ASCII in a version " + std::to_string(major) + ".0 header");
  const HeaderParser::Fields f = HeaderParser(header, name).parse();
  const TypeOf t = type_of(*f.descr, name);

  NpyArray a;
  a.descr = *f.descr;
  a.type = t.type;
  a.shape = *f.shape;
  std::uint64_t count = 1;
  for (std::int64_t d : a.shape)
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(d) / std::uint64_t(t.bytes))
      throw Error(name + ": shape " + shape_str(a.shape) + " holds more bytes than any file");
    else count *= std::uint64_t(d);
  const std::uint64_t data_bytes = count * std::uint64_t(t.bytes), held = bytes.size() - start - header_len;
  if (held < data_bytes)
    throw Error(name + ": truncated: shape " + shape_str(a.shape) + " of " + a.descr + " needs " + std::to_string(data_bytes) +
                " bytes of data, the file holds " + std::to_string(held));
  if (held > data_bytes)
    throw Error(name + ": " + std::to_string(held - data_bytes) + " bytes past the " + std::to_string(data_bytes) +
                " bytes of data its header declares (shape " + shape_str(a.shape) + " of " + a.descr + ")");

  const auto* src = reinterpret_cast<const std::uint8_t*>(bytes.data() + start + header_len);
  a.data.resize(std::size_t(data_bytes));
  const std::size_t n = std::size_t(count), w = std::size_t(t.bytes);
  if (a.data.empty()) return a;  // memcpy takes no null pointer, even for no bytes
  if (!*f.fortran_order || a.shape.size() < 2) {
    std::memcpy(a.data.data(), src, a.data.size());
  } else {
    // Column-major to row-major: walk the C order, keeping the Fortran offset of each index.
    const std::size_t rank = a.shape.size();
    std::vector<std::size_t> index(rank, 0), stride(rank, 1);
    for (std::size_t k = 1; k < rank; ++k) stride[k] = stride[k - 1] * std::size_t(a.shape[k - 1]);
    std::size_t off = 0;
    for (std::size_t e = 0; e < n; ++e) {
      std::memcpy(a.data.data() + e * w, src + off * w, w);
      for (std::size_t k = rank; k-- > 0;) {
        off += stride[k];
        if (++index[k] < std::size_t(a.shape[k])) break;
        off -= stride[k] * index[k];
        index[k] = 0;
      }
    }
  }
  if (t.big_endian)
    for (std::size_t e = 0; e < n; ++e) std::reverse(a.data.begin() + std::ptrdiff_t(e * w), a.data.begin() + std::ptrdiff_t((e + 1) * w));
  return a;
}

bool is_npy_file(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  char head[6] = {};
  const bool yes = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) &&
                   std::string_view(head, sizeof head) == kMagic;
  ::close(fd);
  return yes;
}

NpyArray read_npy(const std::filesystem::path& p) { return parse_npy(read_file_bytes(p), p.string()); }

}  // namespace psi
