// The ceiling for two ranks on one machine: two processes send a large buffer to each other in
// both directions at once over loopback TCP. By default with the socket setup libprimus-coll uses
// (collectives/socket.cpp: TCP_NODELAY and a fixed 384 KiB send buffer; non-blocking I/O and
// poll); with --kernel-defaults the send and receive buffers are left to the kernel (autotuned
// between tcp_wmem/tcp_rmem's bounds), TCP_NODELAY kept, so that a fixed buffer cannot lower the
// ceiling it is judged against. Prints the best GB/s per direction over RUNS runs; exits non-zero
// (printing nothing on stdout) when anything failed.
// Usage: ceiling [--kernel-defaults] BYTES RUNS
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "ceiling: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void setup(int fd, bool kernel_defaults) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail("TCP_NODELAY");
  if (kernel_defaults) return;
  const int send_buffer = 384 << 10;  // as collectives/socket.hpp (kSendBufferBytes)
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer) != 0) {
    fail("SO_SNDBUF");
  }
}

// Fully sends or receives `bytes` on a blocking call (the start token).
void exact(int fd, char* token, bool sending) {
  for (;;) {
    const ssize_t n = sending ? send(fd, token, 1, MSG_NOSIGNAL) : recv(fd, token, 1, 0);
    if (n == 1) return;
    if (n == 0) errno = ECONNRESET;
    if (n < 0 && errno == EINTR) continue;
    fail(sending ? "send" : "recv");
  }
}

// Sends and receives `bytes` at once on fd (as net::exchange does).
void both_ways(int fd, std::vector<char>& out, std::vector<char>& in) {
  std::size_t sent = 0, got = 0;
  while (sent < out.size() || got < in.size()) {
    bool progress = false;
    if (sent < out.size()) {
      const ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n), progress = true;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail("send");
    }
    if (got < in.size()) {
      const ssize_t n = recv(fd, in.data() + got, in.size() - got, MSG_DONTWAIT);
      if (n > 0) got += static_cast<std::size_t>(n), progress = true;
      if (n == 0) {
        errno = ECONNRESET;
        fail("recv (the peer closed the connection)");
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail("recv");
    }
    if (progress) continue;
    pollfd p{fd,
             static_cast<short>((sent < out.size() ? POLLOUT : 0) | (got < in.size() ? POLLIN : 0)),
             0};
    const int ready = poll(&p, 1, 10000);
    if (ready < 0 && errno != EINTR) fail("poll");
    if (ready == 0) {
      errno = ETIMEDOUT;
      fail("no progress for 10 s");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int arg = 1;
  const bool kernel_defaults = argc > 1 && std::string(argv[1]) == "--kernel-defaults";
  if (kernel_defaults) ++arg;
  const std::size_t bytes = argc > arg ? std::strtoull(argv[arg], nullptr, 10) : (64u << 20);
  const int runs = argc > arg + 1 ? std::atoi(argv[arg + 1]) : 5;
  if (bytes == 0 || runs < 1) {
    std::fprintf(stderr, "usage: ceiling [--kernel-defaults] BYTES RUNS\n");
    return 2;
  }
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fail("bind");
  if (listen(listener, 1) != 0) fail("listen");
  socklen_t length = sizeof address;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail("getsockname");
  }
  const pid_t child = fork();
  if (child < 0) fail("fork");
  int fd;
  if (child == 0) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail("socket");
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fail("connect");
  } else {
    fd = accept(listener, nullptr, nullptr);
    if (fd < 0) fail("accept");
  }
  setup(fd, kernel_defaults);
  std::vector<char> out(bytes, 1), in(bytes);
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    char token = 0;
    // Start together: a one-byte exchange.
    exact(fd, &token, child == 0);
    exact(fd, &token, child != 0);
    const auto start = std::chrono::steady_clock::now();
    both_ways(fd, out, in);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
  }
  if (child == 0) return 0;
  int status = 0;
  if (waitpid(child, &status, 0) != child) fail("waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ceiling: the sending peer failed (wait status %d)\n", status);
    return 1;
  }
  std::printf("%.3f\n", best);
  return 0;
}
