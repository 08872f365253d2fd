// The record formats libprimus-data knows, one row each (format_ops.hpp).
#include "format_ops.hpp"

#include <algorithm>
#include <iterator>

#include "primus/common/error.hpp"

namespace primus::data {
namespace {

const FormatOps* const kFormats[] = {&kLinesFormat, &kFixedFormat, &kTfrecordFormat};

}  // namespace

const FormatOps& format_ops(FormatKind kind) {
  const auto* const found =
      std::find_if(std::begin(kFormats), std::end(kFormats),
                   [kind](const FormatOps* ops) { return ops->kind == kind; });
  if (found != std::end(kFormats)) return **found;
  throw Error("record format " + std::to_string(static_cast<std::uint32_t>(kind)) +
              " is not one this build of Primus knows");
}

std::uint64_t fixed_record_size(const RecordFormat& format) {
  return format_ops(format.kind).indexed() ? 0 : format.record_size;
}

}  // namespace primus::data
