// Unit parsing, the JSON reader's error reporting, and faulting in a buffer's pages (and its huge pages).
#include "sim/base/json_reader.hpp"
#include "sim/base/page_faults.hpp"
#include "sim/base/units.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
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

namespace {

// The flags (VmFlags of /proc/self/smaps, e.g. "rd wr mr mw me ac hg") and bounds of the mapping holding `address`.
struct Mapping {
  std::uintptr_t begin = 0, end = 0;
  std::string flags;
};

Mapping mapping_holding(const void* address)
{
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  Mapping current;
  bool holding = false;
  for (std::string line; std::getline(smaps, line);) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space && line.find(':') > space) {
      current.begin = std::stoull(line.substr(0, dash), nullptr, 16);
      current.end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      holding = current.begin <= a && a < current.end;
    } else if (holding && line.starts_with("VmFlags:")) {
      current.flags = line.substr(8) + " ";
      return current;
    }
  }
  return {};
}

bool advised_huge(const Mapping& m) { return m.flags.find(" hg ") != std::string::npos; }

} // namespace

TEST(PageFaults, TheTwoMegabyteBlocksInsideALargeBufferAreAdvisedToBeHugePages)
{
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t bytes = 8 * kHuge;
  auto* base =
      static_cast<unsigned char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  if (madvise(base, sysconf(_SC_PAGESIZE), MADV_HUGEPAGE) != 0 ||
      madvise(base, sysconf(_SC_PAGESIZE), MADV_NOHUGEPAGE) != 0) {
    munmap(base, bytes);
    GTEST_SKIP() << "this kernel has no transparent huge pages: fault_in uses 4 KiB pages";
  }
  const auto at = [&](std::size_t offset) { return reinterpret_cast<std::uintptr_t>(base) + offset; };
  // A buffer from 1000 bytes past the mapping's start to 1000 bytes before its end: the whole 2 MiB blocks inside
  // it (6 or 7 of the 8) are advised, the pages before and after them are not.
  fault_in(base + 1000, bytes - 2000);
  const std::uintptr_t first_block = (at(1000) + kHuge - 1) / kHuge * kHuge;
  const std::uintptr_t last_block_end = at(bytes - 1000) / kHuge * kHuge;
  const Mapping inside = mapping_holding(reinterpret_cast<void*>(first_block));
  EXPECT_TRUE(advised_huge(inside)) << inside.flags;
  EXPECT_EQ(inside.begin, first_block);
  EXPECT_EQ(inside.end, last_block_end);
  if (first_block > at(0)) {
    EXPECT_FALSE(advised_huge(mapping_holding(base)));
  }
  if (last_block_end < at(bytes)) {
    EXPECT_FALSE(advised_huge(mapping_holding(base + bytes - 1)));
  }
  munmap(base, bytes);

  // A buffer with a single whole 2 MiB block inside is left to 4 KiB pages (not worth splitting its mapping).
  auto* small =
      static_cast<unsigned char*>(mmap(nullptr, 3 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(small, MAP_FAILED);
  const std::uintptr_t small_block = (reinterpret_cast<std::uintptr_t>(small) + kHuge - 1) / kHuge * kHuge;
  fault_in(small, small_block + kHuge + 4096 - reinterpret_cast<std::uintptr_t>(small));
  EXPECT_FALSE(advised_huge(mapping_holding(reinterpret_cast<void*>(small_block))));
  munmap(small, 3 * kHuge);
}
