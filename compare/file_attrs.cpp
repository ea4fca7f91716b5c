#include "compare/file_attrs.h"

#include <variant>

namespace psi::compare {

std::string string_attr(const hdf5::File& f, const std::string& ds, const char* name) {
  auto v = f.attr(ds, name);
  return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string();
}

std::string file_format(const hdf5::File& f) {
  for (const char* name : {"schema", "format"}) {
    std::string v = string_attr(f, "/", name);
    if (!v.empty()) return v;
  }
  return "plain HDF5";
}

}  // namespace psi::compare
