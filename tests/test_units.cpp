// Unit parsing, the JSON reader's error reporting, and faulting in a buffer's pages.
#include "sim/base/json_reader.hpp"
#include "sim/base/page_faults.hpp"
#include "sim/base/units.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace sparsim;

TEST(Units, DurationsCarryTheirUnit)
{
  EXPECT_DOUBLE_EQ(*parse_duration("1.3us"), 1.3e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("2 ms"), 2e-3);
  EXPECT_DOUBLE_EQ(*parse_duration("0s"), 0.0);
  EXPECT_DOUBLE_EQ(*parse_duration("1e-3s"), 1e-3);
  EXPECT_FALSE(parse_duration("1.3"));      // no unit
  EXPECT_FALSE(parse_duration("1.3 usec")); // unknown unit
  EXPECT_FALSE(parse_duration("-1us"));     // negative
  EXPECT_FALSE(parse_duration("us"));       // no number
}

TEST(Units, BandwidthBytesAndBits)
{
  EXPECT_DOUBLE_EQ(*parse_bandwidth("5.25GBps"), 5.25e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("100Gbps"), 12.5e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1GiBps"), 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("10 MBps"), 1e7);
  EXPECT_FALSE(parse_bandwidth("10 Gbs")); // the typo issue 7 names
  EXPECT_FALSE(parse_bandwidth("10GB"));   // a size, not a rate
  EXPECT_FALSE(parse_bandwidth("0GBps"));  // zero bandwidth
}

TEST(Units, Bytes)
{
  EXPECT_EQ(*parse_bytes("8B"), 8u);
  EXPECT_EQ(*parse_bytes("4KiB"), 4096u);
  EXPECT_EQ(*parse_bytes("1.5MB"), 1500000u);
  EXPECT_FALSE(parse_bytes("0.5B")); // not a whole byte
}

TEST(JsonReader, ErrorsNameThePathValueAndExpectation)
{
  auto doc = nlohmann::json::parse(R"({"a": {"b": "fast", "c": 3}, "d": -1})");
  JsonReader root(doc, "");
  JsonReader a = root.object("a");
  try {
    a.get_bandwidth("b");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "a.b");
    EXPECT_EQ(e.value(), "\"fast\"");
    EXPECT_NE(e.expected().find("bandwidth"), std::string::npos);
  }
  EXPECT_THROW(root.get_int("d", std::nullopt, 0), ConfigError);
  try {
    root.get_int("d", std::nullopt, 0);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "d");
  }
}

TEST(JsonReader, UnknownKeysAreErrors)
{
  auto doc = nlohmann::json::parse(R"({"known": 1, "typo": 2})");
  JsonReader root(doc, "top");
  root.get_int("known");
  try {
    root.finish();
    FAIL() << "unknown key accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "top.typo");
  }
}

TEST(JsonReader, MissingFieldsAndWrongTypes)
{
  auto doc = nlohmann::json::parse(R"({"s": 5, "list": [{"x": 1}, {"x": "two"}]})");
  JsonReader root(doc, "");
  EXPECT_THROW(root.get_int("absent"), ConfigError);
  EXPECT_EQ(root.get_int("absent_with_default", 7), 7);
  EXPECT_THROW(root.get_string("s"), ConfigError);
  auto items = root.object_list("list");
  EXPECT_EQ(items[0].get_int("x"), 1);
  try {
    items[1].get_int("x");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "list[1].x");
  }
}

TEST(JsonReader, LogsFoldedPaths)
{
  auto log = std::make_shared<FieldLog>();
  auto doc = nlohmann::json::parse(R"({"list": [{"x": 1}, {"x": 2}]})");
  JsonReader root(doc, "", log);
  for (auto& item : root.object_list("list"))
    item.get_int("x");
  EXPECT_EQ(*log, (FieldLog{"list", "list[].x"}));
}

TEST(PageFaults, FaultingInMakesTheWholePagesResidentAndKeepsContents)
{
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // A fresh anonymous mapping: no page resident until written.
  const std::size_t pages = 64;
  auto* base = static_cast<unsigned char*>(
      mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  if (madvise(base, page, MADV_POPULATE_WRITE) != 0) {
    munmap(base, pages * page);
    GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE: fault_in does nothing here";
  }
  auto resident = [&] {
    std::vector<unsigned char> flags(pages);
    EXPECT_EQ(mincore(base, pages * page, flags.data()), 0);
    std::vector<int> which;
    for (std::size_t p = 0; p < pages; ++p)
      if (flags[p] & 1)
        which.push_back(static_cast<int>(p));
    return which;
  };
  EXPECT_EQ(resident(), std::vector<int>{0}); // the page the probe populated
  // A buffer from the middle of page 3 to the middle of page 40: only the whole pages 4..39 are made resident.
  fault_in(base + 3 * page + page / 2, 37 * page);
  std::vector<int> expected{0};
  for (int p = 4; p < 40; ++p)
    expected.push_back(p);
  EXPECT_EQ(resident(), expected);
  // Contents already there are kept.
  std::vector<std::uint32_t> data(1 << 20);
  std::iota(data.begin(), data.end(), 7u);
  fault_in(data.data() + 5, (data.size() - 10) * sizeof(std::uint32_t));
  for (std::size_t i = 0; i < data.size(); ++i)
    ASSERT_EQ(data[i], 7u + i);
  munmap(base, pages * page);
}
