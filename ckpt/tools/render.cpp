// The shapes of tensors as primus-ckpt prints them (render.hpp).
#include "render.hpp"

namespace primus::ckpt::tool {

std::string format_shape(const Shape& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) text += ", ";
    text += std::to_string(shape[d]);
  }
  return text + "]";
}

Json shape_json(const Shape& shape) {
  Json array = Json::array();
  for (const std::uint64_t dim : shape)
    array.push_back(dim);
  return array;
}

}  // namespace primus::ckpt::tool
