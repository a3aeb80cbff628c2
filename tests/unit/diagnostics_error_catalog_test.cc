// The error catalogue (diagnostics/error_catalog.cc): well-formed, true to NVIDIA's resolution
// buckets, and the table docs/diagnostics.md shows is the code's.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "diagnostics/error_catalog.h"

namespace accelmon::diagnostics {
namespace diagnostics_error_catalog_test {
namespace {

TEST(ErrorCatalog, EveryEntryHasAKnownSeverityActionAndIsListedOnce) {
  std::set<std::pair<std::string, std::string>> classes;
  std::set<uint64_t> xids;
  for (const CatalogEntry& e : ErrorCatalog()) {
    SCOPED_TRACE(std::string(e.vendor) + " " + std::string(e.error_class) + " " +
                 std::to_string(e.code));
    EXPECT_TRUE(e.severity == "warning" || e.severity == "critical");
    EXPECT_TRUE(IsAction(e.action));
    EXPECT_FALSE(e.name.empty());
    EXPECT_FALSE(e.meaning.empty());
    EXPECT_FALSE(e.vendor_action.empty());
    EXPECT_EQ(e.name.find('|'), std::string_view::npos) << "breaks the docs' table";
    EXPECT_EQ(e.meaning.find('|'), std::string_view::npos) << "breaks the docs' table";
    if (e.error_class == kClassXid) {
      EXPECT_EQ(e.vendor, "nvidia");
      EXPECT_TRUE(xids.insert(e.code).second) << "XID listed twice";
      EXPECT_EQ(FindXid(e.code), &e);
    } else {
      EXPECT_TRUE(classes.emplace(e.vendor, e.error_class).second) << "class listed twice";
      EXPECT_EQ(FindErrorClass(e.vendor, e.error_class), &e);
    }
  }
  EXPECT_EQ(FindXid(9999), nullptr);
  EXPECT_EQ(FindErrorClass("sim", kClassEccUncorrected), nullptr);
}

TEST(ErrorCatalog, XidsFollowNvidiasImmediateActionBuckets) {
  // The plain buckets map to one severity and action each (WORKFLOW_* ones are read per XID).
  const std::map<std::string_view, std::pair<std::string_view, std::string_view>> kBuckets = {
      {"RESTART_APP", {"warning", kActionRestartApplication}},
      {"IGNORE", {"warning", kActionNone}},
      {"RESET_GPU", {"critical", kActionResetDevice}},
      {"RESTART_BM", {"critical", kActionRebootNode}},
      {"RESTART_VM", {"critical", kActionRebootNode}},
      {"CHECK_MECHANICALS", {"warning", kActionCheckHardware}},
      {"UPDATE_SWFW", {"warning", kActionUpdateSoftware}},
      {"CONTACT_SUPPORT", {"warning", kActionContactSupport}},
  };
  for (const CatalogEntry& e : ErrorCatalog()) {
    if (e.error_class != kClassXid) continue;
    const auto it = kBuckets.find(e.vendor_action);
    if (it == kBuckets.end()) continue;
    EXPECT_EQ(e.severity, it->second.first) << "XID " << e.code;
    EXPECT_EQ(e.action, it->second.second) << "XID " << e.code;
  }
  // The XIDs the old default `critical` list named, as the catalogue grades them.
  EXPECT_EQ(FindXid(48)->action, kActionResetDevice);
  EXPECT_EQ(FindXid(74)->action, kActionResetDevice);
  EXPECT_EQ(FindXid(79)->action, kActionRebootNode);
  EXPECT_EQ(FindXid(92)->action, kActionNone);
  EXPECT_EQ(FindXid(95)->action, kActionResetDevice);
  EXPECT_EQ(FindXid(119)->severity, "critical");
  EXPECT_EQ(FindXid(120)->severity, "critical");
  EXPECT_EQ(FindXid(140)->severity, "critical");
}

TEST(ErrorCatalog, DocsTableIsTheCodeTable) {
  std::ifstream in(ACCELMON_FIXTURES_DIR "/../../docs/diagnostics.md");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin = "<!-- error-catalog:begin -->\n";
  const std::string end = "<!-- error-catalog:end -->";
  const size_t from = doc.find(begin);
  const size_t to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(doc.substr(from + begin.size(), to - from - begin.size()), ErrorCatalogMarkdown())
      << "docs/diagnostics.md's error catalogue table must be ErrorCatalogMarkdown()'s";
}

}  // namespace
}  // namespace diagnostics_error_catalog_test
}  // namespace accelmon::diagnostics
