// A value derived from the data model's buddyinfo zone, not measured: the exporter renders it
// (accelmon_host_memory_unusable_free_ratio) from the raw counts the buddyinfo collector sends.
#pragma once

#include <optional>

#include "accelmon/v1/telemetry.pb.h"

namespace accelmon {

// The unusable free space index F_u(order) of Gorman & Whitcroft, "The What, the Why and the Where
// To of Anti-Fragmentation" (2006): the share of the zone's free pages that sit in blocks smaller
// than 2^order pages and so cannot serve an allocation of that order. 0 = every free page could,
// 1 = none could. nullopt when the zone has no free pages or `order` is beyond its orders.
std::optional<double> UnusableFreeIndex(const v1::BuddyZone& zone, unsigned order);

}  // namespace accelmon
