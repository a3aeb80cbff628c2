// The one small interface every telemetry source implements.
#pragma once

#include <stdexcept>
#include <string_view>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::collectors {

// Thrown by a collector whose source cannot be read at all this tick (file missing, library
// call failed). The collector's status becomes "failed" with this message; other collectors go on.
class CollectorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Collector {
 public:
  virtual ~Collector() = default;

  // Short lower-case name used in logs and the `collector` label, e.g. "meminfo".
  virtual std::string_view name() const = 0;

  // Adds what this source reports to `report`. Values the source does not report stay absent.
  // Called once per tick from the agent's collection thread; `report.timestamp()` is set.
  virtual void Collect(v1::NodeReport& report) = 0;
};

}  // namespace accelmon::collectors
