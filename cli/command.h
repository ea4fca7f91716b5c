#pragma once
// Subcommand registry: each cli/cmd_*.cpp registers one `psi <name>` with its options and the
// function that runs it. main() only parses and dispatches.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace psi::cli {

using Runner = std::function<int()>;
// Declares the subcommand's options on `sub` and returns what runs it after parsing.
using Setup = std::function<Runner(CLI::App& sub)>;

struct Command {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<Command>& registry();

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace psi::cli
