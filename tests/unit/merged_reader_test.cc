#include "recording/merged_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "recording/jsonl.h"
#include "support/temp_dir.h"

namespace accelmon::recording {
namespace merged_reader_test {
namespace {

v1::NodeReport Report(const std::string& node, uint64_t sequence, int64_t second,
                      const std::string& instance = "") {
  v1::NodeReport r;
  r.set_node(node);
  r.set_agent_instance_id(instance.empty() ? "instance-" + node : instance);
  r.set_sequence(sequence);
  r.mutable_timestamp()->set_seconds(1'700'000'000 + second);
  return r;
}

class MergedReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("merged_reader_test"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A JSON Lines file of `reports`, plus `extra` lines as given.
  std::string Write(const std::string& name, const std::vector<v1::NodeReport>& reports,
                    const std::string& extra = "") {
    const std::string path = dir_ + "/" + name + ".jsonl";
    std::string text;
    JsonlWriter writer;
    for (const v1::NodeReport& r : reports) writer.Append(r, &text);
    std::ofstream(path, std::ios::binary) << text << extra;
    return path;
  }

  // "node/sequence" of every report, in the order read.
  static std::vector<std::string> ReadAll(MergedReader& reader) {
    std::vector<std::string> order;
    while (const v1::NodeReport* r = reader.Next()) {
      order.push_back(r->node() + "/" + std::to_string(r->sequence()));
    }
    return order;
  }

  std::string dir_;
};

TEST_F(MergedReaderTest, SeveralRecordingsComeOutInReportTimeOrder) {
  const std::string a = Write("a", {Report("n1", 1, 0), Report("n1", 2, 10), Report("n1", 3, 20)});
  const std::string b = Write("b", {Report("n2", 1, 5), Report("n2", 2, 15), Report("n2", 3, 25)});
  MergedReader reader({a, b});
  EXPECT_EQ(ReadAll(reader),
            (std::vector<std::string>{"n1/1", "n2/1", "n1/2", "n2/2", "n1/3", "n2/3"}));
  EXPECT_EQ(reader.reports(), 6u);
  EXPECT_EQ(reader.duplicates(), 0u);
  EXPECT_EQ(reader.summary().reports, 6u);
  EXPECT_EQ(reader.summary().segments.size(), 2u);
}

TEST_F(MergedReaderTest, ANodeThatMovedBetweenExportersIsReadOnceAcrossBoth) {
  // n1 streams to exporter a, moves to b at sequence 3; report 3 was in flight during the move
  // and both exporters applied it. Then it moves back to a at sequence 5.
  const std::string a = Write(
      "a", {Report("n1", 1, 0), Report("n1", 2, 10), Report("n1", 3, 20), Report("n1", 5, 40)});
  const std::string b = Write("b", {Report("n1", 3, 20), Report("n1", 4, 30)});
  MergedReader reader({a, b});
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n1/1", "n1/2", "n1/3", "n1/4", "n1/5"}));
  EXPECT_EQ(reader.duplicates(), 1u);
  EXPECT_EQ(reader.reports(), 6u) << "reports() counts what was read, duplicates included";
}

TEST_F(MergedReaderTest, AnAgentRestartStartsItsSequencesAgainAndIsNoDuplicate) {
  const std::string a = Write("a", {Report("n1", 7, 0, "old"), Report("n1", 8, 10, "old")});
  const std::string b = Write("b", {Report("n1", 1, 20, "new"), Report("n1", 2, 30, "new")});
  MergedReader reader({a, b});
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n1/7", "n1/8", "n1/1", "n1/2"}));
  EXPECT_EQ(reader.duplicates(), 0u);
}

TEST_F(MergedReaderTest, ReportsWithoutASequenceAreNeverDuplicates) {
  const std::string a = Write("a", {Report("n1", 0, 0)});
  const std::string b = Write("b", {Report("n1", 0, 0)});
  MergedReader reader({a, b});
  EXPECT_EQ(ReadAll(reader).size(), 2u);
  EXPECT_EQ(reader.duplicates(), 0u);
}

TEST_F(MergedReaderTest, OneInputIsReadAsItIsWithNothingSkipped) {
  // A single recording is its exporter's, deduplicated when it was written: read it whole, in
  // its own order, as RecordingReader does.
  const std::string a = Write("a", {Report("n1", 2, 10), Report("n1", 2, 10), Report("n1", 1, 0)});
  MergedReader reader({a});
  EXPECT_EQ(ReadAll(reader), (std::vector<std::string>{"n1/2", "n1/2", "n1/1"}));
  EXPECT_EQ(reader.duplicates(), 0u);
}

TEST_F(MergedReaderTest, DamageInAnyInputIsReportedWithItsFileAndTheRestIsRead) {
  const std::string a = Write("a", {Report("n1", 1, 0), Report("n1", 2, 10)});
  const std::string b = Write("b", {Report("n2", 1, 5)}, "{not json\n");
  MergedReader reader({a, b});
  EXPECT_EQ(ReadAll(reader).size(), 3u);
  ASSERT_EQ(reader.damage().size(), 1u);
  EXPECT_EQ(reader.damage()[0].file, b);
  EXPECT_EQ(reader.damage()[0].line, 2u);
  EXPECT_FALSE(reader.summary().clean());
  EXPECT_TRUE(reader.reader(0).summary().clean());
}

TEST_F(MergedReaderTest, AnInputThatCannotBeOpenedIsNamed) {
  const std::string a = Write("a", {Report("n1", 1, 0)});
  const std::string missing = dir_ + "/no-such-recording";
  try {
    MergedReader reader({a, missing});
    FAIL() << "opened a missing recording";
  } catch (const RecordingError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace merged_reader_test
}  // namespace accelmon::recording
