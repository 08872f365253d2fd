// The ceiling for two ranks on one machine: two processes send a large buffer to each other in
// both directions at once over loopback TCP, with the socket setup libprimus-coll uses
// (non-blocking, TCP_NODELAY, a 256 KiB send buffer, poll). Prints the best GB/s per direction
// over several runs. Usage: ceiling BYTES RUNS
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void setup(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const int send_buffer = 256 << 10;  // as collectives/socket.cpp
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
}

// Sends and receives `bytes` at once on fd (as net::exchange does).
void both_ways(int fd, std::vector<char>& out, std::vector<char>& in) {
  std::size_t sent = 0, got = 0;
  while (sent < out.size() || got < in.size()) {
    bool progress = false;
    if (sent < out.size()) {
      const ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n), progress = true;
    }
    if (got < in.size()) {
      const ssize_t n = recv(fd, in.data() + got, in.size() - got, MSG_DONTWAIT);
      if (n > 0) got += static_cast<std::size_t>(n), progress = true;
      if (n == 0) std::exit(3);
    }
    if (progress) continue;
    pollfd p{fd,
             static_cast<short>((sent < out.size() ? POLLOUT : 0) | (got < in.size() ? POLLIN : 0)),
             0};
    poll(&p, 1, 10000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (64u << 20);
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
  listen(listener, 1);
  socklen_t length = sizeof address;
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const pid_t child = fork();
  int fd;
  if (child == 0) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return 2;
  } else {
    fd = accept(listener, nullptr, nullptr);
  }
  setup(fd);
  std::vector<char> out(bytes, 1), in(bytes);
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    char token = 0;
    // Start together: a one-byte exchange.
    if (child == 0) {
      write(fd, &token, 1);
      read(fd, &token, 1);
    } else {
      read(fd, &token, 1);
      write(fd, &token, 1);
    }
    const auto start = std::chrono::steady_clock::now();
    both_ways(fd, out, in);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
  }
  if (child == 0) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("%.3f\n", best);
  return 0;
}
