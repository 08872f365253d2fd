// primus._ckpt: libprimus-ckpt for Python (the `primus.checkpoint` module builds on it).
// Arrays cross without copies: add() writes straight from a C-contiguous buffer and read_into()
// fills one, both with the GIL released while HDF5 works.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <optional>
#include <string>
#include <vector>

#include "buffer_check.hpp"
#include "primus/ckpt.hpp"
#include "released_gil.hpp"

namespace py = pybind11;
using primus::ckpt::Checkpoint;
using primus::ckpt::DType;
using primus::ckpt::Shape;
using primus::python::ReleasedGil;

namespace {

DType dtype_named(const std::string& name) {
  const auto dtype = primus::ckpt::parse_dtype(name);
  if (!dtype) throw py::value_error("unknown dtype '" + name + "'");
  return *dtype;
}

// A C-contiguous buffer with the dtype's item size, or a ValueError naming the tensor.
py::buffer_info contiguous(const py::buffer& buffer, DType dtype, const std::string& name,
                           bool writable) {
  return primus::python::contiguous_buffer(buffer, primus::ckpt::dtype_size(dtype),
                                           std::string(primus::ckpt::to_string(dtype)), writable,
                                           "tensor '" + name + "'");
}

Shape shape_of(const py::buffer_info& info) {
  Shape shape;
  for (const py::ssize_t dim : info.shape)
    shape.push_back(static_cast<std::uint64_t>(dim));
  return shape;
}

py::object state_value(const primus::ckpt::StateValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return py::int_(*i);
  if (const auto* s = std::get_if<std::string>(&value)) return py::str(*s);
  const auto& bytes = std::get<std::vector<std::uint8_t>>(value);
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

py::tuple loaded(std::optional<primus::ckpt::Loaded> result, std::vector<std::string> skipped) {
  if (!result) return py::make_tuple(py::none(), skipped);
  return py::make_tuple(std::move(result->checkpoint), skipped);
}

}  // namespace

PYBIND11_MODULE(_ckpt, m) {
  primus::python::note_main_thread();
  m.doc() = "libprimus-ckpt: HDF5 checkpoints that are never torn (see primus.checkpoint)";
  static py::exception<primus::Error> checkpoint_error(m, "CheckpointError", PyExc_RuntimeError);
  static py::exception<primus::ckpt::CorruptCheckpoint> corrupt(m, "CorruptCheckpoint",
                                                                checkpoint_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const primus::ckpt::CorruptCheckpoint& e) {
      corrupt(e.what());
    } catch (const primus::Error& e) {
      checkpoint_error(e.what());
    }
  });

  py::class_<primus::ckpt::RankWriter>(m, "RankWriter")
      .def(py::init([](const std::string& root, std::int64_t step, int rank, int world_size,
                       std::uint64_t chunk_bytes, int deflate_level) {
             primus::ckpt::WriteOptions options;
             options.chunk_bytes = chunk_bytes;
             options.deflate_level = deflate_level;
             ReleasedGil release;
             return std::make_unique<primus::ckpt::RankWriter>(root, step, rank, world_size,
                                                               options);
           }),
           py::arg("root"), py::arg("step"), py::arg("rank"), py::arg("world_size"),
           py::arg("chunk_bytes") = std::uint64_t{4} << 20, py::arg("deflate_level") = 0)
      .def(
          "add",
          [](primus::ckpt::RankWriter& writer, const std::string& name, const py::buffer& data,
             const std::string& dtype_name, std::optional<Shape> global_shape,
             std::optional<Shape> offset) {
            const DType dtype = dtype_named(dtype_name);
            const py::buffer_info info = contiguous(data, dtype, name, false);
            primus::ckpt::TensorRef ref;
            ref.name = name;
            ref.dtype = dtype;
            ref.shape = shape_of(info);
            ref.data = info.ptr;
            ref.global_shape = global_shape.value_or(Shape{});
            ref.offset = offset.value_or(Shape{});
            ReleasedGil release;  // `data` keeps the buffer alive meanwhile
            writer.add_tensor(ref);
          },
          py::arg("name"), py::arg("data"), py::arg("dtype"), py::arg("global_shape") = py::none(),
          py::arg("offset") = py::none())
      .def("set_int", &primus::ckpt::RankWriter::set_int)
      .def("set_string", &primus::ckpt::RankWriter::set_string)
      .def("set_bytes",
           [](primus::ckpt::RankWriter& writer, const std::string& key, const py::bytes& value) {
             const std::string text = value;
             writer.set_bytes(key, std::vector<std::uint8_t>(text.begin(), text.end()));
           })
      .def("finish", [](primus::ckpt::RankWriter& writer) {
        ReleasedGil release;
        return writer.finish().string();
      });

  m.def(
      "commit",
      [](const std::string& root, std::int64_t step, int world_size) {
        ReleasedGil release;
        const auto result = primus::ckpt::commit(root, step, world_size);
        return std::make_pair(result.dir.string(), result.bytes);
      },
      py::arg("root"), py::arg("step"), py::arg("world_size"));

  py::class_<Checkpoint>(m, "Checkpoint")
      .def_property_readonly("step", &Checkpoint::step)
      .def_property_readonly("world_size", &Checkpoint::world_size)
      .def_property_readonly("dir", [](const Checkpoint& c) { return c.dir().string(); })
      .def_property_readonly("tensors",
                             [](const Checkpoint& c) {
                               py::dict tensors;
                               for (const auto& [name, t] : c.manifest().tensors) {
                                 tensors[py::str(name)] = py::make_tuple(
                                     std::string(primus::ckpt::to_string(t.dtype)), t.global_shape);
                               }
                               return tensors;
                             })
      .def(
          "read_into",
          [](const Checkpoint& c, const std::string& name, const Shape& offset, const Shape& shape,
             const py::buffer& out) {
            const DType dtype = c.tensor(name).dtype;
            const py::buffer_info info = contiguous(out, dtype, name, true);
            const std::size_t bytes =
                static_cast<std::size_t>(info.size) * static_cast<std::size_t>(info.itemsize);
            ReleasedGil release;
            c.read_into(name, offset, shape, info.ptr, bytes);
          },
          py::arg("name"), py::arg("offset"), py::arg("shape"), py::arg("out"))
      .def(
          "read_whole",
          [](const Checkpoint& c, const std::vector<std::pair<std::string, py::buffer>>& reads) {
            std::vector<py::buffer_info> infos;  // each keeps its buffer's view until the end
            std::vector<Checkpoint::WholeRead> whole;
            infos.reserve(reads.size());
            for (const auto& [name, out] : reads) {
              infos.push_back(contiguous(out, c.tensor(name).dtype, name, true));
              const py::buffer_info& info = infos.back();
              whole.push_back(
                  {name, info.ptr,
                   static_cast<std::size_t>(info.size) * static_cast<std::size_t>(info.itemsize)});
            }
            ReleasedGil release;
            c.read_whole(whole);
          },
          py::arg("reads"))
      .def(
          "is_saved_copy",
          [](const Checkpoint& c, const std::string& name, const Shape& offset, const Shape& shape,
             const py::buffer& data) {
            const auto& tensors = c.manifest().tensors;
            const auto it = tensors.find(name);
            if (it == tensors.end()) return false;
            const py::buffer_info info = contiguous(data, it->second.dtype, name, false);
            const std::size_t bytes =
                static_cast<std::size_t>(info.size) * static_cast<std::size_t>(info.itemsize);
            ReleasedGil release;  // `data` keeps the buffer alive meanwhile
            return c.is_saved_copy(name, offset, shape, info.ptr, bytes);
          },
          py::arg("name"), py::arg("offset"), py::arg("shape"), py::arg("data"))
      .def_property_readonly("whole_tensors", &Checkpoint::whole_tensors)
      .def("close", &Checkpoint::close_files)
      .def("state", [](const Checkpoint& c, int rank) {
        py::dict values;
        for (const auto& [key, value] : c.state(rank))
          values[py::str(key)] = state_value(value);
        return values;
      });

  m.def(
      "load_latest",
      [](const std::string& root, bool full) {
        std::vector<std::string> skipped;
        std::optional<primus::ckpt::Loaded> result;
        {
          ReleasedGil release;
          result = primus::ckpt::load_latest(
              root, full ? primus::ckpt::Verify::kFull : primus::ckpt::Verify::kQuick, &skipped);
        }
        return loaded(std::move(result), std::move(skipped));
      },
      py::arg("root"), py::arg("full") = false);
  m.def(
      "load_step",
      [](const std::string& root, std::int64_t step, bool full) {
        std::vector<std::string> skipped;
        std::optional<primus::ckpt::Loaded> result;
        {
          ReleasedGil release;
          result = primus::ckpt::load_step(
              root, step, full ? primus::ckpt::Verify::kFull : primus::ckpt::Verify::kQuick,
              &skipped);
        }
        return loaded(std::move(result), std::move(skipped));
      },
      py::arg("root"), py::arg("step"), py::arg("full") = false);
  m.def(
      "verify",
      [](const std::string& dir, bool full) {
        ReleasedGil release;
        return primus::ckpt::verify_problems(
            dir, full ? primus::ckpt::Verify::kFull : primus::ckpt::Verify::kQuick);
      },
      py::arg("dir"), py::arg("full") = true);
  m.def("list_steps", [](const std::string& root) {
    std::vector<py::tuple> steps;
    for (const auto& s : primus::ckpt::list_steps(root))
      steps.push_back(py::make_tuple(s.step, s.dir.string(), s.latest));
    return steps;
  });
  m.def("read_latest", [](const std::string& root) { return primus::ckpt::read_latest(root); });
  m.def(
      "prune",
      [](const std::string& root, std::size_t keep_last, std::int64_t keep_every,
         std::optional<std::int64_t> known_good) {
        // Without the GIL: other Python threads (a background checkpoint write) run meanwhile.
        const auto paths = [&] {
          ReleasedGil release;
          return primus::ckpt::prune(root, keep_last, keep_every, known_good);
        }();
        std::vector<std::string> removed;
        for (const auto& path : paths)
          removed.push_back(path.string());
        return removed;
      },
      py::arg("root"), py::arg("keep_last"), py::arg("keep_every") = 0,
      py::arg("known_good") = py::none());
  m.def("set_aside", [](const std::string& root) -> std::optional<std::string> {
    const auto moved = primus::ckpt::set_aside(root);
    return moved ? std::optional<std::string>(moved->string()) : std::nullopt;
  });
}
