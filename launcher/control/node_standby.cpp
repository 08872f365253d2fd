// A node's standby under srun, the task wrapper's side (node_standby.hpp).
#include "control/node_standby.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "primus/common/error.hpp"
#include "process/child_process.hpp"

namespace primus::launch {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// The standby's answers are small JSON objects, one message each.
std::optional<nlohmann::json> receive_answer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
  char buffer[4096];
  const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n <= 0) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(buffer, buffer + n, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  return doc;
}

// Sends `text` as one message with `fd` attached (SCM_RIGHTS).
bool send_with_fd(int socket, const std::string& text, int fd) {
  iovec io{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  return ::sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

os::UniqueFd connect_abstract(const std::string& name, std::string& why) {
  os::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (!fd || name.size() + 1 > sizeof address.sun_path) {
    why = "no socket for the node's standby";
    return {};
  }
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    why = std::string("no standby listens on @") + name + " (" + std::strerror(errno) + ")";
    return {};
  }
  // Another user could have taken the name first: what goes to it is the rank's environment.
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
      peer.uid != ::getuid()) {
    why = "@" + name + " is not this user's";
    return {};
  }
  return fd;
}

}  // namespace

std::string node_standby_name() {
  std::string node = variable("SLURMD_NODENAME");
  if (node.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    node = host;
  }
  return "primus-standby." + variable("SLURM_JOB_ID") + "." + variable("SLURM_STEP_ID") + "." +
         node;
}

bool starts_node_standby() {
  return variable("SLURM_LOCALID") == "0";
}

std::string standby_request(const std::string& assignment, const std::vector<int>& cpus) {
  nlohmann::json message = nlohmann::json::parse(assignment, nullptr, false);
  if (!message.is_object() || cpus.empty()) return assignment;
  message["cpus"] = cpus;
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

NodeStandbyProcess start_node_standby(const std::string& executable, const std::string& argv0,
                                      const std::vector<std::string>& env, const std::string& name,
                                      const std::filesystem::path& log) {
  const os::UniqueFd log_fd = open_rank_log(log);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  const os::UniqueFd read_end(fds[0]);
  NodeStandbyProcess standby;
  standby.owner.reset(fds[1]);
  const ExecArgs exec(executable, {argv0, "-m", "primus._standby_node", name}, env);
  ChildSetup child;
  child.output = log_fd.get();
  child.input = read_end.get();
  // Not SCHED_IDLE for its imports: its forks, the ranks, could not leave it unprivileged.
  standby.pid = spawn_child(child, exec);
  if (standby.pid < 0) {
    throw Error("cannot start the node's standby: " + std::string(std::strerror(errno)));
  }
  return standby;
}

std::optional<StandbyRank> ask_node_standby(const std::string& name, const std::string& assignment,
                                            std::uint32_t rank, const std::filesystem::path& log,
                                            std::string& why) {
  StandbyRank made;
  made.connection = connect_abstract(name, why);
  if (!made.connection) return std::nullopt;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    why = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  made.process.output.reset(fds[0]);
  const os::UniqueFd write_end(fds[1]);
  const std::string request = standby_request(assignment, own_cpus());
  if (!send_with_fd(made.connection.get(), request, write_end.get())) {
    why = std::string("the standby did not take the request (") + std::strerror(errno) + ")";
    return std::nullopt;
  }
  const auto answer = receive_answer(made.connection.get(), 5000);
  if (!answer || !answer->contains("pid") || !(*answer)["pid"].is_number_integer()) {
    why = answer && answer->contains("error") ? "the standby refused: " + answer->dump()
                                              : "the standby did not answer";
    return std::nullopt;
  }
  made.process.number = rank;
  made.process.pid = (*answer)["pid"].get<pid_t>();
  made.process.log = open_rank_log(log);
  ::fcntl(made.process.output.get(), F_SETFL, O_NONBLOCK);
  return made;
}

bool read_standby_end(int connection, int& wait_status) {
  const auto answer = receive_answer(connection, 0);
  if (answer && answer->contains("wait_status") && (*answer)["wait_status"].is_number_integer()) {
    wait_status = (*answer)["wait_status"].get<int>();
    return true;
  }
  char probe = 0;
  const ssize_t n = ::recv(connection, &probe, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    wait_status = SIGKILL;  // as a rank killed: the standby that ran it is gone
    return true;
  }
  return false;
}

}  // namespace primus::launch
