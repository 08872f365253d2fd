// How a transfer waits (collectives/socket.cpp): inside a collective, once the peer has been
// heard from, a pause in its stream shorter than net::kHeardSpin is spun through, not slept in
// poll(); outside one, or before the peer's first byte, the plain spin (50 us here) only. A
// sleep shows as a voluntary context switch of the receiving thread (getrusage RUSAGE_THREAD;
// a yield during the spin counts as involuntary).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../../collectives/socket.hpp"

namespace primus::coll::net {
namespace {

long voluntary_switches() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// Rounds in which the receiver slept while the peer paused `pause` between the first byte and
// the rest of each 64 KiB message, the receiver inside a CollectiveScope or not.
int rounds_slept(bool in_collective, std::chrono::microseconds pause, int rounds) {
  const Deadline deadline = Clock::now() + std::chrono::seconds(30);
  const Listener listener("127.0.0.1", 0);
  const std::vector<char> message(64 << 10, 'x');
  std::thread peer([&] {
    const Socket socket = connect_to("127.0.0.1", listener.port(), deadline, "peer", 1);
    char go = 0;
    for (int round = 0; round < rounds; ++round) {
      socket.recv_all(&go, 1, deadline);  // the receiver is ready
      socket.send_all(message.data(), 1, deadline);
      std::this_thread::sleep_for(pause);
      socket.send_all(message.data() + 1, message.size() - 1, deadline);
    }
  });
  const Socket socket = listener.accept(deadline);
  std::vector<char> into(message.size());
  int slept = 0;
  for (int round = 0; round < rounds; ++round) {
    const char go = 1;
    std::optional<CollectiveScope> collective;
    if (in_collective) collective.emplace();
    socket.send_all(&go, 1, deadline);
    socket.recv_all(into.data(), 1, deadline);  // may sleep: the peer has not been heard yet
    const long before = voluntary_switches();
    socket.recv_all(into.data() + 1, into.size() - 1, deadline);
    slept += voluntary_switches() > before ? 1 : 0;
  }
  peer.join();
  EXPECT_EQ(into, message);
  return slept;
}

// The pause (300 us) is six times the spin and a seventh of kHeardSpin. A peer whose sleep
// overshoots by more than 1.7 ms on a loaded machine could make a round sleep: at most a quarter
// may. (Outside a collective the same pause is not slept reliably on a loaded machine: the spin
// yields its CPU at every turn, and a turn given away can outlast the pause; spin_deadline's
// test below covers that case, and the next test that a sleep is seen.)
TEST(CollWait, APauseInAPeersStreamIsSpunThroughInACollective) {
  set_wait_spin(std::chrono::microseconds(50));
  constexpr int kRounds = 40;
  const int inside = rounds_slept(true, std::chrono::microseconds(300), kRounds);
  set_wait_spin(std::chrono::microseconds(0));
  EXPECT_LE(inside, kRounds / 4) << "rounds that slept in a collective";
}

// Until when a wait spins: the spin alone before a peer was heard from (outside a collective,
// or at its start), else until kHeardSpin after the last byte heard, and never less than the
// spin.
TEST(CollWait, AWaitSpinsUntilKHeardSpinAfterThePeerWasLastHeard) {
  const Deadline now = Clock::now();
  const std::chrono::nanoseconds spin = std::chrono::microseconds(50);
  EXPECT_EQ(spin_deadline(now, spin, Deadline{}), now + spin);
  const Deadline heard = now - std::chrono::microseconds(300);
  EXPECT_EQ(spin_deadline(now, spin, heard), heard + kHeardSpin);
  EXPECT_EQ(spin_deadline(now, spin, now - kHeardSpin - std::chrono::milliseconds(1)), now + spin);
  EXPECT_EQ(spin_deadline(now, std::chrono::milliseconds(5), heard),
            now + std::chrono::milliseconds(5));
}

// Without the spin (more ranks than CPUs) nothing spins, in a collective or not.
TEST(CollWait, WithoutTheSpinAPauseIsSleptEvenInACollective) {
  set_wait_spin(std::chrono::microseconds(0));
  constexpr int kRounds = 20;
  const int inside = rounds_slept(true, std::chrono::microseconds(300), kRounds);
  EXPECT_GE(inside, kRounds * 3 / 4) << "rounds that slept in a collective without the spin";
}

// Both ends of a connection have the fixed send buffer (socket.hpp's kSendBufferBytes, which
// Linux reports doubled), and one non-blocking send hands a 2-rank 1 MiB allreduce's whole
// 512 KiB block to the kernel while the peer reads nothing (with 256 KiB it took all but 432
// bytes of it, and the rest waited for the peer).
TEST(CollWait, OneSendTakesAWhole512KiBBlockBeforeThePeerReads) {
  const Deadline deadline = Clock::now() + std::chrono::seconds(30);
  const Listener listener("127.0.0.1", 0);
  const Socket connected = connect_to("127.0.0.1", listener.port(), deadline, "peer", 1);
  const Socket accepted = listener.accept(deadline);
  for (const Socket* socket : {&connected, &accepted}) {
    int bytes = 0;
    socklen_t length = sizeof bytes;
    ASSERT_EQ(::getsockopt(socket->fd(), SOL_SOCKET, SO_SNDBUF, &bytes, &length), 0);
    EXPECT_EQ(bytes, 2 * kSendBufferBytes);
  }
  const std::vector<char> block(512 << 10, 'b');
  const ssize_t sent = ::send(connected.fd(), block.data(), block.size(), MSG_NOSIGNAL);
  EXPECT_EQ(sent, static_cast<ssize_t>(block.size())) << "one send took only part of the block";
  const std::size_t rest = sent > 0 ? block.size() - static_cast<std::size_t>(sent) : block.size();
  if (rest > 0) connected.send_all(block.data() + block.size() - rest, rest, deadline);
  std::vector<char> into(block.size());
  accepted.recv_all(into.data(), into.size(), deadline);
  EXPECT_EQ(into, block);
}

}  // namespace
}  // namespace primus::coll::net
