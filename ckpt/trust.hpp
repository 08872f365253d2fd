// Whether a checkpoint directory could hold files that another user put there. A checkpoint is
// input as trusted as code (libhdf5 1.10 is not memory-safe against crafted files, see
// docs/ckpt-format.md), so loads refuse roots and step directories that others can write,
// unless the job says otherwise (--primus-ckpt-trust-shared, PRIMUS_CKPT_TRUST_SHARED=1).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace primus::ckpt {

// Why `dir` can be written by someone other than this user, or nullopt when it cannot: it
// belongs to another user (root excepted), anyone may write it, or its group may and the
// group is not this user's own (a user private group: the user's primary group, with no other
// members). A directory that cannot be examined (missing) is nullopt: the caller's next step
// reports that.
std::optional<std::string> writable_by_others(const std::filesystem::path& dir);

// PRIMUS_CKPT_TRUST_SHARED is 1, yes or true.
bool trust_shared_directories();

// Throws Error (`what` names the directory's role) unless dir is private or the job trusts
// shared directories.
void require_private(const std::filesystem::path& dir, const std::string& what);

}  // namespace primus::ckpt
