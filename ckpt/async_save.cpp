#include "primus/ckpt/async_save.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <memory>

#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

std::atomic<bool>& in_flight() {
  static std::atomic<bool> flag{false};
  return flag;
}

struct OwnedTensor {
  TensorRef ref;
  // The host copy that ref.data points into; new[] leaves it uninitialized, as a vector's
  // resize would not: the copy fills it, without a pass of zeros before it.
  std::unique_ptr<unsigned char[]> bytes;
};

}  // namespace

struct AsyncSave::Impl {
  std::vector<OwnedTensor> tensors;
  std::vector<std::pair<std::string, StateValue>> state;
  std::future<std::filesystem::path> writer;
  bool waited = false;
};

AsyncSave::AsyncSave(const std::filesystem::path& root, std::int64_t step, int rank, int world_size,
                     const std::vector<TensorRef>& tensors,
                     const std::vector<std::pair<std::string, StateValue>>& state,
                     WriteOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (in_flight().exchange(true)) {
    throw Error("a checkpoint save of this process is still in flight: wait() for it first");
  }
  try {
    impl_->tensors.reserve(tensors.size());
    for (const TensorRef& t : tensors) {
      OwnedTensor& owned = impl_->tensors.emplace_back();
      owned.ref = t;
      const std::size_t bytes =
          static_cast<std::size_t>(element_count(t.shape) * dtype_size(t.dtype));
      if (bytes > 0 && t.data == nullptr) throw Error("tensor '" + t.name + "': no data");
      owned.bytes.reset(new unsigned char[bytes]);
      if (bytes > 0) std::memcpy(owned.bytes.get(), t.data, bytes);
      owned.ref.data = owned.bytes.get();
    }
    impl_->state = state;
    Impl* m = impl_.get();
    m->writer = std::async(std::launch::async, [m, root, step, rank, world_size, options] {
      RankWriter writer(root, step, rank, world_size, options);
      for (const OwnedTensor& t : m->tensors)
        writer.add_tensor(t.ref);
      for (const auto& [key, value] : m->state) {
        if (const auto* i = std::get_if<std::int64_t>(&value)) {
          writer.set_int(key, *i);
        } else if (const auto* s = std::get_if<std::string>(&value)) {
          writer.set_string(key, *s);
        } else {
          writer.set_bytes(key, std::get<std::vector<std::uint8_t>>(value));
        }
      }
      return writer.finish();
    });
  } catch (...) {
    in_flight() = false;
    throw;
  }
}

AsyncSave::~AsyncSave() {
  if (!impl_ || impl_->waited) return;
  try {
    wait();
  } catch (...) {  // the caller never asked: nothing is committed from a failed write anyway
  }
}

bool AsyncSave::done() const {
  return impl_->waited ||
         impl_->writer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::filesystem::path AsyncSave::wait() {
  if (impl_->waited) throw Error("AsyncSave::wait() was already called");
  impl_->waited = true;
  struct Release {
    ~Release() { in_flight() = false; }
  } release;
  std::filesystem::path path = impl_->writer.get();
  impl_->tensors.clear();
  impl_->tensors.shrink_to_fit();
  return path;
}

}  // namespace primus::ckpt
