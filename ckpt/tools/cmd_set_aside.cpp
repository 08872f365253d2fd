// primus-ckpt set-aside DIR: moves a checkpoint root aside as DIR.old-<UTC time>, keeping it
// (--primus-fresh: primus-launch runs this before a job's first start).
#include "commands.hpp"
#include "primus/ckpt/store.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

int run(const ParsedArgs& args, std::ostream& out, std::ostream& /*err*/) {
  const std::string& root = args.operands[0];
  const auto moved = set_aside(root);
  if (args.has("json")) {
    Json document;
    document["root"] = root;
    document["moved_to"] = moved ? Json(moved->string()) : Json(nullptr);
    print_json(out, document);
    return kExitOk;
  }
  if (moved) {
    out << "moved " << root << " aside to " << moved->string() << "\n";
  } else {
    out << "nothing to set aside: " << root << " does not exist\n";
  }
  return kExitOk;
}

}  // namespace

Command set_aside_command() {
  return {{"set-aside",
           {{"DIR", "the checkpoint root directory"}},
           {{"json", ""}},
           "Usage: primus-ckpt set-aside DIR [--json]\n"
           "\n"
           "Moves the checkpoint root DIR aside, renamed in its directory to\n"
           "DIR.old-YYYYMMDDTHHMMSSZ (-2, -3, ... when that name is taken), so that a fresh run\n"
           "starts with no checkpoint and the earlier ones are kept. What --primus-fresh does\n"
           "before a job's first start. Nothing to do (exit 0) when DIR does not exist.\n"
           "\n"
           "  --json      one JSON document: root, moved_to (null when nothing was moved)\n"},
          run};
}

}  // namespace primus::ckpt::tool
