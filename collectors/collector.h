// The one small interface every telemetry source implements.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::collectors {

// Thrown by a collector whose source cannot be read at all this tick (file missing, library
// call failed). The collector's status becomes "failed" with this message; other collectors go on.
class CollectorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when this node simply has no such source (no InfiniBand, no hwmon, a kernel without
// PSI). Like node_exporter's "no data", the collector is not counted as failed.
class SourceAbsent : public CollectorError {
 public:
  using CollectorError::CollectorError;
};

// Throws SourceAbsent for a missing path or a feature the kernel has switched off (ENOENT,
// EOPNOTSUPP: PSI with psi=0), CollectorError for any other error.
[[noreturn]] inline void ThrowSourceError(const std::string& what, const std::error_code& ec) {
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::operation_not_supported) {
    throw SourceAbsent(what + ": " + ec.message());
  }
  throw CollectorError(what + ": " + ec.message());
}

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
