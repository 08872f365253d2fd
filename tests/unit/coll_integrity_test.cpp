// --primus-coll-integrity: the frame tags (pure), the keys of a connection, and over real
// sockets a man in the middle between two authenticated ends who flips a byte, replays a frame
// or damages a tag after the handshake: without integrity the altered data is taken as sent;
// with it, the receiver refuses it. Ends of different settings never connect.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "../../collectives/authenticated.hpp"
#include "../../collectives/handshake.hpp"
#include "../../collectives/integrity.hpp"

namespace primus::coll {
namespace {

using integrity::kFrameBytes;
using integrity::kTagBytes;
using integrity::Mac;

integrity::Key key_of(std::uint8_t seed) {
  integrity::Key key{};
  for (std::size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<std::uint8_t>(seed + 13 * i);
  return key;
}

std::vector<std::uint8_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint8_t> data(bytes);
  std::uint32_t x = seed * 2654435761U + 1;
  for (auto& b : data) {
    x = x * 1664525U + 1013904223U;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return data;
}

TEST(CollIntegrity, TheReceiverAcceptsTheSendersFramesInOrder) {
  Mac sender(key_of(1));
  Mac receiver(key_of(1));
  const auto data = pattern(3 * kFrameBytes + 7, 1);
  for (std::size_t at = 0; at < data.size(); at += kFrameBytes) {
    const std::size_t bytes = std::min(kFrameBytes, data.size() - at);
    const integrity::Tag tag = sender.tag(data.data() + at, bytes);
    EXPECT_TRUE(receiver.check(data.data() + at, bytes, tag)) << "frame at " << at;
  }
  EXPECT_EQ(sender.frames(), 4U);
  EXPECT_EQ(receiver.frames(), 4U);
  // An empty frame has a tag too.
  EXPECT_TRUE(receiver.check(nullptr, 0, sender.tag(nullptr, 0)));
}

TEST(CollIntegrity, AnAlteredFrameAWrongKeyOrAnotherPositionFailsTheCheck) {
  const auto data = pattern(1000, 2);
  Mac sender(key_of(1));
  const integrity::Tag first = sender.tag(data.data(), data.size());
  const integrity::Tag second = sender.tag(data.data(), data.size());
  EXPECT_NE(first, second) << "the same frame at another position must have another tag";
  for (std::size_t bit = 0; bit < 8 * data.size(); bit += 997) {
    auto altered = data;
    altered[bit / 8] ^= static_cast<std::uint8_t>(1U << (bit % 8));
    Mac receiver(key_of(1));
    EXPECT_FALSE(receiver.check(altered.data(), altered.size(), first)) << "bit " << bit;
  }
  {
    Mac receiver(key_of(2));  // another connection's or direction's key
    EXPECT_FALSE(receiver.check(data.data(), data.size(), first));
  }
  {
    Mac receiver(key_of(1));  // a replay of frame 0 where frame 1 is due
    ASSERT_TRUE(receiver.check(data.data(), data.size(), first));
    EXPECT_FALSE(receiver.check(data.data(), data.size(), first));
  }
  {
    Mac receiver(key_of(1));  // a truncated frame
    EXPECT_FALSE(receiver.check(data.data(), data.size() - 1, first));
  }
  for (std::size_t i = 0; i < kTagBytes; ++i) {
    Mac receiver(key_of(1));
    integrity::Tag damaged = first;
    damaged[i] ^= 0x40;
    EXPECT_FALSE(receiver.check(data.data(), data.size(), damaged)) << "tag byte " << i;
  }
}

TEST(CollIntegrity, TheTwoDirectionsAndEveryConnectionHaveKeysOfTheirOwn) {
  const std::string key = handshake::session_key("secret", {"7", "0", 2});
  const auto hello =
      handshake::make_hello(handshake::Purpose::kPeer, 1, handshake::fresh_nonce(), true);
  const auto nonce = handshake::fresh_nonce();
  const auto keys = handshake::connection_keys(key, hello, nonce, 0);
  EXPECT_NE(keys.to_acceptor, keys.to_connector);
  const auto again = handshake::connection_keys(key, hello, nonce, 0);
  EXPECT_EQ(keys.to_acceptor, again.to_acceptor);  // both ends compute the same
  EXPECT_EQ(keys.to_connector, again.to_connector);
  EXPECT_NE(handshake::connection_keys(key, hello, handshake::fresh_nonce(), 0).to_acceptor,
            keys.to_acceptor);
  const auto other_hello =
      handshake::make_hello(handshake::Purpose::kPeer, 1, handshake::fresh_nonce(), true);
  EXPECT_NE(handshake::connection_keys(key, other_hello, nonce, 0).to_acceptor, keys.to_acceptor);
  EXPECT_NE(handshake::connection_keys(key, hello, nonce, 3).to_acceptor, keys.to_acceptor);
  EXPECT_NE(
      handshake::connection_keys(handshake::session_key("secret", {"8", "0", 2}), hello, nonce, 0)
          .to_acceptor,
      keys.to_acceptor);
}

TEST(CollIntegrity, TheHelloCarriesTheSettingAndUnknownFlagsAreRefused) {
  const auto nonce = handshake::fresh_nonce();
  const auto with = handshake::make_hello(handshake::Purpose::kStore, 2, nonce, true);
  const auto without = handshake::make_hello(handshake::Purpose::kStore, 2, nonce, false);
  ASSERT_TRUE(handshake::parse_hello(with));
  ASSERT_TRUE(handshake::parse_hello(without));
  EXPECT_TRUE(handshake::parse_hello(with)->integrity);
  EXPECT_FALSE(handshake::parse_hello(without)->integrity);
  auto unknown = with;
  unknown[12] |= 2;  // flags, bit 1
  EXPECT_FALSE(handshake::parse_hello(unknown));
}

// ---- over sockets, with a man in the middle --------------------------------------------------

const std::string& session() {
  static const std::string key = handshake::session_key("job-secret-for-tests", {"7", "0", 2});
  return key;
}
constexpr auto kTime = std::chrono::seconds(20);

// The bytes the man in the middle forwards from the connector: forward(offset, seen) is the byte
// to send at `offset` of the stream, where seen holds every byte received so far (seen[offset]
// included).
using Rewrite = std::function<std::uint8_t(std::size_t, const std::vector<std::uint8_t>&)>;

void relay_once(const net::Listener& front, std::uint16_t to_port, const Rewrite& rewrite);

// Relays one connection between the connector and `to_port`, both ways, rewriting the
// connector's stream; ends when either side closes or fails (an end that refused the data
// resets its connection: the relay just stops).
void relay(const net::Listener& front, std::uint16_t to_port, const Rewrite& rewrite) {
  try {
    relay_once(front, to_port, rewrite);
  } catch (const std::exception&) {
  }
}

void relay_once(const net::Listener& front, std::uint16_t to_port, const Rewrite& rewrite) {
  const auto deadline = net::Clock::now() + kTime;
  const net::Socket client = front.accept(deadline);
  const net::Socket server = net::connect_to("127.0.0.1", to_port, deadline, "the acceptor", 0);
  std::vector<std::uint8_t> seen;
  for (;;) {
    pollfd fds[2] = {{client.fd(), POLLIN, 0}, {server.fd(), POLLIN, 0}};
    if (::poll(fds, 2, net::poll_timeout(deadline)) <= 0) return;
    std::uint8_t buffer[65536];
    if (fds[0].revents != 0) {
      const ssize_t n = ::recv(client.fd(), buffer, sizeof buffer, 0);
      if (n <= 0 && !(n < 0 && errno == EAGAIN)) return;
      if (n > 0) {
        const std::size_t from = seen.size();
        seen.insert(seen.end(), buffer, buffer + n);
        std::vector<std::uint8_t> out(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = rewrite(from + i, seen);
        server.send_all(out.data(), out.size(), deadline);
      }
    }
    if (fds[1].revents != 0) {
      const ssize_t n = ::recv(server.fd(), buffer, sizeof buffer, 0);
      if (n <= 0 && !(n < 0 && errno == EAGAIN)) return;
      if (n > 0) client.send_all(buffer, static_cast<std::size_t>(n), deadline);
    }
  }
}

struct Outcome {
  std::vector<std::uint8_t> received;  // by the acceptor
  std::string acceptor_error;          // what its receive threw
  std::string connector_error;         // what its handshake or send threw
  std::vector<std::string> log;        // the acceptor's refusals
  bool reply_intact = false;           // the acceptor's answer reached the connector unaltered
};

// The connector (rank 1) sends `message` to the acceptor (rank 0) through the man in the
// middle; then the acceptor answers with a message of its own, unaltered on its way back.
Outcome send_through(const std::vector<std::uint8_t>& message, bool connector_integrity,
                     bool acceptor_integrity, const Rewrite& rewrite,
                     std::chrono::milliseconds accept_time = kTime) {
  Outcome outcome;
  const net::Listener listener("127.0.0.1", 0);
  const net::Listener front("127.0.0.1", 0);
  const auto reply = pattern(kFrameBytes + 3, 9);
  std::thread acceptor([&] {
    try {
      const auto deadline = net::Clock::now() + accept_time;
      const net::Socket socket = net::accept_authenticated(
          listener, handshake::Purpose::kPeer, 0, session(), deadline,
          [](std::uint32_t r) { return r == 1; },
          [&](const std::string& what) { outcome.log.push_back(what); }, std::chrono::seconds(5),
          acceptor_integrity);
      outcome.received.resize(message.size());
      socket.recv_all(outcome.received.data(), message.size(), deadline);
      socket.send_all(reply.data(), reply.size(), deadline);
    } catch (const std::exception& e) {
      outcome.acceptor_error = e.what();
    }
  });
  std::thread middle([&] { relay(front, listener.port(), rewrite); });
  try {
    const auto deadline = net::Clock::now() + kTime;
    const net::Socket socket =
        net::connect_authenticated("127.0.0.1", front.port(), handshake::Purpose::kPeer, 1,
                                   session(), deadline, "rank 0", 0, connector_integrity);
    socket.send_all(message.data(), message.size(), deadline);
    std::vector<std::uint8_t> answer(reply.size());
    socket.recv_all(answer.data(), answer.size(), deadline);
    outcome.reply_intact = answer == reply;
  } catch (const std::exception& e) {
    outcome.connector_error = e.what();
  }
  acceptor.join();
  middle.join();
  return outcome;
}

// What the connector sends before its first message: the hello and the proof.
constexpr std::size_t kHandshakeBytes = handshake::kHelloBytes + handshake::kProofBytes;

Rewrite unchanged() {
  return [](std::size_t at, const std::vector<std::uint8_t>& seen) { return seen[at]; };
}

Rewrite flip_at(std::size_t offset) {
  return [offset](std::size_t at, const std::vector<std::uint8_t>& seen) {
    return static_cast<std::uint8_t>(at == offset ? seen[at] ^ 0x01 : seen[at]);
  };
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CollIntegrity, WithoutItAFlippedByteIsTakenAsSent) {
  const auto message = pattern(2 * kFrameBytes + 100, 3);
  const Outcome outcome = send_through(message, false, false, flip_at(kHandshakeBytes + 12345));
  EXPECT_EQ(outcome.acceptor_error, "");
  ASSERT_EQ(outcome.received.size(), message.size());
  EXPECT_NE(outcome.received, message) << "the man in the middle did not alter the data";
  EXPECT_EQ(outcome.received[12345], message[12345] ^ 0x01);
}

TEST(CollIntegrity, WithItTheDataArrivesIntactBothWays) {
  const auto message = pattern(2 * kFrameBytes + 100, 4);
  const Outcome outcome = send_through(message, true, true, unchanged());
  EXPECT_EQ(outcome.acceptor_error, "");
  EXPECT_EQ(outcome.connector_error, "");
  EXPECT_EQ(outcome.received, message);
  EXPECT_TRUE(outcome.reply_intact);
}

TEST(CollIntegrity, WithItAFlippedByteOfDataOrTagIsRefused) {
  const auto message = pattern(2 * kFrameBytes + 100, 5);
  // In the first frame, in its tag, in the last (short) frame.
  for (const std::size_t offset : {kHandshakeBytes + 12345, kHandshakeBytes + kFrameBytes + 3,
                                   kHandshakeBytes + 2 * (kFrameBytes + kTagBytes) + 50}) {
    const Outcome outcome = send_through(message, true, true, flip_at(offset));
    EXPECT_TRUE(mentions(outcome.acceptor_error, "failed the integrity check"))
        << "offset " << offset << ": " << outcome.acceptor_error;
    EXPECT_TRUE(mentions(outcome.acceptor_error, "rank 1")) << outcome.acceptor_error;
  }
}

TEST(CollIntegrity, WithItAReplayedFrameIsRefused) {
  const auto message = pattern(2 * kFrameBytes + 100, 6);
  // The second frame and its tag are replaced by the first's: each is a genuine frame with its
  // genuine tag, in the wrong place.
  const std::size_t unit = kFrameBytes + kTagBytes;
  const Rewrite replay = [unit](std::size_t at, const std::vector<std::uint8_t>& seen) {
    const bool second = at >= kHandshakeBytes + unit && at < kHandshakeBytes + 2 * unit;
    return second ? seen[at - unit] : seen[at];
  };
  const Outcome outcome = send_through(message, true, true, replay);
  EXPECT_TRUE(mentions(outcome.acceptor_error, "failed the integrity check"))
      << outcome.acceptor_error;
  EXPECT_TRUE(mentions(outcome.acceptor_error, "frame 1")) << outcome.acceptor_error;
}

TEST(CollIntegrity, EndsOfDifferentSettingsNeverConnect) {
  const auto message = pattern(100, 7);
  for (const bool connector : {true, false}) {
    // The acceptor gives up soon: nobody else will come.
    const Outcome outcome =
        send_through(message, connector, !connector, unchanged(), std::chrono::seconds(1));
    EXPECT_TRUE(mentions(outcome.connector_error, "--primus-coll-integrity"))
        << outcome.connector_error;
    ASSERT_FALSE(outcome.log.empty());
    EXPECT_TRUE(mentions(outcome.log[0], connector ? "asks for --primus-coll-integrity"
                                                   : "runs without --primus-coll-integrity"))
        << outcome.log[0];
  }
}

}  // namespace
}  // namespace primus::coll
