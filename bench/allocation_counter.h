// Counts every allocation through the global operator new of the binary it is linked into
// (allocation_counter.cc replaces it), for "allocations per scrape" in benchmarks.
#pragma once

#include <cstdint>

uint64_t AllocationCount();
