// The one command language (README.md "Commands") read from `decodebench ... --help` text: the
// checks of cli_test.cpp's CliLanguage tests, apart so planted help texts can be fed to them.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace decodebench::testing {

// The subcommands a top-level --help lists (CLI11's "SUBCOMMANDS:" section), in order.
inline std::vector<std::string> subcommands_in_help(const std::string& top_help) {
  std::vector<std::string> names;
  std::istringstream lines(top_help);
  bool in_section = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line.front() != ' ') {
      in_section = line.rfind("SUBCOMMANDS", 0) == 0 || line.rfind("Subcommands", 0) == 0;
      continue;
    }
    if (!in_section) continue;
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// The description of option `flag` in a command's --help ("" when the command has no such
// option); CLI11 puts it on the next line when the option's column overflows.
inline std::string option_help(const std::string& help, const std::string& flag) {
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, flag.size(), flag) != 0) continue;
    const std::size_t after = start + flag.size();
    if (after < line.size() && line[after] != ' ' && line[after] != ',') continue;  // a longer name
    const std::size_t gap = line.find("  ", after);
    std::string text;
    if (gap != std::string::npos) text = line.substr(line.find_first_not_of(' ', gap));
    if (text.empty() && std::getline(lines, line)) text = line.substr(line.find_first_not_of(' '));
    return text;
  }
  return {};
}

// What in one command's --help breaks the language: --out not the JSON document, --format not
// what stdout prints, KV formats under another name than --kv-dtype.
inline std::vector<std::string> language_problems(const std::string& command,
                                                  const std::string& help) {
  std::vector<std::string> problems;
  const std::string out = option_help(help, "--out");
  if (help.find("--out ") != std::string::npos && out.rfind("The JSON document", 0) != 0) {
    problems.push_back(command + " --out: \"" + out + "\" (must be the JSON document)");
  }
  const std::string format = option_help(help, "--format");
  if (help.find("--format ") != std::string::npos && format.rfind("What stdout prints", 0) != 0) {
    problems.push_back(command + " --format: \"" + format + "\" (must be what stdout prints)");
  }
  for (const char* other : {"--formats", "--kv-dtypes", "--kv-formats", "--json"}) {
    if (!option_help(help, other).empty()) {
      problems.push_back(command + " " + other + ": KV formats are --kv-dtype, a JSON file --out");
    }
  }
  return problems;
}

// What in a measuring command's --help differs from the sweep's measurement options: a command
// that measures (it takes the stopping rule's --min-samples) takes all of them, each described as
// `sweep --help` describes it. (`report --max-noise` and `model --ceilings` read, not measure.)
inline std::vector<std::string> measurement_problems(const std::string& command,
                                                     const std::string& help,
                                                     const std::string& sweep_help) {
  const char* flags[] = {"--min-samples", "--min-time", "--max-noise",
                         "--timeout",     "--warm",     "--ceilings"};
  std::vector<std::string> problems;
  if (option_help(help, "--min-samples").empty()) return problems;
  for (const char* flag : flags) {
    const std::string here = option_help(help, flag);
    const std::string sweep = option_help(sweep_help, flag);
    if (here != sweep) {
      problems.push_back(command + " " + flag + ": \"" + here + "\" (sweep: \"" + sweep + "\")");
    }
  }
  return problems;
}

}  // namespace decodebench::testing
