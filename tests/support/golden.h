// Golden exposition files: what /metrics shows for a report, pinned in tests/golden/.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon::testing {

// The metric families of `report` whose names start with `prefix`, rendered and serialised
// exactly as /metrics does.
std::string RenderFamilies(std::shared_ptr<const v1::NodeReport> report, std::string_view prefix);

// Compares `actual` with tests/golden/<relative_path>. With ACCELMON_UPDATE_GOLDEN set in the
// environment it rewrites the file instead (review the diff before committing it).
::testing::AssertionResult MatchesGolden(const std::string& actual,
                                         const std::string& relative_path);

}  // namespace accelmon::testing
