#include "mapped_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <csetjmp>
#include <csignal>
#include <mutex>
#include <utility>
#include <vector>

namespace primus::data {
namespace {

// mincore() looks at this many pages at a time (a run is at most 8 MiB: 2,048 pages).
constexpr std::size_t kResidentChunk = 2048;

// initial-exec: the handler reads it without the lazy allocation of a dlopen()ed library's TLS.
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* t_bus_jump = nullptr;
struct sigaction g_previous_bus {};
std::once_flag g_bus_installed;

void on_bus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = t_bus_jump; jump != nullptr) {
    t_bus_jump = nullptr;
    siglongjmp(*jump, 1);
  }
  // Not ours: what was there before handles it. A default or ignored SIGBUS is made the default
  // again, and returning re-runs the faulting instruction, which then ends the process with it.
  if ((g_previous_bus.sa_flags & SA_SIGINFO) != 0 && g_previous_bus.sa_sigaction != nullptr) {
    g_previous_bus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN) {
    g_previous_bus.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
}

void install_bus_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_bus;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigaction(SIGBUS, &action, &g_previous_bus);
}

std::size_t page_size() {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

MappedFile::MappedFile(int fd, std::uint64_t size) {
  if (size == 0) return;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return;
  data_ = static_cast<const std::uint8_t*>(map);
  size_ = size;
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): munmap takes a non-const pointer
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

bool MappedFile::resident(std::uint64_t begin, std::uint64_t end) const {
  if (data_ == nullptr || begin >= end || end > size_) return false;
  const std::size_t page = page_size();
  const std::uint64_t first = begin / page * page;
  thread_local std::vector<unsigned char> pages;
  for (std::uint64_t at = first; at < end;) {
    const std::uint64_t length = std::min<std::uint64_t>(end - at, kResidentChunk * page);
    pages.resize((length + page - 1) / page);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): mincore takes a non-const pointer
    if (::mincore(const_cast<std::uint8_t*>(data_ + at), length, pages.data()) != 0) return false;
    for (const unsigned char p : pages) {
      if ((p & 1U) == 0) return false;
    }
    at += length;
  }
  return true;
}

bool guard_bus(void (*work)(void*), void* arg) {
  std::call_once(g_bus_installed, install_bus_handler);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) return false;  // on_bus cleared t_bus_jump
  t_bus_jump = &jump;
  work(arg);
  t_bus_jump = nullptr;
  return true;
}

}  // namespace primus::data
