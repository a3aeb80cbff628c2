#include "recording/log_format.h"

#include <zlib.h>

namespace accelmon::recording {

uint32_t FragmentChecksum(FragmentType type, std::string_view data) {
  const auto type_byte = static_cast<unsigned char>(type);
  uLong crc = crc32_z(0, &type_byte, 1);
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(data.data()), data.size());
  const auto value = static_cast<uint32_t>(crc);
  // LevelDB's mask: rotate and add a constant, so the CRC of bytes that embed a CRC is not a CRC.
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

}  // namespace accelmon::recording
