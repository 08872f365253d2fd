// The dynamic split's queue (launcher/data_tasks.cpp): every split handed out once, faster ranks
// taking more, requests held until rank 0 opens the queue and while others finish the epoch, a
// checkpoint that waits for every rank's splits and gives all of them the same table, progress
// restored from a checkpoint, and malformed requests answered with an error.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "control/data_tasks.hpp"

namespace primus::launch {
namespace {

using nlohmann::json;

std::vector<json> to_json(const std::vector<DataMessage>& messages,
                          std::vector<std::uint32_t>* ranks = nullptr) {
  std::vector<json> out;
  for (const DataMessage& m : messages) {
    out.push_back(json::parse(m.line));
    if (ranks != nullptr) ranks->push_back(m.rank);
    EXPECT_EQ(out.back()["type"], "data");
  }
  return out;
}

std::string open_line(const std::vector<std::uint64_t>& sizes, const json& restored = nullptr) {
  return json({{"type", "data"},
               {"op", "open"},
               {"meta", {{"fingerprint", "f00d"}, {"split_records", 10}}},
               {"sizes", sizes},
               {"restored", restored}})
      .dump();
}

std::string next_line(std::uint64_t epoch, std::optional<std::uint64_t> finished = {}) {
  json message = {{"type", "data"}, {"op", "next"}, {"epoch", epoch}};
  message["finished"] = finished ? json(*finished) : json(nullptr);
  return message.dump();
}

TEST(DataTasks, RequestsWaitForTheQueueAndEverySplitGoesOutOnce) {
  DataTasks tasks(2);
  EXPECT_TRUE(tasks.receive(1, next_line(0)).empty()) << "rank 1 waits for rank 0's open";
  std::vector<std::uint32_t> ranks;
  const auto opened = to_json(tasks.receive(0, open_line({10, 10, 5})), &ranks);
  ASSERT_EQ(opened.size(), 1U);
  EXPECT_EQ(ranks, std::vector<std::uint32_t>{1});
  EXPECT_EQ(opened[0]["op"], "split");
  EXPECT_EQ(opened[0]["id"], 0);
  EXPECT_EQ(tasks.receive(0, open_line({1})).size(), 0U) << "a second open changes nothing";

  // Rank 0 is fast: it takes split 1, finishes it, takes split 2; rank 1 is still on split 0.
  auto reply = to_json(tasks.receive(0, next_line(0)));
  EXPECT_EQ(reply[0]["id"], 1);
  reply = to_json(tasks.receive(0, next_line(0, 1)));
  EXPECT_EQ(reply[0]["id"], 2);
  // Nothing left to hand out while rank 1 works: rank 0 waits.
  EXPECT_TRUE(tasks.receive(0, next_line(0, 2)).empty());
  // Rank 1 finishes split 0: the epoch is done for both.
  ranks.clear();
  reply = to_json(tasks.receive(1, next_line(0, 0)), &ranks);
  ASSERT_EQ(reply.size(), 2U);
  EXPECT_EQ(std::set<std::uint32_t>(ranks.begin(), ranks.end()), (std::set<std::uint32_t>{0, 1}));
  for (const json& r : reply) {
    EXPECT_EQ(r["op"], "epoch-done");
    EXPECT_EQ(r["epoch"], 0);
  }
  EXPECT_EQ(tasks.epoch(), 1U);
  EXPECT_EQ(tasks.records_by_rank().at(0), 15U);
  EXPECT_EQ(tasks.records_by_rank().at(1), 10U);
  // Epoch 1 starts over.
  reply = to_json(tasks.receive(1, next_line(1)));
  EXPECT_EQ(reply[0]["op"], "split");
  EXPECT_EQ(reply[0]["epoch"], 1);
  EXPECT_EQ(reply[0]["done"], 0);
}

TEST(DataTasks, ACheckpointWaitsForEveryRankAndPutsPartialSplitsBack) {
  DataTasks tasks(3);
  tasks.receive(0, open_line({10, 10, 10, 10}));
  tasks.receive(0, next_line(0));  // split 0
  tasks.receive(1, next_line(0));  // split 1
  tasks.receive(2, next_line(0));  // split 2
  std::vector<std::uint32_t> ranks;
  const auto orders = to_json(tasks.order_checkpoint(false), &ranks);
  ASSERT_EQ(orders.size(), 3U);
  EXPECT_EQ(orders[0]["op"], "checkpoint");
  EXPECT_EQ(orders[0]["step"], 1);
  EXPECT_EQ(orders[0]["stop"], false);
  EXPECT_TRUE(tasks.order_checkpoint(true).empty()) << "a stop upgrades the checkpoint under way";
  // A request meanwhile is dropped, and answered with the order (the rank may have connected
  // after it went out).
  const auto reordered = to_json(tasks.receive(1, next_line(0)));
  ASSERT_EQ(reordered.size(), 1U);
  EXPECT_EQ(reordered[0]["op"], "checkpoint");
  EXPECT_EQ(reordered[0]["stop"], true);
  const auto release = [](std::uint64_t step, const json& held) {
    return json({{"type", "data"}, {"op", "release"}, {"step", step}, {"held", held}}).dump();
  };
  EXPECT_EQ(to_json(tasks.receive(0, release(7, json::array())))[0]["op"], "error");
  EXPECT_TRUE(tasks.receive(0, release(1, {{0, 4}})).empty());
  EXPECT_TRUE(tasks.receive(1, release(1, {{1, 10}})).empty());
  // Rank 2 holds split 2 but claims split 3 too: ignored.
  const auto tables = to_json(tasks.receive(2, release(1, {{2, 0}, {3, 9}})));
  ASSERT_EQ(tables.size(), 3U);
  for (const json& table : tables) {
    EXPECT_EQ(table["op"], "table");
    EXPECT_EQ(table["step"], 1);
    EXPECT_EQ(table["stop"], true);
    EXPECT_EQ(table["cursor"]["done"], json({4, 10, 0, 0}));
    EXPECT_EQ(table["cursor"]["epoch"], 0);
    EXPECT_EQ(table["cursor"]["fingerprint"], "f00d");
  }
  EXPECT_FALSE(tasks.checkpointing());
  // After it, the partial split 0 goes out again with its progress.
  const auto again = to_json(tasks.receive(2, next_line(0)));
  EXPECT_EQ(again[0]["id"], 0);
  EXPECT_EQ(again[0]["done"], 4);
  EXPECT_EQ(to_json(tasks.order_checkpoint(false))[0]["step"], 2);
}

TEST(DataTasks, ProgressComesBackFromACheckpoint) {
  DataTasks tasks(2);
  tasks.receive(0, open_line({5, 5, 5}, {{"epoch", 3}, {"done", {5, 2, 0}}, {"step", 41}}));
  EXPECT_EQ(tasks.epoch(), 3U);
  EXPECT_EQ(tasks.last_step(), 41U);
  auto reply = to_json(tasks.receive(1, next_line(3)));
  EXPECT_EQ(reply[0]["id"], 1);
  EXPECT_EQ(reply[0]["done"], 2);
  reply = to_json(tasks.receive(0, next_line(3)));
  EXPECT_EQ(reply[0]["id"], 2);
  EXPECT_EQ(to_json(tasks.order_checkpoint(true))[0]["step"], 42);

  DataTasks bad(1);
  EXPECT_EQ(to_json(bad.receive(0, open_line({5}, {{"epoch", 0}, {"done", {6}}})))[0]["op"],
            "error");
  EXPECT_EQ(to_json(bad.receive(0, open_line({5, 5}, {{"epoch", 0}, {"done", {1}}})))[0]["op"],
            "error");
}

TEST(DataTasks, AGoneRankIsNotWaitedForAndBadRequestsAreErrors) {
  DataTasks tasks(2);
  EXPECT_EQ(to_json(tasks.receive(1, open_line({3})))[0]["op"], "error");
  EXPECT_TRUE(tasks.order_checkpoint(false).empty()) << "nothing to save before the queue opens";
  tasks.receive(0, open_line({3, 3}));
  tasks.receive(0, next_line(0));
  tasks.order_checkpoint(false);
  tasks.rank_gone(1);
  const auto table = to_json(tasks.receive(
      0, json({{"type", "data"}, {"op", "release"}, {"step", 1}, {"held", {{0, 3}}}}).dump()));
  ASSERT_EQ(table.size(), 1U);
  EXPECT_EQ(table[0]["cursor"]["done"], json({3, 0}));
  EXPECT_EQ(to_json(tasks.receive(0, "not json"))[0]["op"], "error");
  EXPECT_EQ(to_json(tasks.receive(0, R"({"type":"data","op":"steal"})"))[0]["op"], "error");
  EXPECT_EQ(to_json(tasks.receive(0, R"({"type":"data","op":"next"})"))[0]["op"], "error");
}

TEST(DataTasks, RanksLeaveTogetherAndACheckpointOrderedMeanwhileIncludesTheWaitingOnes) {
  DataTasks tasks(2);
  tasks.receive(0, open_line({4}));
  const std::string leave = R"({"type":"data","op":"leave"})";
  EXPECT_TRUE(tasks.receive(1, leave).empty()) << "rank 1 waits for rank 0";
  // Rank 0 asks for a checkpoint before it ends: rank 1, waiting to leave, must save too.
  std::vector<std::uint32_t> ranks;
  const auto orders = to_json(tasks.order_checkpoint(false), &ranks);
  EXPECT_EQ(ranks, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(orders[1]["op"], "checkpoint");
  // Asking to leave during the checkpoint: the order again.
  EXPECT_EQ(to_json(tasks.receive(1, leave))[0]["op"], "checkpoint");
  const auto release = [](std::uint32_t) {
    return json({{"type", "data"}, {"op", "release"}, {"step", 1}, {"held", json::array()}}).dump();
  };
  tasks.receive(0, release(0));
  EXPECT_EQ(to_json(tasks.receive(1, release(1))).size(), 2U) << "the table to both";
  EXPECT_TRUE(tasks.receive(1, leave).empty());
  ranks.clear();
  const auto left = to_json(tasks.receive(0, leave), &ranks);
  ASSERT_EQ(left.size(), 2U);
  EXPECT_EQ(left[0]["op"], "left");
  EXPECT_TRUE(tasks.closed());
  EXPECT_TRUE(tasks.order_checkpoint(true).empty()) << "no checkpoint after the end";
  EXPECT_EQ(to_json(tasks.receive(1, leave))[0]["op"], "left");

  DataTasks gone(2);
  gone.receive(0, open_line({4}));
  EXPECT_TRUE(gone.receive(0, leave).empty());
  EXPECT_EQ(to_json(gone.rank_gone(1))[0]["op"], "left") << "a rank that died is not waited for";
}

}  // namespace
}  // namespace primus::launch
