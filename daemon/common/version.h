#pragma once

namespace accelmon {

// Set by CMake from project(VERSION ...).
inline constexpr const char* kVersion = ACCELMON_VERSION;

}  // namespace accelmon
