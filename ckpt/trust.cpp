#include "trust.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

std::string mode_text(mode_t mode) {
  std::string text = "0";
  for (const int shift : {6, 3, 0})
    text += static_cast<char>('0' + ((mode >> shift) & 7));
  return text;
}

// A group that only this user belongs to: its primary group, listing no other member.
bool private_group(gid_t gid) {
  if (gid != ::getegid()) return false;
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return false;
  }
  std::vector<char> user_buffer(16384);
  passwd user{};
  passwd* me = nullptr;
  if (::getpwuid_r(::geteuid(), &user, user_buffer.data(), user_buffer.size(), &me) != 0 ||
      me == nullptr) {
    return false;
  }
  for (char** member = found->gr_mem; member != nullptr && *member != nullptr; ++member) {
    if (std::strcmp(*member, me->pw_name) != 0) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> writable_by_others(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return "it belongs to user " + std::to_string(st.st_uid);
  }
  if ((st.st_mode & S_IWOTH) != 0)
    return "anyone can write it (mode " + mode_text(st.st_mode) + ")";
  if ((st.st_mode & S_IWGRP) != 0 && !private_group(st.st_gid)) {
    return "its group " + std::to_string(st.st_gid) + " can write it (mode " +
           mode_text(st.st_mode) + ")";
  }
  return std::nullopt;
}

bool trust_shared_directories() {
  const char* value = std::getenv("PRIMUS_CKPT_TRUST_SHARED");
  if (value == nullptr) return false;
  const std::string_view text(value);
  return text == "1" || text == "yes" || text == "true";
}

void require_private(const std::filesystem::path& dir, const std::string& what) {
  if (trust_shared_directories()) return;
  const auto why = writable_by_others(dir);
  if (!why) return;
  throw Error("refusing to load from " + dir.string() + " (" + what + "): " + *why +
              ", so a checkpoint there may have been put there by someone else, and loading a "
              "checkpoint is like running code; --primus-ckpt-trust-shared "
              "(PRIMUS_CKPT_TRUST_SHARED=1) loads it anyway");
}

}  // namespace primus::ckpt
