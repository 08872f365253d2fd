// bootstrap_settings(): the environment of a rank, validated (pure: variables come from `get`).
#include <charconv>
#include <cmath>

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/error.hpp"
#include "primus/os/job_secret.hpp"

namespace primus::coll {
namespace {

long long integer(const std::string& name, const std::string& text, long long low, long long high,
                  const std::string& expected) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end || value < low || value > high) {
    throw CollectiveError(name + "='" + text + "': expected " + expected);
  }
  return value;
}

}  // namespace

BootstrapSettings bootstrap_settings(
    const std::function<std::optional<std::string>(const std::string&)>& get) {
  auto required = [&](const std::string& name, const std::string& why) {
    const auto value = get(name);
    if (!value || value->empty()) throw CollectiveError(name + " is not set: " + why);
    return *value;
  };
  BootstrapSettings s;
  s.secret = required("PRIMUS_JOB_SECRET",
                      "Primus connections are authenticated with the job secret (set by the "
                      "Primus plugin under srun --primus=..., or by primus-launch)");
  if (!os::is_job_secret(s.secret)) {  // its value is never printed
    throw CollectiveError(
        "PRIMUS_JOB_SECRET: expected 64 lowercase hexadecimal digits (what the "
        "Primus plugin and primus-launch make), got " +
        std::to_string(s.secret.size()) + " characters of another form");
  }
  s.job = get("PRIMUS_JOB_ID").value_or("");
  s.step = get("SLURM_STEP_ID").value_or("");
  if (const auto generation = get("PRIMUS_GENERATION"); generation && !generation->empty()) {
    s.generation = static_cast<std::uint32_t>(
        integer("PRIMUS_GENERATION", *generation, 0, 1 << 30, "a generation number, 0 or more"));
  }
  const auto method = get("PRIMUS_BOOTSTRAP");
  if (method && !method->empty()) {
    if (*method != "pmix" && *method != "tcp") {
      throw CollectiveError("PRIMUS_BOOTSTRAP='" + *method + "': expected pmix or tcp");
    }
    s.method = *method;
  } else {
    s.method = get("PMIX_RANK") ? "pmix" : "tcp";
  }
  if (const auto timeout = get("PRIMUS_COLL_TIMEOUT"); timeout && !timeout->empty()) {
    s.timeout = std::chrono::seconds(integer("PRIMUS_COLL_TIMEOUT", *timeout, 1, 604800,
                                             "a number of seconds from 1 to 604800"));
  }
  if (const auto integrity = get("PRIMUS_COLL_INTEGRITY"); integrity && !integrity->empty()) {
    // The spellings of the option table's boolean settings.
    const std::string& v = *integrity;
    if (v == "1" || v == "yes" || v == "true") {
      s.integrity = true;
    } else if (v != "0" && v != "no" && v != "false") {
      throw CollectiveError("PRIMUS_COLL_INTEGRITY='" + v +
                            "': expected 1/yes/true (authenticate every message) or 0/no/false");
    }
  }
  if (const auto node = get("SLURMD_NODENAME"); node && !node->empty()) s.node = *node;
  if (s.method == "tcp") {
    const std::string why = "the TCP bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and PRIMUS_PORT";
    s.size = static_cast<int>(integer("WORLD_SIZE", required("WORLD_SIZE", why), 1, 1 << 24,
                                      "a positive number of ranks"));
    s.rank = static_cast<int>(
        integer("RANK", required("RANK", why), 0, s.size - 1,
                "a rank from 0 to WORLD_SIZE-1 (" + std::to_string(s.size - 1) + ")"));
    s.master_addr = required("MASTER_ADDR", why);
    s.port = static_cast<std::uint16_t>(
        integer("PRIMUS_PORT", required("PRIMUS_PORT", why), 1, 65535, "a port from 1 to 65535"));
  }
  return s;
}

}  // namespace primus::coll
