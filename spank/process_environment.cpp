#include "process_environment.hpp"

#include <cstdlib>

#include "primus/common/error.hpp"

extern char** environ;

namespace primus::spank {

Environment primus_variables_of_this_process() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::size_t eq = text.find('=');
    if (eq != std::string::npos && text.compare(0, 7, "PRIMUS_") == 0) {
      env.emplace(text.substr(0, eq), text.substr(eq + 1));
    }
  }
  return env;
}

void set_process_variable(const std::string& name, const std::string& value) {
  if (setenv(name.c_str(), value.c_str(), 1) != 0) throw Error("cannot set " + name);
}

}  // namespace primus::spank
