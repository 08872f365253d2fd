// The job-secret handshake: the pure protocol, and over real sockets a replayed handshake and
// a wrong secret refused while a rightful peer still gets in.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "../../collectives/authenticated.hpp"
#include "../../collectives/handshake.hpp"
#include "coll_test_util.hpp"

namespace primus::coll {
namespace {

using namespace handshake;

const std::string kSecret = "job-secret-for-tests";

std::string hex(const std::array<std::uint8_t, kMacBytes>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

TEST(CollSha256, GivesTheFips180TestVectors) {
  EXPECT_EQ(hex(sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a', given in pieces of 999 bytes that straddle the 64-byte blocks.
  Sha256 hash;
  const std::string piece(999, 'a');
  for (std::size_t done = 0; done < 1000000; done += piece.size())
    hash.update(piece.data(), std::min(piece.size(), 1000000 - done));
  EXPECT_EQ(hex(hash.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CollSha256, AgreesWithOpenSslAtEveryLengthAndPiecing) {
  std::mt19937 random(7);
  for (std::size_t size = 0; size <= 300; ++size) {
    std::string message(size, '\0');
    for (char& c : message)
      c = static_cast<char>(random());
    Sha256Digest expected{};
    SHA256(reinterpret_cast<const unsigned char*>(message.data()), size, expected.data());
    ASSERT_EQ(hex(sha256(message.data(), size)), hex(expected)) << size << " bytes in one piece";
    const std::size_t step = 1 + size % 70;
    Sha256 hash;
    for (std::size_t at = 0; at < size; at += step)
      hash.update(message.data() + at, std::min(step, size - at));
    ASSERT_EQ(hex(hash.finish()), hex(expected)) << size << " bytes in pieces of " << step;
  }
}

TEST(CollSha256, ComparesEveryByte) {
  const std::array<std::uint8_t, 5> a = {1, 2, 3, 4, 5};
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::array<std::uint8_t, 5> b = a;
    b[i] ^= 0x80;
    EXPECT_FALSE(equal_in_constant_time(a.data(), b.data(), a.size())) << "byte " << i;
    EXPECT_TRUE(equal_in_constant_time(a.data(), b.data(), i)) << "the first " << i;
  }
  EXPECT_TRUE(equal_in_constant_time(a.data(), a.data(), a.size()));
}

TEST(CollHandshake, HmacSha256GivesTheRfc4231TestVectors) {
  const std::string hi = "Hi There";
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), hi.data(), hi.size())),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string want = "what do ya want for nothing?";
  EXPECT_EQ(hex(hmac_sha256("Jefe", want.data(), want.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than SHA-256's block is hashed first.
  const std::string large = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), large.data(), large.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(CollHandshake, HmacSha256AgreesWithOpenSslsHmacAtEveryKeyAndMessageLength) {
  std::mt19937 random(42);
  for (std::size_t key_size = 0; key_size <= 130; key_size += 1) {
    for (const std::size_t size : {0, 1, 55, 56, 63, 64, 65, 200}) {
      std::string key(key_size, '\0');
      std::string message(size, '\0');
      for (char& c : key)
        c = static_cast<char>(random());
      for (char& c : message)
        c = static_cast<char>(random());
      std::array<std::uint8_t, kMacBytes> expected{};
      unsigned int length = 0;
      ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                     reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                     expected.data(), &length),
                nullptr);
      ASSERT_EQ(hex(hmac_sha256(key, message.data(), message.size())), hex(expected))
          << "key of " << key_size << " bytes, message of " << size;
    }
  }
}

TEST(CollHandshake, BothSidesProveTheSecretOverEachOthersNonce) {
  const Hello hello = make_hello(Purpose::kPeer, 7, fresh_nonce());
  const auto fields = parse_hello(hello);
  ASSERT_TRUE(fields);
  EXPECT_EQ(fields->rank, 7U);
  EXPECT_EQ(fields->purpose, Purpose::kPeer);
  const Nonce nonce = fresh_nonce();
  const Challenge challenge = make_challenge(kSecret, hello, nonce, 0);
  Proof proof{};
  ASSERT_TRUE(check_challenge(kSecret, hello, challenge, 0, proof));
  EXPECT_TRUE(check_proof(kSecret, hello, nonce, 0, proof));
  // The secret is not on the wire.
  const std::string wire = std::string(hello.begin(), hello.end()) +
                           std::string(challenge.begin(), challenge.end()) +
                           std::string(proof.begin(), proof.end());
  EXPECT_EQ(wire.find(kSecret), std::string::npos);
}

TEST(CollHandshake, AWrongSecretFailsOnBothSides) {
  const Hello hello = make_hello(Purpose::kStore, 1, fresh_nonce());
  const Nonce nonce = fresh_nonce();
  Proof proof{};
  EXPECT_FALSE(check_challenge("other", hello, make_challenge(kSecret, hello, nonce, 0), 0, proof));
  ASSERT_TRUE(check_challenge("other", hello, make_challenge("other", hello, nonce, 0), 0, proof));
  EXPECT_FALSE(check_proof(kSecret, hello, nonce, 0, proof));
}

TEST(CollHandshake, ARecordedProofDoesNotAnswerANewChallenge) {
  const Hello hello = make_hello(Purpose::kStore, 1, fresh_nonce());
  const Nonce first = fresh_nonce();
  Proof recorded{};
  ASSERT_TRUE(
      check_challenge(kSecret, hello, make_challenge(kSecret, hello, first, 0), 0, recorded));
  EXPECT_FALSE(check_proof(kSecret, hello, fresh_nonce(), 0, recorded));
  // Nor does the acceptor's MAC serve as the connector's proof (labels differ).
  const Challenge challenge = make_challenge(kSecret, hello, first, 0);
  Proof reflected{};
  std::copy(challenge.begin() + kNonceBytes, challenge.end(), reflected.begin());
  EXPECT_FALSE(check_proof(kSecret, hello, first, 0, reflected));
}

// The key is bound to the session (job, step, world size) and every MAC to the acceptor's
// rank: a rank of another job or array task (the same secret), of another step or world size,
// or a listener that is not the rank the connector meant, fails the handshake.
TEST(CollHandshake, AnotherSessionOrAnotherAcceptorRankFails) {
  const Session session{"41_1", "0", 4};
  const std::string key = session_key(kSecret, session);
  EXPECT_EQ(key.size(), 32U);
  EXPECT_EQ(key, session_key(kSecret, session));
  for (const Session& other : {Session{"41_2", "0", 4}, Session{"41_1", "1", 4},
                               Session{"41_1", "0", 5}, Session{"41", "_10", 4}}) {
    EXPECT_NE(session_key(kSecret, other), key) << other.job << " " << other.step;
  }
  EXPECT_NE(session_key("another-secret", session), key);
  const Hello hello = make_hello(Purpose::kPeer, 3, fresh_nonce());
  const Nonce nonce = fresh_nonce();
  Proof proof{};
  EXPECT_FALSE(check_challenge(session_key(kSecret, {"41_2", "0", 4}), hello,
                               make_challenge(key, hello, nonce, 1), 1, proof));
  // Rank 2 answers where rank 3 meant rank 1: refused.
  EXPECT_FALSE(check_challenge(key, hello, make_challenge(key, hello, nonce, 2), 1, proof));
  ASSERT_TRUE(check_challenge(key, hello, make_challenge(key, hello, nonce, 1), 1, proof));
  EXPECT_TRUE(check_proof(key, hello, nonce, 1, proof));
  EXPECT_FALSE(check_proof(key, hello, nonce, 2, proof));
}

TEST(CollHandshake, MalformedHellosAreNotHandshakes) {
  Hello hello = make_hello(Purpose::kPeer, 0, fresh_nonce());
  hello[0] ^= 1;
  EXPECT_FALSE(parse_hello(hello));
  hello = make_hello(Purpose::kPeer, 0, fresh_nonce());
  hello[8] = 9;  // purpose
  EXPECT_FALSE(parse_hello(hello));
}

// Over sockets: an eavesdropper's recording of an earlier handshake (hello and proof) is
// replayed to a listener; it is refused and logged, and a rightful connection that follows is
// accepted.
TEST(CollHandshake, AReplayedHandshakeIsRefusedAndTheListenerGoesOn) {
  const net::Listener listener("127.0.0.1", 0);
  std::vector<std::string> log;
  int accepted_rank = -1;
  std::thread acceptor([&] {
    const net::Socket socket = net::accept_authenticated(
        listener, Purpose::kStore, 0, kSecret, net::Clock::now() + std::chrono::seconds(20),
        [](std::uint32_t) { return true; }, [&](const std::string& what) { log.push_back(what); },
        std::chrono::seconds(5));
    accepted_rank = socket.peer_rank();
  });
  // What the eavesdropper recorded: a rightful rank 1's hello and its proof for that session.
  const Hello hello = make_hello(Purpose::kStore, 1, fresh_nonce());
  const Nonce earlier = fresh_nonce();
  Proof recorded{};
  ASSERT_TRUE(
      check_challenge(kSecret, hello, make_challenge(kSecret, hello, earlier, 0), 0, recorded));
  {
    const auto deadline = net::Clock::now() + std::chrono::seconds(5);
    const net::Socket replay =
        net::connect_to("127.0.0.1", listener.port(), deadline, "the listener", -1);
    replay.send_all(hello.data(), hello.size(), deadline);
    Challenge challenge{};
    replay.recv_all(challenge.data(), challenge.size(), deadline);
    replay.send_all(recorded.data(), recorded.size(), deadline);
    std::uint8_t verdict = kAccepted;
    replay.recv_all(&verdict, 1, deadline);
    EXPECT_EQ(verdict, kRefused);
  }
  // A wrong secret, then the rightful peer.
  EXPECT_THROW(
      net::connect_authenticated("127.0.0.1", listener.port(), Purpose::kStore, 2, "wrong",
                                 net::Clock::now() + std::chrono::seconds(5), "the listener", 0),
      PeerFailure);
  const net::Socket good =
      net::connect_authenticated("127.0.0.1", listener.port(), Purpose::kStore, 3, kSecret,
                                 net::Clock::now() + std::chrono::seconds(5), "the listener", 0);
  acceptor.join();
  EXPECT_EQ(accepted_rank, 3);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_NE(log[0].find("failed authentication"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("127.0.0.1:"), std::string::npos) << log[0];
  // The connector with the wrong secret gave up on the listener's challenge and hung up.
  EXPECT_NE(log[1].find("handshake failed"), std::string::npos) << log[1];
  EXPECT_NE(log[1].find("closed the connection"), std::string::npos) << log[1];
}

}  // namespace
}  // namespace primus::coll
