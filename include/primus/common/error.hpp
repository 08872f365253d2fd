// Error types shared by every Primus component.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace primus {

// Any error that Primus reports to a user: the message is complete and ready to print
// (it names the option, variable or file concerned and what was expected).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A syntax error in a text value (a hostlist, a tasks-per-node string, a port list).
// position() is the 0-based offset in the text where parsing stopped.
class ParseError : public Error {
 public:
  ParseError(const std::string& message, std::size_t position)
      : Error(message), position_(position) {}
  std::size_t position() const noexcept { return position_; }

 private:
  std::size_t position_;
};

}  // namespace primus
