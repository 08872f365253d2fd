// primus-ckpt's output: common/cli/render.hpp's tables, sizes, JSON and terminal-safe text under
// the tool's names, and the shapes of tensors.
#pragma once

#include <string>

#include "../../common/cli/render.hpp"
#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt::tool {

using cli::bytes_column;
using cli::format_double;
using cli::human_bytes;
using cli::Json;
using cli::print_json;
using cli::printable;
using cli::quote_truncated;
using cli::run_printing;
using cli::Table;

// "[6, 3]"; a scalar is "[]".
std::string format_shape(const Shape& shape);
Json shape_json(const Shape& shape);

}  // namespace primus::ckpt::tool
