#include "common/host_facts.h"

#include <fstream>

namespace decodebench {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [&line] {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  };
  while (std::getline(in, line) && (name.empty() || family.empty() || model.empty())) {
    if (line.rfind("model name", 0) == 0) {
      name = value();
    } else if (line.rfind("cpu family", 0) == 0) {
      family = value();
    } else if (line.rfind("model", 0) == 0 && line.find(':') != std::string::npos &&
               line.substr(0, line.find(':')).find_first_not_of("model \t") == std::string::npos) {
      model = value();
    }
  }
  if (name.empty()) return "unknown CPU";
  // A VM may mask the model number ("AMD EPYC" for Zen 3 and Zen 5 alike): the family and model
  // keep two machine classes apart in reports, baselines and compare.
  if (name.find_first_of("0123456789") == std::string::npos && !family.empty() && !model.empty())
    name += " (family " + family + " model " + model + ")";
  return name;
}

}  // namespace decodebench
