#include "control/data_tasks.hpp"

#include <nlohmann/json.hpp>

namespace primus::launch {
namespace {

using nlohmann::json;

std::string line_of(const json& message) {
  json out = message;
  out["type"] = "data";
  return out.dump();
}

std::optional<std::uint64_t> unsigned_field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

}  // namespace

std::string data_mode_error() {
  return line_of({{"op", "error"},
                  {"message",
                   "the dynamic split is off: primus-launch hands out splits only with "
                   "--primus-data-mode=dynamic"}});
}

DataMessage DataTasks::error(std::uint32_t rank, const std::string& message) const {
  return {rank, line_of({{"op", "error"}, {"message", message}})};
}

std::vector<DataMessage> DataTasks::receive(std::uint32_t rank, const std::string& line) {
  json message;
  try {
    message = json::parse(line);
  } catch (const json::exception&) {
    return {error(rank, "a data message that is not JSON")};
  }
  const std::string op = message.value("op", "");
  if (op == "open") return handle_open(rank, line);
  if (op == "next") {
    const auto epoch = unsigned_field(message, "epoch");
    if (!epoch) return {error(rank, "next: no epoch")};
    return handle_next(rank, *epoch, unsigned_field(message, "finished"));
  }
  if (op == "release") return handle_release(rank, line);
  if (op == "checkpoint") return order_checkpoint(false);
  if (op == "leave") return handle_leave(rank);
  return {error(rank, "unknown data operation '" + op + "'")};
}

std::vector<DataMessage> DataTasks::handle_open(std::uint32_t rank, const std::string& line) {
  if (rank != 0) return {error(rank, "open: only rank 0 opens the queue")};
  if (opened_) return serve_waiting();  // a repeated open (a reconnect): keep the state
  const json message = json::parse(line);
  const auto sizes = message.find("sizes");
  if (sizes == message.end() || !sizes->is_array()) return {error(rank, "open: no sizes")};
  for (const json& size : *sizes) {
    if (!size.is_number_unsigned()) return {error(rank, "open: a size that is not a count")};
    sizes_.push_back(size.get<std::uint64_t>());
  }
  done_.assign(sizes_.size(), 0);
  holder_.assign(sizes_.size(), -1);
  meta_ = message.value("meta", json::object()).dump();
  const auto restored = message.find("restored");
  if (restored != message.end() && restored->is_object()) {
    const auto done = restored->find("done");
    if (done == restored->end() || !done->is_array() || done->size() != sizes_.size()) {
      sizes_.clear();
      return {error(rank, "open: the restored progress does not match the splits")};
    }
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      const json& value = (*done)[i];
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() > sizes_[i]) {
        sizes_.clear();
        return {error(rank, "open: restored progress past a split's end")};
      }
      done_[i] = value.get<std::uint64_t>();
    }
    epoch_ = unsigned_field(*restored, "epoch").value_or(0);
    last_step_ = unsigned_field(*restored, "step").value_or(0);
  }
  opened_ = true;
  return serve_waiting();
}

bool DataTasks::epoch_complete() const {
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    if (done_[i] < sizes_[i]) return false;
  }
  return true;
}

void DataTasks::finish(std::uint32_t rank, std::uint64_t id) {
  if (id >= sizes_.size() || holder_[id] != static_cast<std::int64_t>(rank)) return;
  by_rank_[rank] += sizes_[id] - done_[id];
  done_[id] = sizes_[id];
  holder_[id] = -1;
}

std::optional<DataMessage> DataTasks::answer(std::uint32_t rank, std::uint64_t epoch) {
  if (epoch < epoch_) return DataMessage{rank, line_of({{"op", "epoch-done"}, {"epoch", epoch}})};
  if (epoch > epoch_) return std::nullopt;  // not before this epoch is done
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    if (holder_[i] == -1 && done_[i] < sizes_[i]) {
      holder_[i] = static_cast<std::int64_t>(rank);
      return DataMessage{
          rank, line_of({{"op", "split"}, {"epoch", epoch_}, {"id", i}, {"done", done_[i]}})};
    }
  }
  if (!epoch_complete()) return std::nullopt;  // others still hold splits of this epoch
  const std::uint64_t ended = epoch_;
  ++epoch_;
  done_.assign(sizes_.size(), 0);
  return DataMessage{rank, line_of({{"op", "epoch-done"}, {"epoch", ended}})};
}

std::vector<DataMessage> DataTasks::serve_waiting() {
  std::vector<DataMessage> out;
  if (!opened_ || checkpoint_step_) return out;
  bool served = true;
  while (served) {
    served = false;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (auto reply = answer(it->first, it->second)) {
        out.push_back(std::move(*reply));
        it = waiting_.erase(it);
        served = true;
      } else {
        ++it;
      }
    }
  }
  return out;
}

std::vector<DataMessage> DataTasks::handle_next(std::uint32_t rank, std::uint64_t epoch,
                                                std::optional<std::uint64_t> finished) {
  if (opened_ && finished) finish(rank, *finished);
  // During a checkpoint the request is dropped (the rank asks again after the table), and the
  // order is sent again: this rank may have connected after it went out.
  if (checkpoint_step_) {
    if (released_.count(rank) != 0) return {};
    return {
        {rank,
         line_of({{"op", "checkpoint"}, {"step", *checkpoint_step_}, {"stop", checkpoint_stop_}})}};
  }
  waiting_[rank] = epoch;
  return serve_waiting();
}

std::vector<DataMessage> DataTasks::handle_leave(std::uint32_t rank) {
  if (checkpoint_step_) {
    if (released_.count(rank) != 0) return {};
    return {
        {rank,
         line_of({{"op", "checkpoint"}, {"step", *checkpoint_step_}, {"stop", checkpoint_stop_}})}};
  }
  if (closed_) return {{rank, line_of({{"op", "left"}})}};
  leaving_.insert(rank);
  return maybe_close();
}

std::vector<DataMessage> DataTasks::maybe_close() {
  if (closed_ || leaving_.empty()) return {};
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (gone_.count(r) == 0 && leaving_.count(r) == 0) return {};
  }
  closed_ = true;
  std::vector<DataMessage> out;
  for (const std::uint32_t r : leaving_)
    out.push_back({r, line_of({{"op", "left"}})});
  return out;
}

std::vector<DataMessage> DataTasks::order_checkpoint(bool stop) {
  // After the end every rank is leaving: nobody could save with them.
  if (!opened_ || closed_) return {};
  if (checkpoint_step_) {
    checkpoint_stop_ = checkpoint_stop_ || stop;
    return {};
  }
  checkpoint_step_ = last_step_ + 1;
  checkpoint_stop_ = stop;
  released_.clear();
  waiting_.clear();  // answered after the table, when they ask again
  leaving_.clear();  // they save first, then ask to leave again
  std::vector<DataMessage> out;
  for (std::uint32_t rank = 0; rank < world_size_; ++rank) {
    if (gone_.count(rank) != 0) continue;
    out.push_back(
        {rank,
         line_of({{"op", "checkpoint"}, {"step", *checkpoint_step_}, {"stop", checkpoint_stop_}})});
  }
  if (out.empty()) return finish_checkpoint();
  return out;
}

std::vector<DataMessage> DataTasks::handle_release(std::uint32_t rank, const std::string& line) {
  const json message = json::parse(line);
  if (!checkpoint_step_) return {error(rank, "release: no checkpoint was ordered")};
  const auto step = unsigned_field(message, "step");
  if (!step || *step != *checkpoint_step_) {
    return {error(rank,
                  "release: the checkpoint ordered is step " + std::to_string(*checkpoint_step_))};
  }
  const auto held = message.find("held");
  if (held != message.end() && held->is_array()) {
    for (const json& entry : *held) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_number_unsigned() ||
          !entry[1].is_number_unsigned()) {
        continue;
      }
      const auto id = entry[0].get<std::uint64_t>();
      const auto done = entry[1].get<std::uint64_t>();
      if (id >= sizes_.size() || holder_[id] != static_cast<std::int64_t>(rank)) continue;
      if (done > done_[id] && done <= sizes_[id]) {
        by_rank_[rank] += done - done_[id];
        done_[id] = done;
      }
      holder_[id] = -1;  // back in the queue (or done)
    }
  }
  released_.insert(rank);
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (gone_.count(r) == 0 && released_.count(r) == 0) return {};
  }
  return finish_checkpoint();
}

std::vector<DataMessage> DataTasks::finish_checkpoint() {
  json cursor = json::parse(meta_.empty() ? "{}" : meta_);
  cursor["epoch"] = epoch_;
  cursor["done"] = done_;
  cursor["step"] = *checkpoint_step_;
  std::vector<DataMessage> out;
  for (std::uint32_t rank = 0; rank < world_size_; ++rank) {
    if (gone_.count(rank) != 0) continue;
    out.push_back({rank, line_of({{"op", "table"},
                                  {"step", *checkpoint_step_},
                                  {"stop", checkpoint_stop_},
                                  {"cursor", cursor}})});
  }
  last_step_ = *checkpoint_step_;
  checkpoint_step_.reset();
  released_.clear();
  return out;
}

std::vector<DataMessage> DataTasks::rank_gone(std::uint32_t rank) {
  gone_.insert(rank);
  waiting_.erase(rank);
  leaving_.erase(rank);
  if (checkpoint_step_) {
    for (std::uint32_t r = 0; r < world_size_; ++r) {
      if (gone_.count(r) == 0 && released_.count(r) == 0) return {};
    }
    return finish_checkpoint();
  }
  return maybe_close();
}

}  // namespace primus::launch
