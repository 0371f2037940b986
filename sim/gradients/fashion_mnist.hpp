// Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017) in its original IDX format: 60,000 training and 10,000 test
// images of 28x28 grey pixels, each labelled with one of 10 clothing classes.
//
// IDX (LeCun's MNIST format): a big-endian header, magic 0x0000 08 D (8 = unsigned bytes, D = number of
// dimensions), then D big-endian uint32 sizes, then the product of the sizes in bytes. Images are D = 3
// (count, rows, columns), labels D = 1 (count). Files may be gzip-compressed (Debian's dataset-fashion-mnist
// ships them as .gz); plain files read the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace sparsim {

// A malformed or missing dataset file; the message names the file and what was wrong.
class DatasetError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct IdxImages {
  std::size_t count = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<std::uint8_t> pixels; // count * rows * cols, image-major then row-major

  std::size_t pixels_per_image() const { return rows * cols; }
  std::span<const std::uint8_t> image(std::size_t i) const
  {
    return {pixels.data() + i * pixels_per_image(), pixels_per_image()};
  }
};

// Parse the bytes of an IDX file; `name` (a file name) only labels errors.
IdxImages parse_idx_images(std::span<const std::uint8_t> bytes, const std::string& name);
std::vector<std::uint8_t> parse_idx_labels(std::span<const std::uint8_t> bytes, const std::string& name);

// All bytes of a file, gunzipped when it is gzip-compressed.
std::vector<std::uint8_t> read_maybe_gzipped(const std::filesystem::path& file);

struct FashionMnist {
  static constexpr int kClasses = 10;
  static constexpr std::size_t kImageSide = 28;
  IdxImages train_images;
  std::vector<std::uint8_t> train_labels;
  IdxImages test_images;
  std::vector<std::uint8_t> test_labels;
};

// Loads the four files from `dir` under their original names (train-images-idx3-ubyte, ...), each plain or
// with a .gz suffix. Checks that image and label counts agree, that images are 28x28 and labels in 0..9.
FashionMnist load_fashion_mnist(const std::filesystem::path& dir);

} // namespace sparsim
