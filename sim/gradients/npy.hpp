// NumPy .npy files: the format `numpy.save` writes, read and written here so that users can bring gradients
// recorded in their own training runs (PyTorch tensors saved with `numpy.save(path, t.numpy())`).
//
// Format (numpy's NEP 1, "A simple file format for NumPy arrays"): the magic "\x93NUMPY", a major and minor
// version byte, the header length (little-endian uint16 for version 1.0, uint32 for 2.0 and 3.0), then the
// header: a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, padded
// with spaces and a final newline, then the raw array data.
//
// Supported here: versions 1.0, 2.0 and 3.0 (3.0 differs only in allowing UTF-8 in the header); dtypes
// little-endian float32 '<f4', float64 '<f8' and float16 '<f2', all converted to float on read (float64
// rounds to nearest, values beyond float's range become +-infinity as with numpy's astype); C order (Fortran
// order only for 1-D arrays, where the two coincide); 1-D, 2-D and 3-D shapes. Anything else, and every
// malformed file, is an NpyError naming the file and the problem. The writer writes float32 in version 1.0 (a
// header of at most three dimensions always fits 1.0's 16-bit length), padded to 64 bytes like numpy's.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sparsim {

// A bad .npy file (or an unwritable one): "ORIGIN: PROBLEM", ORIGIN being the file's path.
class NpyError : public std::runtime_error {
public:
  NpyError(std::string origin, std::string problem);
  const std::string& origin() const { return origin_; }
  const std::string& problem() const { return problem_; }

private:
  std::string origin_;
  std::string problem_;
};

enum class NpyDtype { float16, float32, float64 };
std::size_t npy_item_bytes(NpyDtype dtype);
// numpy's name of the dtype: "float16", "float32", "float64".
std::string npy_dtype_name(NpyDtype dtype);

// What a header says about the array that follows it.
struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  NpyDtype dtype = NpyDtype::float32;
  std::vector<std::size_t> shape; // 1 to 3 dimensions
  std::size_t data_offset = 0;    // bytes before the array data (magic, version, length, header)
  std::size_t element_count = 0;  // product of the shape
  std::size_t data_bytes() const; // element_count * item size
};

// An array read from a .npy file, its values converted to float, in C order.
struct NpyArray {
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

// A shape as Python prints the tuple: (3,), (2, 3).
std::string npy_shape_text(const std::vector<std::size_t>& shape);

// Parses the header at the start of `bytes`, which may be the whole file or any prefix holding the header.
// Checks the magic, version, dict literal, dtype, order and shape (including that the byte count of the data
// fits in size_t), not the data. `origin` names the bytes in errors.
NpyHeader parse_npy_header(std::span<const std::byte> bytes, std::string_view origin = "(memory)");

// Parses a whole .npy file held in memory: the header, then exactly data_bytes() of data (fewer is a
// truncated file, more is trailing garbage).
NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view origin = "(memory)");

// Reads and parses a file. Errors name the path.
NpyArray read_npy(const std::filesystem::path& path);

// Reads only a file's header and checks that the file's size is exactly the header plus the data, without
// reading the data: for validating large files cheaply.
NpyHeader read_npy_header(const std::filesystem::path& path);

// The bytes of a float32 C-order .npy file holding `data` with `shape` (1 to 3 dimensions whose product is
// data.size()).
std::vector<std::byte> encode_npy(std::span<const float> data, const std::vector<std::size_t>& shape);

// Writes encode_npy(data, shape) to `path` through a temporary file in the same folder and a rename, so the
// path holds either the old file or the complete new one.
void write_npy(const std::filesystem::path& path, std::span<const float> data, std::vector<std::size_t> shape);

} // namespace sparsim
