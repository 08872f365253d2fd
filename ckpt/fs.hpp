// The file-system steps of a commit, each throwing primus::Error that names the path and the
// system's reason: private directories, new files, fsync, an atomically replaced small file,
// renames and removals, all relative to open directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "primus/os/unique_fd.hpp"

namespace primus::ckpt::fs {

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

// ---- Relative to an open directory (a commit opens the root once and works through it, so
// that renaming the root or a directory above it midway changes nothing; names never follow a
// symbolic link). `dir_path` only names things in messages.

// Opens the directory `path` (O_DIRECTORY | O_NOFOLLOW).
os::UniqueFd open_directory(const std::filesystem::path& path);
// Opens the directory `name` in `dir`, never through a link, and requires it to belong to this
// user and to be writable by no one else (else an Error that says why).
os::UniqueFd open_private_directory_at(int dir, const std::filesystem::path& dir_path,
                                       const std::string& name);
// A path that reaches `name` through the open directory `dir` (/proc/self/fd/N/name), for
// libraries that take paths (HDF5): it does not depend on where the directory is now.
std::filesystem::path through(int dir, const std::string& name);
// Whether `name` in `dir` is the very file or directory open as `fd` (device and inode; a link
// is never followed).
bool is_same_at(int dir, const std::string& name, int fd);
// Writes <name>.tmp in `dir`, fsyncs it and renames it over `name` (the caller fsyncs the
// directory). The temporary is created new (O_EXCL, never through a symbolic link, mode 0600):
// whatever stood at its name (a stale one, or a link another user planted) is unlinked first,
// never written through.
void replace_file_at(int dir, const std::filesystem::path& dir_path, const std::string& name,
                     const std::string& contents);
std::optional<std::string> read_small_file_at(int dir, const std::string& name,
                                              std::uint64_t max_bytes);
void rename_at(int dir, const std::filesystem::path& dir_path, const std::string& from,
               const std::string& to);
// Exchanges two names atomically (renameat2 RENAME_EXCHANGE); false where the file system
// cannot (then nothing changed).
bool exchange_at(int dir, const std::filesystem::path& dir_path, const std::string& a,
                 const std::string& b);
void fsync_fd(int fd, const std::filesystem::path& path);
// Opens `name` in `dir` (never through a link), fsyncs and closes it, each step checked.
void fsync_at(int dir, const std::filesystem::path& dir_path, const std::string& name);
// Removes `name` in `dir`, a file or a whole tree, with openat/unlinkat all the way down: a
// link is removed itself, never followed, and renaming a directory above midway cannot make it
// remove anything outside. Absent already: nothing to do.
void remove_tree_at(int dir, const std::filesystem::path& dir_path, const std::string& name);
std::uint64_t file_size(const std::filesystem::path& path);

}  // namespace primus::ckpt::fs
