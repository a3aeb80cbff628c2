#pragma once

namespace accelmon {

// Set by CMake from project(VERSION ...).
inline constexpr const char* kVersion = ACCELMON_VERSION;

// The git revision the binary was built from: `git rev-parse --short HEAD`, with "-dirty" when
// the tree had uncommitted changes, "unknown" when built outside a git tree. Defined in a file
// generated at every build (daemon/common/git_revision.cmake), so that only it recompiles.
extern const char kRevision[];

}  // namespace accelmon
