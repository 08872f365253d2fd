// The process's mappings of data files, shared by every reader of the same file: the next
// epoch's reader, or a dataset opened again (a DataLoader made anew each epoch), finds the file
// still mapped with its page tables filled, where a fresh mapping cost a page fault per 16 pages
// and an munmap at the end, a third of the time of a warm epoch of 1 KiB records here (28 ms of
// copying, 10 ms of faults, 5 ms of munmap for 256 MiB on one core).
//
// A file is known by its device, inode, size and modification time, so that a file replaced or
// rewritten is mapped anew. Mappings no reader holds stay for later up to kIdleMappedBytes in
// all, a bound applied at each new use (the least recently used idle ones are unmapped). Pages
// a mapping holds are not dropped by POSIX_FADV_DONTNEED (the kernel's reclaim still takes
// them). A child process (fork) starts with none of its parent's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "mapped_file.hpp"
#include "primus/data/reader.hpp"

namespace primus::data {

// Idle mappings kept, in bytes of file mapped (their page tables: about 2 MiB a GiB).
constexpr std::uint64_t kIdleMappedBytes = std::uint64_t{8} << 30;

// The mapping of the regular file open on `fd`, shared with whoever else maps it; null when it
// is empty, not a regular file or cannot be mapped (the reader then reads it with pread()).
std::shared_ptr<const MappedFile> shared_mapping(int fd);

// What the cache holds now (for the tests): mappings, and the bytes of those no reader holds.
struct MappingCacheState {
  std::size_t mappings = 0;
  std::uint64_t idle_bytes = 0;
};
MappingCacheState mapping_cache_state();
// drop_idle_mappings() is declared in primus/data/reader.hpp.

}  // namespace primus::data
