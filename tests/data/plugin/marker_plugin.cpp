// A stand-in for a hostile HDF5 filter plugin (BadHdf5.FilterPluginsAreNeverLoaded): loading it
// at all, which runs its constructor, leaves the file PSI_TEST_PLUGIN_MARKER names.
#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor)) void leave_marker() {
  if (const char* path = std::getenv("PSI_TEST_PLUGIN_MARKER"))
    if (std::FILE* f = std::fopen(path, "w")) std::fclose(f);
}

}  // namespace
