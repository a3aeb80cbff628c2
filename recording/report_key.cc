#include "recording/report_key.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>

#include "proto/time_format.h"

namespace accelmon::recording {

using google::protobuf::internal::WireFormatLite;

bool ParseReportKey(std::string_view wire, ReportKey* key) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if ((field == 1 || field == 2) && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::ReadString(&in, field == 1 ? &key->node : &key->agent_instance_id)) {
        return false;
      }
    } else if (field == 3 && type == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&key->sequence)) return false;
    } else if (field == 4 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      google::protobuf::Timestamp ts;
      if (!WireFormatLite::ReadMessage(&in, &ts)) return false;
      key->time_ns = ToNanos(ts);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

void AdvanceWatermark(Watermarks& watermarks, const ReportKey& key) {
  auto it = watermarks.find(key.node);
  if (it == watermarks.end()) {
    watermarks.emplace(key.node, Watermark{key.agent_instance_id, key.sequence});
  } else if (it->second.agent_instance_id != key.agent_instance_id) {
    it->second = Watermark{key.agent_instance_id, key.sequence};
  } else {
    it->second.sequence = std::max(it->second.sequence, key.sequence);
  }
}

}  // namespace accelmon::recording
