// The GIL released around a blocking call, safe at interpreter exit: the one guard every Primus
// extension uses instead of pybind11::gil_scoped_release.
//
// Why: Python 3.11 ends a thread that asks for the GIL back once the interpreter is finalizing
// with pthread_exit, whose forced unwind through gil_scoped_release's destructor (implicitly
// noexcept) calls std::terminate: "terminate called without an active exception" and SIGABRT
// in a process that had finished its work. Seen in a rank's core (issue 39): the
// primus-checkpoint thread returned from RankWriter.add during Py_FinalizeEx. Any daemon thread
// inside a blocking Primus call when the main thread ends can hit it (a background save, the
// gradient all-reduce, a data read).
//
// What: when the call returns after the interpreter began finalizing, a thread other than the
// main one parks for good instead of asking for the GIL (as Python 3.14 itself does); the
// process is ending and takes the thread with it. The main thread, which runs the
// finalization, always takes the GIL back. Between the check and the request the interpreter
// may still begin finalizing; the destructor then lets pthread_exit's unwind through (it is
// not noexcept), so the thread ends as Python intends rather than aborting the process.
#pragma once

#include <pybind11/pybind11.h>
#include <unistd.h>

namespace primus::python {

// The main thread's identity (Python's threading.main_thread()), noted by each extension's
// module initialization with note_main_thread().
inline unsigned long& main_thread_id() {
  static unsigned long id = 0;
  return id;
}

inline void note_main_thread() {
  main_thread_id() = pybind11::module_::import("threading")
                         .attr("main_thread")()
                         .attr("ident")
                         .cast<unsigned long>();
}

inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

class ReleasedGil {
 public:
  ReleasedGil() : state_(PyEval_SaveThread()) {}
  ReleasedGil(const ReleasedGil&) = delete;
  ReleasedGil& operator=(const ReleasedGil&) = delete;

  // NOLINTNEXTLINE(bugprone-exception-escape): pthread_exit's forced unwind must pass through
  ~ReleasedGil() noexcept(false) {
    if (interpreter_finalizing() && PyThread_get_thread_ident() != main_thread_id()) {
      for (;;) {
        pause();  // parked until the process exits
      }
    }
    PyEval_RestoreThread(state_);
  }

 private:
  PyThreadState* state_;
};

}  // namespace primus::python
