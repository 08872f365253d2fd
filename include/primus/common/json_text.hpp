// Writing JSON text without a JSON library (common/ depends on the standard library only).
#pragma once

#include <string>
#include <string_view>

namespace primus {

// `text` as a JSON string literal, quotes included, with every character that JSON requires
// escaped (", \, control characters).
std::string json_quote(std::string_view text);

}  // namespace primus
