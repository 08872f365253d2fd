// The file-system steps of a commit, each throwing primus::Error that names the path and the
// system's reason: fsync of files and directories, an atomically replaced small file, rename.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "primus/os/unique_fd.hpp"

namespace primus::ckpt::fs {

void fsync_path(const std::filesystem::path& path);  // a file or a directory
// Writes <path>.tmp, fsyncs it and renames it over <path> (the caller fsyncs the directory).
// The temporary is created new (O_EXCL, never through a symbolic link, mode 0600): whatever
// stood at its name (a stale one, or a link another user planted) is unlinked first, never
// written through.
void replace_file(const std::filesystem::path& path, const std::string& contents);
// Creates directory `path` with mode 0700, or accepts it where it exists as a real directory
// (not a symbolic link) owned by this user that no one else can write; anything else is an
// Error that says why (a shared checkpoint root where another user made the name first).
// Returns the directory opened (O_DIRECTORY | O_NOFOLLOW), checked through that descriptor.
os::UniqueFd make_private_directory(const std::filesystem::path& path);
// Marks the open directory `dir` as in use by a live writer (a shared flock, released when the
// descriptor closes; best effort: file systems without locks keep no mark).
void mark_in_use(int dir);
// Whether a live writer marked the directory at `path` (prune leaves such a directory alone).
bool in_use(const std::filesystem::path& path);
// Creates `name` in the directory `dir` as a new, empty file of mode 0600 (unlinking what
// stood there, never following it) and returns it opened for writing.
os::UniqueFd create_new_file(int dir, const std::filesystem::path& dir_path,
                             const std::string& name);
std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes);
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);
std::uint64_t file_size(const std::filesystem::path& path);
// Removes a directory tree; never follows symbolic links out of it.
void remove_tree(const std::filesystem::path& path);

}  // namespace primus::ckpt::fs
