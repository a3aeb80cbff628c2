// Reading small pseudo-files (procfs, sysfs) whole, with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

namespace accelmon::collectors {

// Returns the file's contents. Throws CollectorError("read <path>: <strerror>") when it cannot
// be opened or read. Pseudo-files report a size of 0, so this reads until end of file.
std::string ReadTextFile(const std::filesystem::path& path);

}  // namespace accelmon::collectors
