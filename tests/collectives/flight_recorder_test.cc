// The flight recorder's ring, its dump format and the report over synthetic records
// ([Note: flight recorder] in collectives/flight_recorder.h).
#include "collectives/flight_recorder.h"

#include <gtest/gtest.h>

#include <cstring>

namespace zs {
namespace {

FlightEntry entry(uint64_t seq, CollectiveKind kind, uint64_t bytes, bool done) {
  FlightEntry e;
  e.seq = seq;
  e.kind = kind;
  e.bytes = bytes;
  e.dtype = DType::kF32;
  e.start_s = 100.0 + static_cast<double>(seq);
  e.finish_s = done ? e.start_s + 0.5 : -1;
  return e;
}

RankFlight rank_with(int r, std::vector<FlightEntry> entries) {
  RankFlight f;
  f.rank = r;
  f.present = true;
  f.written_s = 109;
  f.entries = std::move(entries);
  return f;
}

TEST(FlightRecorder, RingKeepsTheLastEntriesInOrder) {
  FlightRecorder fr;
  const uint64_t v0 = fr.version();
  for (int i = 0; i < 70; ++i) {
    const uint64_t s =
        fr.begin(CollectiveKind::kAllReduce, 4 * static_cast<uint64_t>(i), DType::kF32);
    EXPECT_EQ(s, static_cast<uint64_t>(i + 1));
    if (i != 69) fr.finish(s);
  }
  EXPECT_NE(fr.version(), v0);
  const auto snap = fr.snapshot();
  ASSERT_EQ(snap.size(), FlightRecorder::kCapacity);
  EXPECT_EQ(snap.front().seq, 7u);
  EXPECT_EQ(snap.back().seq, 70u);
  EXPECT_TRUE(snap.back().in_flight());
  EXPECT_FALSE(snap.front().in_flight());
  fr.finish(3);  // left the ring: no effect
  EXPECT_EQ(fr.snapshot().front().seq, 7u);
}

TEST(FlightRecorder, TagIsRecordedAndSanitised) {
  FlightRecorder fr;
  set_flight_tag("unit \"3\" gather");
  fr.begin(CollectiveKind::kAllGather, 8, DType::kBF16);
  set_flight_tag(nullptr);
  fr.begin(CollectiveKind::kAllGather, 8, DType::kBF16);
  const auto snap = fr.snapshot();
  EXPECT_STREQ(snap[0].tag, "unit _3_ gather");
  EXPECT_STREQ(snap[1].tag, "");
}

TEST(FlightRecorder, JsonRoundTrips) {
  std::vector<FlightEntry> es = {entry(4, CollectiveKind::kBroadcast, 16, true),
                                 entry(5, CollectiveKind::kReduceScatter, 1024, false)};
  std::strcpy(es[1].tag, "unit 2 grad");
  const std::string text = flight_json(3, 4, 123.5, es);
  RankFlight f;
  ASSERT_TRUE(parse_flight_json(text, &f)) << text;
  EXPECT_EQ(f.rank, 3);
  EXPECT_DOUBLE_EQ(f.written_s, 123.5);
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[1].kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(f.entries[1].bytes, 1024u);
  EXPECT_TRUE(f.entries[1].in_flight());
  EXPECT_STREQ(f.entries[1].tag, "unit 2 grad");
  EXPECT_FALSE(parse_flight_json("{\"rank\": 1", &f));
  EXPECT_FALSE(parse_flight_json(text.substr(0, text.size() - 4), &f));
}

TEST(FlightRecorder, ReportNamesTheRankThatNeverArrived) {
  std::vector<RankFlight> ranks = {
      rank_with(0, {entry(1, CollectiveKind::kAllReduce, 32, true),
                    entry(2, CollectiveKind::kAllReduce, 32, false)}),
      rank_with(1, {entry(1, CollectiveKind::kAllReduce, 32, true)}),
  };
  ranks.push_back(RankFlight{});
  ranks.back().rank = 2;
  const std::string r = flight_report(ranks, 110);
  EXPECT_NE(r.find("rank 1 never arrived at seq 2 all_reduce 32 B fp32: its last collective is seq "
                   "1 all_reduce 32 B fp32, finished 8.5 s ago"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("rank 0: last completed seq 1 all_reduce 32 B fp32; in flight seq 2 all_reduce "
                   "32 B fp32 for 8.0 s"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("rank 2: no dump"), std::string::npos) << r;
  EXPECT_EQ(r.find("diverge"), std::string::npos) << r;
}

TEST(FlightRecorder, ReportNamesTheFirstDivergingSequenceNumber) {
  std::vector<RankFlight> ranks = {
      rank_with(0, {entry(7, CollectiveKind::kAllReduce, 32, true),
                    entry(8, CollectiveKind::kAllGather, 64, false)}),
      rank_with(1, {entry(6, CollectiveKind::kAllReduce, 32, true),
                    entry(7, CollectiveKind::kAllReduce, 32, true),
                    entry(8, CollectiveKind::kBroadcast, 64, false)}),
  };
  const std::string r = flight_report(ranks, 110);
  EXPECT_NE(r.find("ranks diverge at seq 8: rank 0 called seq 8 all_gather 64 B fp32, rank 1 "
                   "called seq 8 broadcast 64 B fp32"),
            std::string::npos)
      << r;
}

TEST(FlightRecorder, ReportWithNothingInFlight) {
  std::vector<RankFlight> ranks = {rank_with(0, {entry(1, CollectiveKind::kBarrier, 0, true)})};
  EXPECT_NE(flight_report(ranks, 110).find("no rank is in a collective"), std::string::npos);
}

}  // namespace
}  // namespace zs
