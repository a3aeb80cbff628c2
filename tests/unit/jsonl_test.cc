#include "recording/jsonl.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace accelmon::recording {
namespace jsonl_test {
namespace {

namespace pb = google::protobuf;
using pb::util::MessageDifferencer;

// Sets every field of `m`, recursively, to a value that is not its default: two elements in
// every repeated field and map, 0 nowhere, so a field the JSON mapping dropped or renamed shows.
// Reflection keeps it complete as the data model grows.
void FillEveryField(pb::Message* m, int depth) {
  const pb::Descriptor* d = m->GetDescriptor();
  const pb::Reflection* r = m->GetReflection();
  if (d->full_name() == "google.protobuf.Timestamp") {
    r->SetInt64(m, d->FindFieldByName("seconds"), 1764680000 + depth);
    r->SetInt32(m, d->FindFieldByName("nanos"), 123456789);
    return;
  }
  if (d->full_name() == "google.protobuf.Duration") {
    r->SetInt64(m, d->FindFieldByName("seconds"), 10);
    r->SetInt32(m, d->FindFieldByName("nanos"), 500000000);
    return;
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const int v = 7 + i + 3 * k;  // differs between fields and elements
      if (f->is_map()) {
        pb::Message* entry = r->AddMessage(m, f);
        const pb::Descriptor* ed = entry->GetDescriptor();
        entry->GetReflection()->SetString(entry, ed->FindFieldByName("key"),
                                          "key_" + std::to_string(k));
        const pb::FieldDescriptor* value = ed->FindFieldByName("value");
        if (value->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
          entry->GetReflection()->SetBool(entry, value, k == 0);
        } else {
          entry->GetReflection()->SetUInt64(entry, value, 18446744073709551615ULL - k);
        }
        continue;
      }
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
          if (depth > 6) break;
          pb::Message* sub = f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f);
          FillEveryField(sub, depth + 1);
          break;
        }
#define ACCELMON_FILL(CPPTYPE, Type, value) \
  case pb::FieldDescriptor::CPPTYPE:        \
    if (f->is_repeated()) {                 \
      r->Add##Type(m, f, value);            \
    } else {                                \
      r->Set##Type(m, f, value);            \
    }                                       \
    break;
          ACCELMON_FILL(CPPTYPE_INT32, Int32, -v)
          ACCELMON_FILL(CPPTYPE_INT64, Int64, -v * 1000000000000LL)
          ACCELMON_FILL(CPPTYPE_UINT32, UInt32, static_cast<uint32_t>(v))
          ACCELMON_FILL(CPPTYPE_UINT64, UInt64, 18446744073709551615ULL - static_cast<uint64_t>(v))
          ACCELMON_FILL(CPPTYPE_DOUBLE, Double, v + 0.1)
          ACCELMON_FILL(CPPTYPE_FLOAT, Float, static_cast<float>(v) + 0.5f)
          ACCELMON_FILL(CPPTYPE_BOOL, Bool, true)
          ACCELMON_FILL(CPPTYPE_STRING, String,
                        f->name() + " \"quoted\" \\ tab\t newline\n é " + std::to_string(k))
          ACCELMON_FILL(CPPTYPE_ENUM, EnumValue,
                        f->enum_type()->value(f->enum_type()->value_count() - 1)->number())
#undef ACCELMON_FILL
      }
    }
  }
}

v1::NodeReport FullReport() {
  v1::NodeReport report;
  FillEveryField(&report, 0);
  return report;
}

v1::NodeReport RoundTrip(const v1::NodeReport& in, std::string* line_out = nullptr) {
  JsonlWriter writer;
  const std::string line = writer.ToLine(in);
  if (line_out) *line_out = line;
  v1::NodeReport out;
  std::string error;
  EXPECT_TRUE(ParseJsonLine(line, &out, &error)) << error << "\n" << line;
  return out;
}

TEST(JsonlTest, FullyPopulatedReportRoundTrips) {
  const v1::NodeReport in = FullReport();
  // Spot checks that the filler reached the corners: maps, optionals, events, nested links.
  ASSERT_EQ(in.devices_size(), 2);
  ASSERT_EQ(in.devices(1).thermal().throttle_reasons_size(), 2);
  ASSERT_EQ(in.devices(0).links(1).errors_total_size(), 2);
  ASSERT_EQ(in.agent().push_rejected_total_size(), 2);
  ASSERT_TRUE(in.devices(0).memory().has_fragmentation_ratio());
  ASSERT_EQ(in.events_size(), 2);
  ASSERT_TRUE(in.events(1).has_code());

  std::string line;
  const v1::NodeReport out = RoundTrip(in, &line);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(in, out)) << diff;
  // Protobuf's JSON mapping: lowerCamelCase names, 64-bit integers as strings, enums by name,
  // RFC 3339 timestamps.
  EXPECT_NE(line.find("\"agentInstanceId\":"), std::string::npos) << line;
  EXPECT_NE(line.find("\"totalBytes\":\"18446744073709551608\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"kind\":\"EVENT_KIND_DEVICE_LOST\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"timestamp\":\"2025-12-02T12:53:21.123456789Z\""), std::string::npos)
      << line;
}

TEST(JsonlTest, AbsentFieldsStayAbsentAndPresentZerosStayPresent) {
  v1::NodeReport in;
  in.set_node("n1");
  in.mutable_timestamp()->set_seconds(1764680000);
  v1::DeviceTelemetry* d = in.add_devices();
  d->mutable_identity()->set_index(0);
  d->set_up(false);                        // present and false
  d->mutable_memory()->set_used_bytes(0);  // present and zero
  d->mutable_thermal()->set_core_celsius(0);

  std::string line;
  const v1::NodeReport out = RoundTrip(in, &line);
  EXPECT_TRUE(MessageDifferencer::Equals(in, out));
  const v1::DeviceTelemetry& o = out.devices(0);
  EXPECT_TRUE(o.has_up());
  EXPECT_FALSE(o.up());
  EXPECT_TRUE(o.memory().has_used_bytes());
  EXPECT_FALSE(o.memory().has_total_bytes());
  EXPECT_FALSE(o.memory().has_free_bytes());
  EXPECT_TRUE(o.thermal().has_core_celsius());
  EXPECT_FALSE(o.thermal().has_memory_celsius());
  EXPECT_FALSE(o.has_power());
  EXPECT_FALSE(out.has_host());
  EXPECT_FALSE(out.has_agent());
  // Absent fields are not printed at all (never as zeros or nulls).
  EXPECT_EQ(line.find("totalBytes"), std::string::npos) << line;
  EXPECT_EQ(line.find("null"), std::string::npos) << line;
  EXPECT_NE(line.find("\"usedBytes\":\"0\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"up\":false"), std::string::npos) << line;
}

TEST(JsonlTest, SameReportGivesSameBytesWhateverTheMapOrder) {
  v1::NodeReport a;
  v1::NodeReport b;
  for (const char* key : {"zeta", "alpha", "mid"})
    (*a.mutable_agent()->mutable_push_rejected_total())[key] = 1;
  for (const char* key : {"mid", "zeta", "alpha"})
    (*b.mutable_agent()->mutable_push_rejected_total())[key] = 1;
  JsonlWriter writer;
  const std::string line = writer.ToLine(a);
  EXPECT_EQ(line, writer.ToLine(b));
  EXPECT_LT(line.find("alpha"), line.find("mid"));
  EXPECT_LT(line.find("mid"), line.find("zeta"));
}

TEST(JsonlTest, WriterAppendsOneLineEach) {
  JsonlWriter writer;
  std::string out = "existing\n";
  v1::NodeReport r;
  r.set_node("a");
  writer.Append(r, &out);
  r.set_node("b");
  writer.Append(r, &out);
  EXPECT_EQ(out, "existing\n{\"node\":\"a\"}\n{\"node\":\"b\"}\n");
}

TEST(JsonlTest, AcceptsOriginalFieldNames) {
  v1::NodeReport r;
  std::string error;
  ASSERT_TRUE(ParseJsonLine(
      R"({"node":"n1","agent_instance_id":"x","host":{"memory":{"total_bytes":"5","freeBytes":6}}})",
      &r, &error))
      << error;
  EXPECT_EQ(r.agent_instance_id(), "x");
  EXPECT_EQ(r.host().memory().total_bytes(), 5u);
  EXPECT_EQ(r.host().memory().free_bytes(), 6u);
  EXPECT_FALSE(r.host().memory().has_available_bytes());
}

TEST(JsonlTest, ReaderReportsBadLinesWithFileAndLineAndGoesOn) {
  std::istringstream in(
      "{\"node\":\"a\",\"sequence\":\"1\"}\n"  // 1
      "{\"node\":\"b\",\n"                     // 2: truncated JSON
      "\n"                                     // 3: blank
      "   \t\r\n"                              // 4: blank (CRLF)
      "{\"node\":\"c\",\"colour\":\"red\"}\n"  // 5: unknown field
      "[1,2]\n"                                // 6: not an object
      "{\"node\":\"d\"}\r\n"                   // 7: CRLF
      "{\"node\":\"e\",\"sequence\":\"x\"}\n"  // 8: wrong type
      "{\"node\":\"f\"}");                     // 9: no final newline
  JsonlReader reader(in, "dump.jsonl");
  v1::NodeReport r;

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport);
  EXPECT_EQ(r.node(), "a");
  EXPECT_EQ(r.sequence(), 1u);
  EXPECT_EQ(reader.line_number(), 1u);
  EXPECT_EQ(reader.line_offset(), 0u);

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kBadLine);
  EXPECT_EQ(reader.line_number(), 2u);
  EXPECT_EQ(reader.line_offset(), 28u);
  EXPECT_EQ(reader.line_bytes(), 12u);
  EXPECT_TRUE(reader.error().starts_with("dump.jsonl:2: ")) << reader.error();
  EXPECT_EQ(reader.error(), "dump.jsonl:2: " + reader.reason());
  EXPECT_EQ(reader.error().find('\n'), std::string::npos) << reader.error();

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kBadLine);
  EXPECT_TRUE(reader.error().starts_with("dump.jsonl:5: ")) << reader.error();
  EXPECT_NE(reader.error().find("colour"), std::string::npos) << reader.error();

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kBadLine);
  EXPECT_TRUE(reader.error().starts_with("dump.jsonl:6: ")) << reader.error();

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport);
  EXPECT_EQ(r.node(), "d");
  EXPECT_EQ(reader.line_number(), 7u);

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kBadLine);
  EXPECT_TRUE(reader.error().starts_with("dump.jsonl:8: ")) << reader.error();

  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport);
  EXPECT_EQ(r.node(), "f");
  EXPECT_EQ(reader.line_number(), 9u);
  EXPECT_EQ(reader.Next(&r), JsonlReader::Result::kEnd);
  EXPECT_EQ(reader.Next(&r), JsonlReader::Result::kEnd);

  EXPECT_EQ(reader.reports(), 3u);
  EXPECT_EQ(reader.bad_lines(), 4u);
  EXPECT_EQ(reader.bytes_read(), in.str().size());
  EXPECT_FALSE(reader.read_failed());
}

TEST(JsonlTest, UnknownFieldsCanBeIgnored) {
  std::istringstream in("{\"node\":\"c\",\"colour\":\"red\"}\n");
  JsonlReader reader(in, "-", {.ignore_unknown_fields = true});
  v1::NodeReport r;
  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport) << reader.error();
  EXPECT_EQ(r.node(), "c");
}

TEST(JsonlTest, ReaderClearsTheReportBetweenLines) {
  std::istringstream in("{\"node\":\"a\",\"agentVersion\":\"1\"}\n{\"node\":\"b\"}\n");
  JsonlReader reader(in, "-");
  v1::NodeReport r;
  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport);
  ASSERT_EQ(reader.Next(&r), JsonlReader::Result::kReport);
  EXPECT_EQ(r.node(), "b");
  EXPECT_EQ(r.agent_version(), "");
}

TEST(JsonlTest, AWrittenFileReadsBackEveryReportUnchanged) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "jsonl_test_file.jsonl";
  JsonlWriter writer;
  std::string out;
  std::vector<v1::NodeReport> written;
  for (int i = 0; i < 100; ++i) {
    v1::NodeReport r = FullReport();
    r.set_sequence(static_cast<uint64_t>(i) + 1);
    writer.Append(r, &out);
    written.push_back(std::move(r));
  }
  std::ofstream(path, std::ios::binary) << out;

  JsonlReader reader(path.string());
  v1::NodeReport r;
  size_t n = 0;
  while (reader.Next(&r) == JsonlReader::Result::kReport) {
    ASSERT_LT(n, written.size());
    EXPECT_TRUE(MessageDifferencer::Equals(written[n], r)) << "line " << reader.line_number();
    ++n;
  }
  EXPECT_EQ(n, written.size());
  EXPECT_EQ(reader.bad_lines(), 0u);
  std::filesystem::remove(path);
}

TEST(JsonlTest, MissingFileThrowsWithPath) {
  try {
    JsonlReader reader("/nonexistent/dir/x.jsonl");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.jsonl"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace jsonl_test
}  // namespace accelmon::recording
