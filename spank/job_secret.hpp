// The job secret: 32 bytes from OpenSSL's CSPRNG, as 64 lowercase hex digits.
#pragma once

#include <string>
#include <string_view>

namespace primus::spank {

std::string make_job_secret();  // throws primus::Error if the CSPRNG fails
bool is_job_secret(std::string_view text);

}  // namespace primus::spank
