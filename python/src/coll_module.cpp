// primus._coll: libprimus-coll for Python (the `primus.comm` module builds on it). Buffers
// cross without copies; every collective runs with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "buffer_check.hpp"
#include "primus/collectives.hpp"
#include "primus/collectives/control.hpp"
#include "released_gil.hpp"

namespace py = pybind11;
using primus::coll::Communicator;
using primus::coll::DType;
using primus::coll::ReduceOp;
using primus::python::ReleasedGil;

namespace {

DType dtype_named(const std::string& name) {
  const auto dtype = primus::coll::parse_dtype(name);
  if (!dtype) throw py::value_error("unknown dtype '" + name + "'");
  return *dtype;
}

ReduceOp op_named(const std::string& name) {
  const auto op = primus::coll::parse_reduce_op(name);
  if (!op) throw py::value_error("op '" + name + "': expected sum, max, min or prod");
  return *op;
}

// A C-contiguous buffer of `dtype` items; returns its pointer and element count.
std::pair<void*, std::size_t> contiguous(const py::buffer& buffer, DType dtype, bool writable,
                                         const char* what) {
  const py::buffer_info info = primus::python::contiguous_buffer(
      buffer, primus::coll::dtype_size(dtype), std::string(primus::coll::to_string(dtype)),
      writable, what);
  return {info.ptr, static_cast<std::size_t>(info.size)};
}

}  // namespace

PYBIND11_MODULE(_coll, m) {
  primus::python::note_main_thread();
  m.doc() = "libprimus-coll: communicators over TCP, bootstrapped through PMIx or a TCP store";
  auto base = py::register_exception<primus::coll::CollectiveError>(m, "CollectiveError",
                                                                    PyExc_RuntimeError);
  // PeerFailure carries the rank whose connection was lost (`peer`, -1 when none is known), so
  // that a rank's report can name the root cause without parsing a message.
  static py::exception<primus::coll::PeerFailure> peer_failure(m, "PeerFailure", base.ptr());
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const primus::coll::PeerFailure& e) {
      py::object error = py::reinterpret_borrow<py::object>(peer_failure.ptr())(e.what());
      error.attr("peer") = e.peer();
      PyErr_SetObject(peer_failure.ptr(), error.ptr());
    }
  });

  py::class_<Communicator>(m, "Communicator")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("backend", &Communicator::backend)
      .def_property_readonly("integrity", &Communicator::integrity)
      .def(
          "allreduce",
          [](Communicator& c, const py::buffer& data, const std::string& dtype,
             const std::string& op) {
            const DType t = dtype_named(dtype);
            const auto [ptr, count] = contiguous(data, t, true, "allreduce buffer");
            const ReduceOp o = op_named(op);
            ReleasedGil release;
            c.allreduce(ptr, count, t, o);
          },
          py::arg("data"), py::arg("dtype"), py::arg("op"))
      .def(
          "broadcast",
          [](Communicator& c, const py::buffer& data, const std::string& dtype, int root) {
            const DType t = dtype_named(dtype);
            const auto [ptr, count] = contiguous(data, t, true, "broadcast buffer");
            ReleasedGil release;
            c.broadcast(ptr, count, t, root);
          },
          py::arg("data"), py::arg("dtype"), py::arg("root"))
      .def(
          "allgather",
          [](Communicator& c, const py::buffer& send, const py::buffer& recv,
             const std::string& dtype) {
            const DType t = dtype_named(dtype);
            const auto [in, count] = contiguous(send, t, false, "allgather input");
            const auto [out, total] = contiguous(recv, t, true, "allgather output");
            if (total != count * static_cast<std::size_t>(c.size())) {
              throw py::value_error("allgather output: expected size * " + std::to_string(count) +
                                    " elements, got " + std::to_string(total));
            }
            ReleasedGil release;
            c.allgather(in, out, count, t);
          },
          py::arg("send"), py::arg("recv"), py::arg("dtype"))
      .def(
          "reduce_scatter",
          [](Communicator& c, const py::buffer& send, const py::buffer& recv,
             const std::string& dtype, const std::string& op) {
            const DType t = dtype_named(dtype);
            const auto [in, total] = contiguous(send, t, false, "reduce_scatter input");
            const auto [out, count] = contiguous(recv, t, true, "reduce_scatter output");
            if (total != count * static_cast<std::size_t>(c.size())) {
              throw py::value_error("reduce_scatter input: expected size * " +
                                    std::to_string(count) + " elements, got " +
                                    std::to_string(total));
            }
            const ReduceOp o = op_named(op);
            ReleasedGil release;
            c.reduce_scatter(in, out, count, t, o);
          },
          py::arg("send"), py::arg("recv"), py::arg("dtype"), py::arg("op"))
      .def(
          "send",
          [](Communicator& c, const py::buffer& data, const std::string& dtype, int peer) {
            const DType t = dtype_named(dtype);
            const auto [ptr, count] = contiguous(data, t, false, "send buffer");
            ReleasedGil release;
            c.send(ptr, count, t, peer);
          },
          py::arg("data"), py::arg("dtype"), py::arg("peer"))
      .def(
          "recv",
          [](Communicator& c, const py::buffer& data, const std::string& dtype, int peer) {
            const DType t = dtype_named(dtype);
            const auto [ptr, count] = contiguous(data, t, true, "recv buffer");
            ReleasedGil release;
            c.recv(ptr, count, t, peer);
          },
          py::arg("data"), py::arg("dtype"), py::arg("peer"))
      .def("barrier",
           [](Communicator& c) {
             ReleasedGil release;
             c.barrier();
           })
      // Never blocks (an atomic flag and shutdown() of the connections): safe to call while
      // another thread waits in a collective, which has released the GIL.
      .def(
          "abort", [](Communicator& c, const std::string& reason) { c.abort(reason); },
          py::arg("reason"))
      .def_property_readonly("aborted", &Communicator::aborted);

  m.def(
      "connect",
      [](double timeout_seconds, std::optional<std::string> secret) {
        primus::coll::Options options;
        if (timeout_seconds > 0) {
          options.timeout =
              std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000));
        }
        std::unique_ptr<Communicator> comm;
        {
          ReleasedGil release;
          comm = primus::coll::connect_from_environment(options, secret);
        }
        return comm;
      },
      py::arg("timeout") = 0.0, py::arg("secret") = std::nullopt,
      "A communicator from the environment (PRIMUS_BOOTSTRAP, ...); `secret` is the job secret "
      "(else PRIMUS_JOB_SECRET).");

  m.def(
      "control_connect",
      [](const std::string& address, const std::string& secret, std::uint32_t connector,
         double timeout_seconds) {
        primus::os::UniqueFd fd;
        {
          ReleasedGil release;
          fd = primus::coll::connect_control(
              address, secret, connector,
              std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000)));
        }
        return fd.release();
      },
      py::arg("address"), py::arg("secret"), py::arg("rank"), py::arg("timeout") = 30.0,
      "Connects to primus-launch's control channel at `address` (PRIMUS_CONTROL) as `rank`, "
      "proving the job secret; returns the connected descriptor (the caller owns it).");
}
