// ParseRasStatus over NCCL RAS's JSON as NCCL prints it (tests/fixtures/nccl_ras): which ranks a
// node reports, their state and counts, NCCL 2.28.9's missing comma, and what is refused.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "collectors/nccl_ras.h"

namespace accelmon {
namespace nccl_ras_parse_test {
namespace {

using collectors::ParseRasStatus;
using collectors::RasAnswerError;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(ACCELMON_FIXTURES_DIR) + "/nccl_ras/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

google::protobuf::RepeatedPtrField<v1::Communicator> Parse(const std::string& json,
                                                           const std::string& local_host) {
  google::protobuf::RepeatedPtrField<v1::Communicator> out;
  ParseRasStatus(
      json, [&](std::string_view host) { return host == local_host; }, "localhost:28028", out);
  return out;
}

TEST(NcclRasParse, AHealthyCommunicatorKeepsOnlyThisNodesRanks) {
  const auto comms = Parse(Fixture("healthy_4_ranks_2_nodes.json"), "10.0.0.2");
  ASSERT_EQ(comms.size(), 1);
  const v1::Communicator& c = comms[0];
  EXPECT_EQ(c.hash(), "0x9e17999afaa87dbb");
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c.ranks_reporting(), 4u);
  EXPECT_FALSE(c.partial());
  EXPECT_EQ(c.nccl_version(), "2.29.2");
  ASSERT_EQ(c.ranks_size(), 2);
  EXPECT_EQ(c.ranks(0).rank(), 2u);
  EXPECT_EQ(c.ranks(0).device(), 0u);
  EXPECT_EQ(c.ranks(0).pid(), 2001u);
  EXPECT_EQ(c.ranks(1).rank(), 3u);
  EXPECT_EQ(c.ranks(1).device(), 1u);
  // 1 Broadcast + 12 AllGather + 1520 AllReduce.
  EXPECT_EQ(c.ranks(0).collectives(), 1533u);
  EXPECT_EQ(c.ranks(0).collectives_by_kind().at("AllReduce"), 1520u);
  EXPECT_EQ(c.collectives_max(), 1533u);
}

TEST(NcclRasParse, ACommunicatorWithNoRankHereIsLeftToItsNodes) {
  EXPECT_EQ(Parse(Fixture("healthy_4_ranks_2_nodes.json"), "10.0.0.9").size(), 0);
}

TEST(NcclRasParse, TheLaggingAndTheUnresponsiveRankAreKeptFromAnotherNode) {
  for (const char* file : {"unresponsive_and_lagging.json", "missing_comma_2_28_9.json"}) {
    SCOPED_TRACE(file);
    const auto comms = Parse(Fixture(file), "10.0.0.1");
    ASSERT_EQ(comms.size(), 1);
    const v1::Communicator& c = comms[0];
    EXPECT_EQ(c.missing_ranks(), 1u);
    EXPECT_TRUE(c.partial()) << "RAS timed out on a peer";
    ASSERT_EQ(c.ranks_size(), 4) << "ranks 0, 1 here; 2 behind; 3 unresponsive";
    EXPECT_TRUE(c.ranks(0).local());
    EXPECT_FALSE(c.ranks(2).local());
    EXPECT_EQ(c.ranks(2).host(), "10.0.0.2");
    EXPECT_EQ(c.ranks(2).collectives() + 1, c.collectives_max());
    EXPECT_EQ(c.ranks(3).state(), v1::RANK_STATE_UNRESPONSIVE);
    EXPECT_FALSE(c.ranks(3).has_collectives());
  }
}

TEST(NcclRasParse, UnknownFieldsOfANewerNcclAreIgnored) {
  std::string json = Fixture("healthy_4_ranks_2_nodes.json");
  json.insert(json.find("\"communicators_count\""), "\"future_field\": {\"x\": [1, 2]},\n  ");
  EXPECT_EQ(Parse(json, "10.0.0.1").size(), 1);
}

TEST(NcclRasParse, WhatIsNotRasJsonIsRefusedWithTheReason) {
  const std::string json = Fixture("healthy_4_ranks_2_nodes.json");
  const auto reason = [&](const std::string& text) {
    try {
      Parse(text, "10.0.0.1");
    } catch (const RasAnswerError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(reason(json.substr(0, json.size() / 2)).find("ended mid-document"), std::string::npos);
  EXPECT_NE(reason("Communicators... (text output)").find("not a JSON document"),
            std::string::npos);
  EXPECT_NE(reason("{\"communicators\": 3}").find("not RAS's JSON"), std::string::npos);
}

}  // namespace
}  // namespace nccl_ras_parse_test
}  // namespace accelmon
