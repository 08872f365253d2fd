#include "mapping_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace primus::data {
namespace {

struct Key {
  dev_t device;
  ino_t inode;
  off_t size;
  std::int64_t modified_seconds;
  std::int64_t modified_nanoseconds;
  bool operator<(const Key& other) const {
    return std::tie(device, inode, size, modified_seconds, modified_nanoseconds) <
           std::tie(other.device, other.inode, other.size, other.modified_seconds,
                    other.modified_nanoseconds);
  }
};

struct Entry {
  std::shared_ptr<const MappedFile> map;
  std::uint64_t last_use = 0;
};

class Cache {
 public:
  explicit Cache(pid_t owner) : owner_(owner) {}
  pid_t owner() const { return owner_; }

  std::shared_ptr<const MappedFile> get(const Key& key, int fd) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entries_[key];
    if (!entry.map) {
      auto map = std::make_shared<MappedFile>(fd, static_cast<std::uint64_t>(key.size));
      if (!*map) {
        entries_.erase(key);
        return nullptr;
      }
      entry.map = std::move(map);
    }
    entry.last_use = ++clock_;
    std::shared_ptr<const MappedFile> out = entry.map;
    trim();
    return out;
  }

  MappingCacheState state() {
    const std::lock_guard<std::mutex> lock(mutex_);
    MappingCacheState s;
    s.mappings = entries_.size();
    s.idle_bytes = idle_bytes();
    return s;
  }

  void drop_idle() {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.map.use_count() == 1 ? entries_.erase(it) : std::next(it);
    }
  }

 private:
  std::uint64_t idle_bytes() const {
    std::uint64_t idle = 0;
    for (const auto& [key, entry] : entries_) {
      if (entry.map.use_count() == 1) idle += entry.map->size();
    }
    return idle;
  }

  // Unmaps the least recently used idle mappings until the idle ones fit kIdleMappedBytes.
  void trim() {
    std::uint64_t idle = idle_bytes();
    while (idle > kIdleMappedBytes) {
      auto oldest = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.map.use_count() != 1) continue;
        if (oldest == entries_.end() || it->second.last_use < oldest->second.last_use) oldest = it;
      }
      if (oldest == entries_.end()) return;
      idle -= oldest->second.map->size();
      entries_.erase(oldest);
    }
  }

  const pid_t owner_;
  std::mutex mutex_;
  std::map<Key, Entry> entries_;
  std::uint64_t clock_ = 0;
};

// The cache of this process. After a fork the child makes its own and leaves the parent's as
// it is: its mutex may have been held by a thread that the child does not have. No lock is
// taken to find it, for the same reason.
Cache& cache() {
  static std::atomic<Cache*> current{nullptr};
  const pid_t me = ::getpid();
  for (;;) {
    Cache* seen = current.load(std::memory_order_acquire);
    if (seen != nullptr && seen->owner() == me) return *seen;
    // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): lives as long as the process
    auto* made = new Cache(me);
    if (current.compare_exchange_strong(seen, made, std::memory_order_acq_rel)) return *made;
    delete made;  // NOLINT(cppcoreguidelines-owning-memory): another thread made it first
  }
}

}  // namespace

std::shared_ptr<const MappedFile> shared_mapping(int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size <= 0) return nullptr;
  const Key key{info.st_dev, info.st_ino, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec};
  return cache().get(key, fd);
}

MappingCacheState mapping_cache_state() {
  return cache().state();
}

void drop_idle_mappings() {
  cache().drop_idle();
}

}  // namespace primus::data
