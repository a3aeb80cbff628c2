// The benchmarks' unit of telemetry: a "value" is one numeric field set in a report. Shared by
// recording_bench (read and write rates) and diagnose_bench (offline diagnosis rates), so their
// values/s compare.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <vector>

namespace accelmon::bench {

// Numeric fields set in `m` (integers, floating point, bools; every element of repeated fields
// and maps), not counting the identity and time stamps that say what the values are about.
inline uint64_t CountValues(const google::protobuf::Message& m) {
  namespace pb = google::protobuf;
  const pb::Descriptor* d = m.GetDescriptor();
  if (d->full_name() == "google.protobuf.Timestamp" ||
      d->full_name() == "google.protobuf.Duration" ||
      d->full_name() == "accelmon.v1.DeviceIdentity") {
    return 0;
  }
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  uint64_t n = 0;
  for (const pb::FieldDescriptor* f : fields) {
    if (d->full_name() == "accelmon.v1.NodeReport" && f->name() == "sequence") continue;
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        if (f->is_repeated()) {
          for (int i = 0; i < r->FieldSize(m, f); ++i)
            n += CountValues(r->GetRepeatedMessage(m, f, i));
        } else {
          n += CountValues(r->GetMessage(m, f));
        }
        break;
      case pb::FieldDescriptor::CPPTYPE_STRING:
      case pb::FieldDescriptor::CPPTYPE_ENUM:
        break;
      default:
        n += f->is_repeated() ? static_cast<uint64_t>(r->FieldSize(m, f)) : 1;
    }
  }
  return n;
}

}  // namespace accelmon::bench
