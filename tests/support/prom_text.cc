#include "support/prom_text.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace accelmon::testing {

std::vector<Sample> ParseExposition(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t pos = line.find_first_of("{ ");
    s.name = line.substr(0, pos);
    if (pos != std::string::npos && line[pos] == '{') {
      const size_t close = line.find('}', pos);
      std::string labels = line.substr(pos + 1, close - pos - 1);
      size_t i = 0;
      while (i < labels.size()) {
        const size_t eq = labels.find('=', i);
        const size_t q1 = labels.find('"', eq);
        const size_t q2 = labels.find('"', q1 + 1);
        s.labels[labels.substr(i, eq - i)] = labels.substr(q1 + 1, q2 - q1 - 1);
        i = q2 + 1;
        if (i < labels.size() && labels[i] == ',') ++i;
      }
      pos = close + 1;
    }
    s.value = std::strtod(line.c_str() + pos, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> FindValue(const std::vector<Sample>& samples, const std::string& name,
                                const std::map<std::string, std::string>& match) {
  std::optional<double> found;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (found) throw std::runtime_error("more than one sample of " + name + " matches");
    found = s.value;
  }
  return found;
}

size_t CountSamples(const std::vector<Sample>& samples, const std::string& name) {
  size_t n = 0;
  for (const Sample& s : samples) n += s.name == name ? 1 : 0;
  return n;
}

}  // namespace accelmon::testing
