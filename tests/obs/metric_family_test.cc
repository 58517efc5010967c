#include "obs/metric_family.h"

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

}  // namespace
}  // namespace hengshi::obs
