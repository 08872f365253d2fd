// Writing JSON text without a JSON library (common/ depends on the standard library only).
#pragma once

#include <string>
#include <string_view>

namespace primus {

// Appends `text` as a JSON string literal, quotes included, with every character that JSON
// requires escaped (", \, control characters) and U+FFFD (\ufffd) for each byte that is not part
// of valid UTF-8, so that the text is always JSON that a strict parser reads.
void append_json_string(std::string& out, std::string_view text);

// The same as a new string.
std::string json_quote(std::string_view text);

}  // namespace primus
