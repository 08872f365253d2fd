// A rank's save in the background: the constructor copies the tensors and state into host
// memory it owns and returns; a thread writes the rank file with a RankWriter; wait() joins it
// and reports its error. The caller commits (rank 0, after its agreement) at a later step.
// At most one AsyncSave is in flight per process, so memory holds at most one copy of what it
// saves (plus HDF5's own chunk buffers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/writer.hpp"

namespace primus::ckpt {

class AsyncSave {
 public:
  // Throws Error when another AsyncSave of this process has not been waited for.
  AsyncSave(const std::filesystem::path& root, std::int64_t step, int rank, int world_size,
            const std::vector<TensorRef>& tensors,
            const std::vector<std::pair<std::string, StateValue>>& state,
            WriteOptions options = {});
  ~AsyncSave();  // waits, and swallows an error nobody asked for
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;

  bool done() const;
  // Joins the writer; returns the rank file's path or throws the writer's error.
  std::filesystem::path wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace primus::ckpt
