// The file-system steps of a commit, each throwing primus::Error that names the path and the
// system's reason: fsync of files and directories, an atomically replaced small file, rename.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace primus::ckpt::fs {

void fsync_path(const std::filesystem::path& path);  // a file or a directory
// Writes <path>.tmp, fsyncs it and renames it over <path> (the caller fsyncs the directory).
void replace_file(const std::filesystem::path& path, const std::string& contents);
std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes);
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);
std::uint64_t file_size(const std::filesystem::path& path);
// Removes a directory tree; never follows symbolic links out of it.
void remove_tree(const std::filesystem::path& path);

}  // namespace primus::ckpt::fs
