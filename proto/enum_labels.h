// The label values of the schema's enums, one spelling for every reader: the metrics renderer,
// the status page and the diagnostics rules' findings ("sram" in "(in sram)" is the `location`
// label of the series it points at). In accelmon_proto for the reason time_format.h gives:
// diagnostics/ cannot link the exporter.
#pragma once

#include <string_view>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

// The `kind` label of a holder ("pod", "slurm", "process"; "" when unspecified) and of a link
// ("nvlink", "pcie", ...; "unknown" when unspecified).
std::string_view HolderKindLabel(v1::HolderKind kind);
std::string_view LinkKindLabel(v1::LinkKind kind);
// The `location` label of ECC counts by memory location ("dram", "sram", ...; "unknown" when
// unspecified).
std::string_view MemoryLocationLabel(v1::MemoryLocation location);
// The `state` of an NCCL rank ("ok", "missing", "unresponsive", "dead", "error"; "unknown" when
// unspecified).
std::string_view RankStateLabel(v1::RankState state);

}  // namespace accelmon
