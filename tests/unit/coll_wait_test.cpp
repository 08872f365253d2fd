// How a transfer waits (collectives/socket.cpp): inside a collective, once the peer has been
// heard from, a pause in its stream shorter than net::kHeardSpin is spun through, not slept in
// poll(); outside one, or before the peer's first byte, the plain spin (50 us here) only. A
// sleep shows as a voluntary context switch of the receiving thread (getrusage RUSAGE_THREAD).
#include <gtest/gtest.h>
#include <sys/resource.h>

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

// The pause (300 us) is six times the spin and a seventh of kHeardSpin: a peer's sleep that
// overshoots by more than 1.7 ms on a loaded machine could make a round in the collective
// sleep, and a receiver held off its CPU through the whole pause could make a round outside
// one not sleep; neither may happen in more than a quarter of the rounds.
TEST(CollWait, APauseInAPeersStreamIsSpunThroughInACollectiveAndSleptOutsideOne) {
  set_wait_spin(std::chrono::microseconds(50));
  constexpr int kRounds = 40;
  const auto pause = std::chrono::microseconds(300);
  const int inside = rounds_slept(true, pause, kRounds);
  const int outside = rounds_slept(false, pause, kRounds);
  set_wait_spin(std::chrono::microseconds(0));
  EXPECT_LE(inside, kRounds / 4) << "rounds that slept in a collective";
  EXPECT_GE(outside, kRounds * 3 / 4) << "rounds that slept outside one";
}

// Without the spin (more ranks than CPUs) nothing spins, in a collective or not.
TEST(CollWait, WithoutTheSpinAPauseIsSleptEvenInACollective) {
  set_wait_spin(std::chrono::microseconds(0));
  constexpr int kRounds = 20;
  const int inside = rounds_slept(true, std::chrono::microseconds(300), kRounds);
  EXPECT_GE(inside, kRounds * 3 / 4) << "rounds that slept in a collective without the spin";
}

}  // namespace
}  // namespace primus::coll::net
