// What every child of primus-launch and of its task wrapper gets between fork and exec, written
// once (OS adapter): a rank, srun, and the commands the launcher runs (scontrol, primus-ckpt,
// primus-data). The stop signals back at their defaults and unblocked (unless the child is to
// keep them blocked), the open-file limit the launcher was given, standard input from /dev/null
// (or a pipe: a rejoin's standby),
// and, where asked, a process group of its own and death with its parent.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace primus::launch {

// The signals primus-launch and its task wrapper read instead of dying of them; a child starts
// with each at its default and nothing blocked.
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

// The signal a stop that reached primus-launch as `received` reaches the ranks with: itself where
// the ranks take it as a stop (SIGTERM, or `warning`, their --primus-preempt-signal), else
// SIGTERM. Forwarded as it came, a Ctrl-C's SIGINT ended every rank's Python at once
// (KeyboardInterrupt) instead of a save, and a SIGHUP or the other user signal killed them.
int signal_for_ranks(int received, int warning);
// "USR2", "SIGUSR2", ... (--primus-preempt-signal's values) as a number; SIGUSR2 for anything
// else (the option's validator refused it already).
int signal_number(std::string_view name);

struct ChildSetup {
  bool own_group = false;        // setpgid(0, 0): the launcher signals the child's group
  bool die_with_parent = false;  // PR_SET_PDEATHSIG SIGKILL
  pid_t parent = 0;              // getpid() before the fork, with die_with_parent
  // Keep the caller's blocked signals blocked (a command that a stop signal to every process of
  // the job must not end halfway: run_command's `shielded`).
  bool keep_signal_mask = false;
  int output = -1;  // dup'ed onto standard output and error; -1: inherited
  int input = -1;   // dup'ed onto standard input; -1: /dev/null
  // SCHED_IDLE: the child runs only where a CPU would otherwise idle (run_command's `idle`).
  bool idle = false;
};

// In the child, right after fork or vfork (async-signal-safe calls only, nothing written but
// the child's own kernel state); _exit(1) when the parent is already gone (with
// die_with_parent).
void setup_child(const ChildSetup& setup);

// A program's arguments and environment as exec takes them, made before the fork: nothing is
// allocated in the child of a process that has threads.
class ExecArgs {
 public:
  // `env` "NAME=value" entries; none: the caller's environment (execvp, PATH searched).
  ExecArgs(std::string path, std::vector<std::string> argv,
           std::optional<std::vector<std::string>> env);
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  // In the child: execve (or execvp); when that fails, says so on standard error
  // ("primus-launch: cannot execute PATH: why") and ends the child with 127 (not found) or 126.
  [[noreturn]] void exec() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> argv_, env_;
  bool own_env_ = false;
  std::vector<char*> argv_p_, env_p_;
};

// Starts `exec` in a child set up as `setup` says, with vfork: the child borrows the caller's
// memory until it execs, instead of a copy of its page tables that the first writes on either
// side then fault apart (a rank's start 2.65 -> 2.37 ms; srun's, from a launcher that has
// started its threads, 3.3 ms under strace for a fork). The child does only what setup_child and
// exec do, with everything built before (ExecArgs). Returns the child's pid, or -1 with errno.
pid_t spawn_child(const ChildSetup& setup, const ExecArgs& exec);

// The launcher holds a descriptor or two per rank (control connections, output pipes): it
// raises its soft limit on open files to the hard one, and gives a child the limit it was given
// itself again (restore_open_file_limit, in setup_child).
void raise_open_file_limit();
void restore_open_file_limit();

// Writes everything, retrying on EINTR; false when the rest cannot be written (a closed pipe or
// terminal, a full disk), which most callers ignore: such a failure does not stop the job.
bool write_all(int fd, const char* data, std::size_t size);

}  // namespace primus::launch
