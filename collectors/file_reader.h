// Reading small pseudo-files (procfs, sysfs) whole, with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

namespace accelmon::collectors {

// Reads the whole file into `out`. Returns 0, or the errno of the failure. Pseudo-files report
// a size of 0, so this reads until end of file. No exceptions: sysfs attributes that a driver
// does not support fail routinely, on every tick.
int TryReadTextFile(const std::filesystem::path& path, std::string& out);

// Reads a sysfs attribute with ONE read(2): the kernel renders an attribute whole, at most a
// page, in the first read, so the read that would confirm end-of-file is saved (a fifth of a
// host collection cycle's system calls). Returns 0 or the errno.
int TryReadAttributeFile(const std::filesystem::path& path, std::string& out);

// Throws CollectorError("read <path>: <strerror>").
[[noreturn]] void ThrowReadError(const std::filesystem::path& path, int error);

// As TryReadTextFile, but throws CollectorError("read <path>: <strerror>") on failure. For the
// one file a collector cannot do without.
std::string ReadTextFile(const std::filesystem::path& path);

}  // namespace accelmon::collectors
