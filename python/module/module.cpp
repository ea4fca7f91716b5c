// The extension module psi._psi: the same library calls as the command line, on arrays handed
// over by the Python package (python/psi/). A psi::Error becomes psi.Error carrying the CLI's
// one-line message; every long call releases the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/parallel.h"
#include "engine/synthinit.h"
#include "python/module/arrays.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_psi, m) {
  nb::exception<psi::Error>(m, "Error", PyExc_ValueError);

  m.def("threads", &psi::thread_count, "threads psi's kernels use (PSI_THREADS, else the hardware's)");
  m.def(
      "set_threads",
      [](int n) {
        if (n < 0 || n > 1024) throw psi::Error("psi.set_threads: " + std::to_string(n) + " is not 0 (the default) to 1024");
        psi::set_thread_count(n);
      },
      "n"_a, "threads for psi's kernels from now on (0: the default); results do not depend on it");

  m.def(
      "synthinit",
      [](const std::string& name, const std::vector<std::int64_t>& shape, std::uint64_t seed) {
        psi::Bf16Tensor t;
        {
          nb::gil_scoped_release unlocked;
          t = psi::synthinit::make(name, shape, seed);
        }
        return psi::python::bits_array(std::move(t));
      },
      "name"_a, "shape"_a, "seed"_a);

  psi::python::bind_official(m);
  psi::python::bind_oracle(m);
  psi::python::bind_compare(m);
}
