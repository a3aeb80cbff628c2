// What a fleet view needs of a node's report (the Query API's GetSummary, `accelmon top`): a
// report trimmed to the fields `top` shows, so that a view over thousands of nodes and several
// exporters fetches a few percent of the full reports' bytes. The list is in
// proto/accelmon/v1/diagnostics.proto (GetSummaryResponse) and the unit test checks that `top`
// builds the same view from the trimmed report as from the full one.
#pragma once

#include "accelmon/v1/diagnostics.pb.h"
#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

// `out` becomes `report` with only the summary's fields; absent fields stay absent.
void SummarizeReport(const v1::NodeReport& report, v1::NodeReport* out);

// `out` becomes `finding` without its evidence.
void SummarizeFinding(const v1::Finding& finding, v1::Finding* out);

}  // namespace accelmon
