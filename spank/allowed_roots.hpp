// Checking that a directory the user names lies under the site's allowed roots (plugstack
// ckpt_roots). Runs as the user, never as root.
#pragma once

#include <string>

#include "primus/common/options.hpp"

namespace primus::spank {

// `path` (relative to `base`) canonicalised: symbolic links of its existing part resolved, "."
// and ".." removed; the part that does not exist yet is appended as written.
std::string canonical_path(const std::string& path, const std::string& base);

// Throws primus::Error naming `what` when the canonical `path` is not under one of `roots`
// (a ':'-separated list of absolute directories; empty: anywhere).
void check_under_roots(const std::string& what, const std::string& path, const std::string& base,
                       const std::string& roots);

// The job and checkpoint directories of `options` (relative ones taken from `base`) checked
// against the site's ckpt_roots.
void check_directories(const ResolvedOptions& options, const std::string& base);

}  // namespace primus::spank
