// primus-ckpt latest DIR: the newest committed checkpoint that verifies (what a job resumes
// from, fully verified as loading verifies it), and the newer ones skipped, with why.
#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

int run(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const std::filesystem::path root = checked_root(args.operands[0]);
  // Full unless asked otherwise: what a job resumes from must pass what loading it checks.
  const Verify verify = args.has("quick") ? Verify::kQuick : Verify::kFull;
  std::vector<std::string> skipped;
  const std::optional<Loaded> loaded = load_latest(root, verify, &skipped);
  if (args.has("json")) {
    Json document;
    document["root"] = root.string();
    document["path"] = loaded ? Json(loaded->checkpoint.dir().string()) : Json();
    document["step"] = loaded ? Json(loaded->checkpoint.step()) : Json();
    document["skipped"] = skipped;
    print_json(out, document);
  } else {
    for (const std::string& reason : skipped)
      err << "primus-ckpt: skipped " << reason << "\n";
    if (loaded) out << loaded->checkpoint.dir().string() << "\n";
  }
  if (!loaded) {
    // With --json the document says so, and stdout is all a program reading it gets.
    if (!args.has("json")) err << "primus-ckpt: no valid checkpoint in " << root.string() << "\n";
    return kExitFound;
  }
  return kExitOk;
}

}  // namespace

Command latest_command() {
  return {{"latest",
           {{"DIR", "the checkpoint root directory"}},
           {{"full", ""}, {"quick", ""}, {"json", ""}},
           "Usage: primus-ckpt latest DIR [--quick] [--json]\n"
           "\n"
           "Prints the directory of the newest committed checkpoint under DIR that verifies: the\n"
           "one a job resumes from (primus-launch passes it to the ranks as PRIMUS_RESUME). Newer\n"
           "ones that fail the verification are named on stderr with the reason. Exit status 1,\n"
           "and nothing on stdout, when there is none.\n"
           "\n"
           "The verification is the one loading applies: the manifest, the files, their sizes,\n"
           "the rank indexes and every dataset's CRC32C (it reads all the data).\n"
           "\n"
           "  --quick  skip the CRC32C of the data (a bit flipped in place is then not seen)\n"
           "  --full   the default; accepted for older scripts\n"
           "  --json   {\"root\", \"path\", \"step\", \"skipped\"}; path and step are null when\n"
           "           there is none\n"},
          run};
}

}  // namespace primus::ckpt::tool
