#include "obs/metric_family.h"

#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace hengshi::obs {
namespace {

double series(const std::string& name, const Labels& labels) {
  for (const auto& sample : Registry::global().values(name)) {
    if (sample.labels == labels) return sample.value;
  }
  return -1;
}

TEST(MetricFamilyTest, OneSeriesPerCombinationInTheRegistry) {
  CounterFamily family("hengshi_test_family_total", "test", {"route", "status"});
  Counter& first = family.at({"edge", "200"});
  EXPECT_EQ(&first, &family.at({"edge", "200"}));  // resolved once, then reused
  first.inc();
  family.at({"edge", "200"}).inc(2);
  family.at({"cloud", "200"}).inc();
  EXPECT_EQ(series("hengshi_test_family_total", {{"route", "edge"}, {"status", "200"}}), 3.0);
  EXPECT_EQ(series("hengshi_test_family_total", {{"route", "cloud"}, {"status", "200"}}), 1.0);
  // The same series as a direct registry lookup: the family is a cache, not a second record.
  EXPECT_EQ(&first, &Registry::global().counter("hengshi_test_family_total", "test",
                                               {{"route", "edge"}, {"status", "200"}}));
}

TEST(MetricFamilyTest, ValuesThatShareBytesAcrossLabelsStayApart) {
  CounterFamily family("hengshi_test_family_split_total", "test", {"a", "b"});
  family.at({std::string_view("x\x1fy", 3), "z"}).inc();
  family.at({"x", std::string_view("y\x1fz", 3)}).inc(5);
  EXPECT_EQ(series("hengshi_test_family_split_total", {{"a", "x\x1fy"}, {"b", "z"}}), 1.0);
  EXPECT_EQ(series("hengshi_test_family_split_total", {{"a", "x"}, {"b", "y\x1fz"}}), 5.0);
}

TEST(MetricFamilyTest, HistogramsAndAWrongLabelCount) {
  HistogramFamily family("hengshi_test_family_seconds", "test", {"route"});
  family.at({"edge"}).observe(0.01);
  EXPECT_EQ(family.at({"edge"}).count(), 1u);
  EXPECT_THROW(family.at({"edge", "extra"}), std::logic_error);
}

// Each thread remembers recent resolutions by family id; these pin that the memory never hands
// one family's series to another, whatever the slots hold.
TEST(MetricFamilyTest, RememberedResolutionsNeverCrossFamilies) {
  CounterFamily a("hengshi_test_family_a_total", "test", {"route"});
  CounterFamily b("hengshi_test_family_b_total", "test", {"route"});
  for (int i = 0; i < 3; ++i) {
    a.at({"edge"}).inc();
    b.at({"edge"}).inc(10);
  }
  EXPECT_EQ(series("hengshi_test_family_a_total", {{"route", "edge"}}), 3.0);
  EXPECT_EQ(series("hengshi_test_family_b_total", {{"route", "edge"}}), 30.0);
  // A family made where an earlier one lived (same address, same label values) is its own.
  std::optional<CounterFamily> reused;
  reused.emplace("hengshi_test_family_old_total", "test", std::vector<std::string>{"route"});
  reused->at({"edge"}).inc();
  reused.emplace("hengshi_test_family_new_total", "test", std::vector<std::string>{"route"});
  reused->at({"edge"}).inc(2);
  EXPECT_EQ(series("hengshi_test_family_old_total", {{"route", "edge"}}), 1.0);
  EXPECT_EQ(series("hengshi_test_family_new_total", {{"route", "edge"}}), 2.0);
}

TEST(MetricFamilyTest, MoreCombinationsThanRememberedSlotsAndOtherThreads) {
  CounterFamily family("hengshi_test_family_many_total", "test", {"n"});
  for (int round = 0; round < 2; ++round) {
    for (int n = 0; n < 300; ++n) family.at({std::to_string(n)}).inc(n);
  }
  std::thread other([&family] { family.at({"7"}).inc(1000); });
  other.join();
  EXPECT_EQ(series("hengshi_test_family_many_total", {{"n", "299"}}), 598.0);
  EXPECT_EQ(series("hengshi_test_family_many_total", {{"n", "7"}}), 1014.0);
  EXPECT_EQ(&family.at({"7"}), &Registry::global().counter("hengshi_test_family_many_total", "test", {{"n", "7"}}));
}

// The remembered key is compared in words, not bytewise: values of every length up to past two
// words, differing in one byte at the start, the middle or the end, are each their own series.
TEST(MetricFamilyTest, ValuesDifferingInOneByteAnywhereStayApart) {
  CounterFamily family("hengshi_test_family_bytes_total", "test", {"v"});
  for (std::size_t length = 1; length <= 40; ++length) {
    const std::string base(length, 'a');
    const std::set<std::size_t> positions = {0, length / 2, length - 1};
    for (std::size_t at : positions) {
      std::string other = base;
      other[at] = 'b';
      for (int round = 0; round < 2; ++round) {  // the second round reads the remembered slots
        family.at({base}).inc();
        family.at({other}).inc(100);
      }
      ASSERT_EQ(series("hengshi_test_family_bytes_total", {{"v", other}}), 200.0)
          << length << " " << at;
    }
    ASSERT_EQ(series("hengshi_test_family_bytes_total", {{"v", base}}),
              2.0 * static_cast<double>(positions.size()))
        << length;
  }
}

// A combination too long to remember inline is resolved under the lock each time, to the same
// series.
TEST(MetricFamilyTest, ALongCombinationResolvesEveryTime) {
  CounterFamily family("hengshi_test_family_long_total", "test", {"a", "b"});
  const std::string long_value(200, 'x');
  Counter& first = family.at({long_value, "y"});
  for (int i = 0; i < 3; ++i) family.at({long_value, "y"}).inc();
  EXPECT_EQ(&first, &family.at({long_value, "y"}));
  EXPECT_EQ(series("hengshi_test_family_long_total", {{"a", long_value}, {"b", "y"}}), 3.0);
  family.at({long_value, "z"}).inc(7);  // differs past the remembered part's length
  EXPECT_EQ(series("hengshi_test_family_long_total", {{"a", long_value}, {"b", "z"}}), 7.0);
}

}  // namespace
}  // namespace hengshi::obs
