// Message authentication after the handshake (--primus-coll-integrity): every frame of at most
// kFrameBytes of a connection's stream is followed by a 16-byte tag, GMAC (AES-256-GCM over the
// frame as additional data, nothing encrypted) under a key of that connection and direction,
// with the frame's sequence number as the IV. A frame that was altered, dropped, replayed,
// reordered or moved to another connection fails its check. The data is not hidden: it is only
// authenticated. This file is pure: the MAC itself is an Engine, AES-256-GCM from OpenSSL
// (integrity_gcm.cpp), which only libprimus-coll links and registers when it loads, so that the
// programs that share the control channel's code (primus-task, primus-launch), and never seal a
// connection, do not load libcrypto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace primus::coll::integrity {

constexpr std::size_t kKeyBytes = 32;
constexpr std::size_t kTagBytes = 16;
// Small enough that the ring reduces verified data while the rest is in flight (its segments
// are 256 KiB), large enough that a frame's fixed cost (a 16-byte tag, an IV) stays below 0.1%.
constexpr std::size_t kFrameBytes = std::size_t{64} << 10;

using Key = std::array<std::uint8_t, kKeyBytes>;
using Tag = std::array<std::uint8_t, kTagBytes>;

// Computes a frame's tag under the key it was made with, with the given 12-byte IV.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual Tag tag(const std::uint8_t* iv, const void* frame, std::size_t bytes) = 0;
};

using EngineFactory = std::unique_ptr<Engine> (*)(const Key& key);

// Installs the engine every later Mac uses (integrity_gcm.cpp's, at load). Without one, making
// a Mac throws: --primus-coll-integrity needs libprimus-coll.
void set_engine(EngineFactory factory) noexcept;

// One direction of one connection: the tags of its frames, in order. Both ends of a direction
// hold a Mac of the same key; the sender calls tag(), the receiver check(), frame by frame.
class Mac {
 public:
  explicit Mac(const Key& key);
  ~Mac();
  Mac(Mac&&) noexcept;
  Mac& operator=(Mac&&) noexcept;
  Mac(const Mac&) = delete;
  Mac& operator=(const Mac&) = delete;

  // The tag of the next frame (its sequence number is the number of frames before it).
  Tag tag(const void* frame, std::size_t bytes);
  // Whether `tag` is the next frame's tag (compared in constant time). The sequence advances
  // either way: a connection whose check failed is not used again.
  bool check(const void* frame, std::size_t bytes, const Tag& tag);
  std::uint64_t frames() const { return sequence_; }

 private:
  Tag compute(const void* frame, std::size_t bytes);

  std::unique_ptr<Engine> engine_;
  std::uint64_t sequence_ = 0;
};

}  // namespace primus::coll::integrity
