// The dynamic split (--primus-data-mode=dynamic; docs/architecture.md "Data distribution"): the
// launcher's queue of splits, handed out to the ranks that ask, so that faster ranks take more.
// Pure: messages in (the "data" lines of the control channel), messages out.
//
// The ranks cut the dataset into splits themselves (the same cut on every rank); the launcher
// only counts: each split's size and how many of its records are done in the current epoch.
// Rank 0 opens the queue (the sizes, what a cursor must match, and the restored progress of a
// checkpoint); requests that come before are held. A rank asks for the next split of an epoch
// (reporting the one it finished); it gets one, or "epoch-done" once every split of the epoch
// is done. A rank whose epoch has no split left to hand out while others still work on theirs
// waits (a split given back at a checkpoint may come to it).
// Checkpoints: the launcher orders one (a rank asked, or a stop signal reached a rank), naming
// its step; every rank gives back the splits it holds with their progress ("release"), and once
// all have, every rank gets the table (the cursor to save) and the splits go back in the queue.
// A stop is such a checkpoint after which the ranks exit.
// The end: a checkpoint's save is collective, so no rank may leave while another could still
// order one. A rank at the end of its last epoch asks to leave and waits; when every rank has,
// all get "left" and no checkpoint is taken any more. A checkpoint ordered meanwhile goes to
// the waiting ranks too (they save, then ask again).
//
// Ranks send {"type": "data", "op": ...}:
//   open     {"meta": {...}, "sizes": [n, ...], "restored": {"epoch", "done": [...], "step"}|null}
//   next     {"epoch": e, "finished": id|null}
//   release  {"step": S, "held": [[id, done], ...]}
//   checkpoint (a request, no fields)
//   leave    (at the end of the last epoch)
// The launcher sends {"type": "data", "op": ...}:
//   split       {"epoch": e, "id": i, "done": d}
//   epoch-done  {"epoch": e}
//   checkpoint  {"step": S, "stop": bool}
//   table       {"step": S, "stop": bool, "cursor": {meta..., "epoch", "done", "step"}}
//   left        (every rank is at its end: exit)
//   error       {"message": ...}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace primus::launch {

struct DataMessage {
  std::uint32_t rank = 0;
  std::string line;  // one JSON object, without its newline
};

class DataTasks {
 public:
  explicit DataTasks(std::uint32_t world_size) : world_size_(world_size) {}

  // A "data" line from `rank`; returns what to send.
  std::vector<DataMessage> receive(std::uint32_t rank, const std::string& line);
  // A checkpoint at the next step boundaries of every rank (stop: then exit). Nothing to send
  // before the queue is open, or when one is already under way (a stop then upgrades it).
  std::vector<DataMessage> order_checkpoint(bool stop);
  // A rank that ended: it is not waited for at a checkpoint.
  std::vector<DataMessage> rank_gone(std::uint32_t rank);

  bool open() const { return opened_; }
  std::uint64_t epoch() const { return epoch_; }
  bool checkpointing() const { return checkpoint_step_.has_value(); }
  bool closed() const { return closed_; }
  std::uint64_t last_step() const { return last_step_; }
  // Records done per rank in this attempt (for the tests and the status).
  const std::map<std::uint32_t, std::uint64_t>& records_by_rank() const { return by_rank_; }

 private:
  std::vector<DataMessage> handle_open(std::uint32_t rank, const std::string& line);
  std::vector<DataMessage> handle_next(std::uint32_t rank, std::uint64_t epoch,
                                       std::optional<std::uint64_t> finished);
  std::vector<DataMessage> handle_release(std::uint32_t rank, const std::string& line);
  void finish(std::uint32_t rank, std::uint64_t id);
  // Answers held requests that can be answered now.
  std::vector<DataMessage> serve_waiting();
  std::optional<DataMessage> answer(std::uint32_t rank, std::uint64_t epoch);
  bool epoch_complete() const;
  std::vector<DataMessage> finish_checkpoint();
  std::vector<DataMessage> handle_leave(std::uint32_t rank);
  // Everyone left when every rank still here asked to.
  std::vector<DataMessage> maybe_close();
  DataMessage error(std::uint32_t rank, const std::string& message) const;

  std::uint32_t world_size_;
  bool opened_ = false;
  std::string meta_;  // rank 0's description, as JSON text
  std::vector<std::uint64_t> sizes_;
  std::vector<std::uint64_t> done_;
  std::vector<std::int64_t> holder_;  // the rank holding each split, -1 for none
  std::uint64_t epoch_ = 0;
  std::uint64_t last_step_ = 0;
  std::map<std::uint32_t, std::uint64_t> waiting_;  // rank -> the epoch it asked for
  std::set<std::uint32_t> gone_;
  std::set<std::uint32_t> leaving_;
  bool closed_ = false;
  std::optional<std::uint64_t> checkpoint_step_;
  bool checkpoint_stop_ = false;
  std::set<std::uint32_t> released_;
  std::map<std::uint32_t, std::uint64_t> by_rank_;
};

// The answer to a data message in static mode.
std::string data_mode_error();

}  // namespace primus::launch
