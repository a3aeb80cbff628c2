// PCIe link rates and usable bandwidth by generation: the one table the NVML collector (which
// reports a generation) and the amdgpu collector (which reads a rate in GT/s) both use.
//
// Usable bandwidth per lane and direction = transfer rate x line-code efficiency / 8:
//   gen  rate       encoding                                   per lane     x16
//   1     2.5 GT/s  8b/10b                                      250 MB/s     4 GB/s
//   2     5   GT/s  8b/10b                                      500 MB/s     8 GB/s
//   3     8   GT/s  128b/130b                                   984.6 MB/s  15.75 GB/s
//   4    16   GT/s  128b/130b                                   1.969 GB/s  31.51 GB/s
//   5    32   GT/s  128b/130b                                   3.938 GB/s  63.02 GB/s
//   6    64   GT/s  PAM4, FLIT mode: no line code (1b/1b); of   7.5625 GB/s 121 GB/s
//                   each 256-byte FLIT 242 bytes carry TLPs and DLLPs, the rest is FEC and CRC
// Not counted: TLP headers and DLLP traffic, which depend on the payload size. Gen6 is not
// 64 GT/s x 128b/130b (7.877 GB/s per lane): FLIT mode drops 128b/130b.
#pragma once

#include <cstdint>
#include <optional>

namespace accelmon::collectors {

// The per-lane transfer rate of `generation` in GT/s (1 -> 2.5 ... 6 -> 64), or nullopt.
std::optional<double> PcieLaneGts(uint32_t generation);

// The generation of a per-lane rate in GT/s (2.5 -> 1 ... 64 -> 6), or nullopt for a rate
// that is none of them.
std::optional<uint32_t> PcieGeneration(double gts);

// Usable bytes per second of one lane of `generation`, one direction, or nullopt.
std::optional<double> PcieLaneBytesPerSecond(uint32_t generation);

// One direction's capacity of a link of `generation` and `width` lanes, or nullopt for an
// unknown generation or a width of 0 (an untrained link).
std::optional<double> PcieMaxBytesPerSecond(uint32_t generation, uint32_t width);

}  // namespace accelmon::collectors
