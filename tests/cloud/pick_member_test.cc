#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cloud/cloud_pool.h"

namespace hengshi::cloud {
namespace {

std::map<int, int> tally(const std::vector<MemberSignal>& members, const std::string& balancer,
                         int rounds = 2000) {
  std::mt19937_64 rng(42);
  std::map<int, int> picks;
  for (int i = 0; i < rounds; ++i) ++picks[pick_member(members, balancer, rng)];
  return picks;
}

TEST(PickMember, P2cPrefersTheFasterMember) {
  std::vector<MemberSignal> members = {{0, 10, 5000.0}, {0, 10, 500.0}};
  auto picks = tally(members, "p2c");
  EXPECT_EQ(picks[1], 2000);  // with two members both are always compared
}

TEST(PickMember, P2cPrefersTheLessLoadedMember) {
  std::vector<MemberSignal> members = {{6, 10, 1000.0}, {0, 10, 1000.0}, {6, 10, 1000.0}};
  auto picks = tally(members, "p2c");
  // Member 1 wins every comparison it is part of: 2 of the 3 pairs.
  EXPECT_GT(picks[1], 1200);
  EXPECT_LT(picks[1], 1500);
}

TEST(PickMember, P2cWeighsLatencyTimesLoad) {
  // 1000 µs × (1+1) = 2000 beats 300 µs × (9+1) = 3000.
  std::vector<MemberSignal> members = {{1, 20, 1000.0}, {9, 20, 300.0}};
  EXPECT_EQ(tally(members, "p2c")[0], 2000);
}

TEST(PickMember, P2cGivesAnUnmeasuredMemberANeutralPrior) {
  // No latency yet: scored as the mean of the others, so its lower load wins.
  std::vector<MemberSignal> members = {{0, 10, 0.0}, {1, 10, 800.0}};
  EXPECT_EQ(tally(members, "p2c")[0], 2000);
  // And a busier unmeasured member loses to an idle measured one.
  members = {{3, 10, 0.0}, {0, 10, 800.0}};
  EXPECT_EQ(tally(members, "p2c")[1], 2000);
}

TEST(PickMember, SkipsMembersAtMaxConcurrent) {
  std::vector<MemberSignal> members = {{4, 4, 10.0}, {100, 200, 90000.0}, {2, 2, 10.0}};
  for (const char* balancer : {"p2c", "least_outstanding"}) {
    auto picks = tally(members, balancer);
    EXPECT_EQ(picks[1], 2000) << balancer;
  }
}

TEST(PickMember, MinusOneWhenEveryMemberIsFull) {
  std::vector<MemberSignal> members = {{4, 4, 10.0}, {1, 1, 10.0}};
  std::mt19937_64 rng(1);
  EXPECT_EQ(pick_member(members, "p2c", rng), -1);
  EXPECT_EQ(pick_member(members, "least_outstanding", rng), -1);
  EXPECT_EQ(pick_member({}, "p2c", rng), -1);
}

TEST(PickMember, LeastOutstandingPicksTheMinimum) {
  std::vector<MemberSignal> members = {{3, 10, 1.0}, {1, 10, 99999.0}, {2, 10, 1.0}};
  EXPECT_EQ(tally(members, "least_outstanding")[1], 2000);
}

TEST(PickMember, LeastOutstandingBreaksTiesAtRandom) {
  std::vector<MemberSignal> members = {{1, 10, 1.0}, {5, 10, 1.0}, {1, 10, 1.0}, {1, 10, 1.0}};
  auto picks = tally(members, "least_outstanding", 3000);
  EXPECT_EQ(picks[1], 0);
  for (int i : {0, 2, 3}) {
    EXPECT_GT(picks[i], 800) << i;
    EXPECT_LT(picks[i], 1200) << i;
  }
}

TEST(PickMember, SpreadsAcrossEqualMembers) {
  std::vector<MemberSignal> members(4, MemberSignal{0, 10, 100.0});
  auto picks = tally(members, "p2c", 4000);
  for (int i = 0; i < 4; ++i) EXPECT_GT(picks[i], 700) << i;
}

// A member whose breaker refuses a call (available = false) or that the caller avoids.
MemberSignal signal(double latency_us, bool available = true, bool avoided = false) {
  MemberSignal member;
  member.max_concurrent = 10;
  member.latency_ewma_us = latency_us;
  member.available = available;
  member.avoided = avoided;
  return member;
}

TEST(PickMember, SkipsMembersWhoseBreakerIsOpen) {
  // The open member is the fastest and least loaded, and still never chosen.
  std::vector<MemberSignal> members = {signal(9000.0), signal(1.0, false), signal(8000.0)};
  for (const char* balancer : {"p2c", "least_outstanding"}) {
    auto picks = tally(members, balancer);
    EXPECT_EQ(picks[1], 0) << balancer;
    EXPECT_EQ(picks[0] + picks[2], 2000) << balancer;
  }
}

TEST(PickMember, MinusOneWhenEveryMemberIsOpen) {
  std::vector<MemberSignal> members = {signal(10.0, false), signal(10.0, false)};
  std::mt19937_64 rng(1);
  EXPECT_EQ(pick_member(members, "p2c", rng), -1);
  EXPECT_EQ(pick_member(members, "least_outstanding", rng), -1);
}

TEST(PickMember, AvoidedMemberIsChosenOnlyWhenNoOtherIsEligible) {
  // The avoided member is the best by every score, and loses while another member is eligible.
  std::vector<MemberSignal> members = {signal(1.0, true, true), signal(5000.0), signal(9000.0)};
  for (const char* balancer : {"p2c", "least_outstanding"}) {
    EXPECT_EQ(tally(members, balancer)[0], 0) << balancer;
  }
  // The others open or full: the avoided member beats failing the call.
  members = {signal(1.0, true, true), signal(5000.0, false), {10, 10, 9000.0}};
  for (const char* balancer : {"p2c", "least_outstanding"}) {
    EXPECT_EQ(tally(members, balancer)[0], 2000) << balancer;
  }
  // Every member avoided: the usual choice among them.
  members = {signal(9000.0, true, true), signal(100.0, true, true)};
  EXPECT_EQ(tally(members, "p2c")[1], 2000);
  // Avoided and open: still never chosen.
  members = {signal(1.0, false, true)};
  std::mt19937_64 rng(3);
  EXPECT_EQ(pick_member(members, "p2c", rng), -1);
}

}  // namespace
}  // namespace hengshi::cloud
