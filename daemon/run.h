// Running each role until SIGINT or SIGTERM. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/flags.h"

namespace accelmon {

struct CollectorFlags {
  std::string node_name;
  std::string interval = "1s";
  std::string procfs = "/proc";
  std::string sysfs = "/sys";
  int sim_devices = 0;
  std::optional<uint64_t> sim_seed;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string dcmi_library = "libdcmi.so";
  std::string device_timeout = "2s";
};

struct ExporterFlags {
  std::string web_listen = ":9477";
  std::string grpc_listen = ":9478";
  std::string expire_after = "10m";
};

int RunAgent(const CollectorFlags& collectors, const std::string& exporter_address);
int RunExporter(const ExporterFlags& exporter);
int RunStandalone(const CollectorFlags& collectors, const ExporterFlags& exporter);

}  // namespace accelmon
