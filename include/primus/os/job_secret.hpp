// The job secret: 32 bytes from the kernel's CSPRNG (getrandom), written as 64 lowercase hex
// digits. Made at submit time by the plugin, and by primus-env --nproc for one machine.
#pragma once

#include <string>
#include <string_view>

namespace primus::os {

std::string make_job_secret();  // throws primus::Error if the CSPRNG fails
// 64 lowercase hex digits (what make_job_secret writes; parse_job_secret reads its bytes).
bool is_job_secret(std::string_view text);

}  // namespace primus::os
