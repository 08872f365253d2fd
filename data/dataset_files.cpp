// The files of a dataset specification (OS adapter: glob, directories, a manifest).
#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "primus/common/error.hpp"
#include "primus/data/dataset.hpp"

namespace primus::data {
namespace {

std::string quoted(const std::string& text) {
  return "'" + text + "'";
}

bool is_regular(const std::string& path, struct stat* info) {
  return ::stat(path.c_str(), info) == 0 && S_ISREG(info->st_mode);
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::vector<std::string> from_manifest(const std::string& manifest, const std::string& what) {
  struct stat info {};
  if (::stat(manifest.c_str(), &info) != 0) {
    throw Error(what + ": the manifest " + quoted(manifest) + ": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(what + ": the manifest " + quoted(manifest) +
                " is not a file (a manifest lists data files, one per line)");
  }
  std::ifstream in(manifest);
  if (!in) throw Error(what + ": cannot read the manifest " + quoted(manifest));
  const std::string base = directory_of(manifest);
  std::vector<std::string> files;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    std::string path = line;
    if (line.front() != '/') {
      path = base;
      path += '/';
      path += line;
    }
    const std::string where = manifest + ":" + std::to_string(number) + ": ";
    struct stat entry {};
    if (::stat(path.c_str(), &entry) != 0) {
      throw Error(where + quoted(line) + ": " + std::strerror(errno));
    }
    if (S_ISDIR(entry.st_mode)) {
      throw Error(where + quoted(line) +
                  " is a directory: a manifest names data files, one per line");
    }
    if (!S_ISREG(entry.st_mode)) throw Error(where + quoted(line) + " is not a regular file");
    files.push_back(path);
  }
  if (in.bad()) throw Error(what + ": cannot read the manifest " + quoted(manifest));
  if (files.empty()) throw Error(what + ": the manifest " + quoted(manifest) + " names no file");
  return files;
}

std::vector<std::string> from_glob(const std::string& pattern, const std::string& what) {
  glob_t matches{};
  const int status = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::string> files;
  if (status == 0) {
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
      struct stat info {};
      if (is_regular(matches.gl_pathv[i], &info)) files.emplace_back(matches.gl_pathv[i]);
    }
  }
  ::globfree(&matches);
  if (status == GLOB_ABORTED)
    throw Error(what + ": cannot read the directories of " + quoted(pattern));
  if (status == GLOB_NOSPACE) throw Error(what + ": out of memory expanding " + quoted(pattern));
  if (files.empty()) throw Error(what + ": the glob " + quoted(pattern) + " matches no file");
  std::sort(files.begin(), files.end());  // std::string compares as bytes (char_traits<char>)
  return files;
}

std::vector<std::string> from_directory(const std::string& directory, const std::string& what) {
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) {
    throw Error(what + ": cannot list the directory " + quoted(directory) + ": " +
                std::strerror(errno));
  }
  std::vector<std::string> files;
  const std::string prefix = directory.back() == '/' ? directory : directory + "/";
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;  // hidden files, and the cached indexes
    const std::string path = prefix + entry->d_name;
    struct stat info {};
    if (is_regular(path, &info)) files.push_back(path);
  }
  ::closedir(dir);
  if (files.empty()) {
    throw Error(what + ": the directory " + quoted(directory) + " holds no data file");
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> list_dataset_files(const std::string& spec, const std::string& what) {
  if (spec.empty()) {
    throw Error(what + ": expected a glob, a directory, a file or @MANIFEST, got nothing");
  }
  if (spec.front() == '@') return from_manifest(spec.substr(1), what);
  if (spec.find_first_of("*?[") != std::string::npos) return from_glob(spec, what);
  struct stat info {};
  if (::stat(spec.c_str(), &info) != 0) {
    throw Error(what + ": " + quoted(spec) + ": " + std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) return from_directory(spec, what);
  if (!S_ISREG(info.st_mode)) {
    throw Error(what + ": " + quoted(spec) + " is not a file, a directory or a glob");
  }
  return {spec};
}

}  // namespace primus::data
