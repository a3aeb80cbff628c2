// Reading values back out of a Prometheus text exposition, for tests.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace accelmon::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample line of `text` (comments skipped). Label values must not contain escapes.
std::vector<Sample> ParseExposition(const std::string& text);

// The value of the one sample named `name` whose labels include all of `match`, or nullopt.
// Throws std::runtime_error when more than one sample matches.
std::optional<double> FindValue(const std::vector<Sample>& samples, const std::string& name,
                                const std::map<std::string, std::string>& match = {});

// How many samples named `name` there are.
size_t CountSamples(const std::vector<Sample>& samples, const std::string& name);

}  // namespace accelmon::testing
