#include "sim/gradients/fashion_mnist.hpp"

#include <fmt/format.h>
#include <zlib.h>

namespace sparsim {
namespace {

constexpr std::uint32_t kUnsignedByteType = 0x08; // IDX data type code of uint8 elements

std::uint32_t big_endian_u32(std::span<const std::uint8_t> bytes, std::size_t offset)
{
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

// Checks the header of an IDX file of uint8 elements with `dims` dimensions and returns the sizes.
std::vector<std::size_t> idx_header(std::span<const std::uint8_t> bytes, std::uint32_t dims, const std::string& name)
{
  const std::size_t header = 4 + 4 * std::size_t{dims};
  if (bytes.size() < header)
    throw DatasetError(fmt::format("{}: {} bytes, shorter than the {}-byte IDX header", name, bytes.size(), header));
  const std::uint32_t magic = big_endian_u32(bytes, 0);
  const std::uint32_t expected_magic = (kUnsignedByteType << 8) | dims;
  if (magic != expected_magic)
    throw DatasetError(fmt::format("{}: magic number 0x{:08x}, expected 0x{:08x} (IDX, uint8, {} dimension{})", name,
                                   magic, expected_magic, dims, dims == 1 ? "" : "s"));
  std::vector<std::size_t> sizes;
  std::size_t elements = 1;
  for (std::uint32_t d = 0; d < dims; ++d) {
    sizes.push_back(big_endian_u32(bytes, 4 + 4 * d));
    elements *= sizes.back();
  }
  if (bytes.size() != header + elements)
    throw DatasetError(fmt::format("{}: {} bytes, but the header announces {} elements ({} bytes in all)", name,
                                   bytes.size(), elements, header + elements));
  return sizes;
}

} // namespace

IdxImages parse_idx_images(std::span<const std::uint8_t> bytes, const std::string& name)
{
  const auto sizes = idx_header(bytes, 3, name);
  IdxImages images;
  images.count = sizes[0];
  images.rows = sizes[1];
  images.cols = sizes[2];
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

std::vector<std::uint8_t> parse_idx_labels(std::span<const std::uint8_t> bytes, const std::string& name)
{
  idx_header(bytes, 1, name);
  return {bytes.begin() + 8, bytes.end()};
}

std::vector<std::uint8_t> read_maybe_gzipped(const std::filesystem::path& file)
{
  // gzread passes files that are not gzip-compressed through unchanged.
  gzFile in = gzopen(file.c_str(), "rb");
  if (!in)
    throw DatasetError(fmt::format("{}: cannot open", file.string()));
  std::vector<std::uint8_t> bytes;
  constexpr unsigned kChunk = 1 << 20;
  for (;;) {
    const std::size_t used = bytes.size();
    bytes.resize(used + kChunk);
    const int got = gzread(in, bytes.data() + used, kChunk);
    if (got < 0) {
      int code = 0;
      const std::string message = gzerror(in, &code);
      gzclose(in);
      throw DatasetError(fmt::format("{}: unreadable gzip data ({})", file.string(), message));
    }
    bytes.resize(used + static_cast<std::size_t>(got));
    if (got == 0)
      break;
  }
  // A truncated stream ends without an error from gzread; gzclose reports it.
  int code = 0;
  const std::string message = gzerror(in, &code);
  if (gzclose(in) != Z_OK || code != Z_OK)
    throw DatasetError(fmt::format("{}: truncated or corrupt gzip data ({})", file.string(), message));
  return bytes;
}

FashionMnist load_fashion_mnist(const std::filesystem::path& dir)
{
  auto read = [&](const std::string& base) {
    for (const auto& candidate : {dir / base, dir / (base + ".gz")})
      if (std::filesystem::is_regular_file(candidate))
        return std::make_pair(read_maybe_gzipped(candidate), candidate.string());
    throw DatasetError(fmt::format("missing {} (plain or .gz)", (dir / base).string()));
  };
  auto read_images = [&](const std::string& base) {
    const auto [bytes, file] = read(base);
    IdxImages images = parse_idx_images(bytes, file);
    if (images.rows != FashionMnist::kImageSide || images.cols != FashionMnist::kImageSide)
      throw DatasetError(fmt::format("{}: images of {}x{} pixels, expected {}x{}", file, images.rows, images.cols,
                                     FashionMnist::kImageSide, FashionMnist::kImageSide));
    return std::make_pair(std::move(images), file);
  };
  auto read_labels = [&](const std::string& base, const std::pair<IdxImages, std::string>& images) {
    const auto [bytes, file] = read(base);
    std::vector<std::uint8_t> labels = parse_idx_labels(bytes, file);
    if (labels.size() != images.first.count)
      throw DatasetError(
          fmt::format("{}: {} labels for the {} images of {}", file, labels.size(), images.first.count, images.second));
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= FashionMnist::kClasses)
        throw DatasetError(
            fmt::format("{}: label {} of image {} is outside 0..{}", file, labels[i], i, FashionMnist::kClasses - 1));
    return labels;
  };

  FashionMnist data;
  auto train = read_images("train-images-idx3-ubyte");
  data.train_labels = read_labels("train-labels-idx1-ubyte", train);
  auto test = read_images("t10k-images-idx3-ubyte");
  data.test_labels = read_labels("t10k-labels-idx1-ubyte", test);
  data.train_images = std::move(train.first);
  data.test_images = std::move(test.first);
  if (data.train_images.count == 0 || data.test_images.count == 0)
    throw DatasetError(fmt::format("{}: an empty training or test set", dir.string()));
  return data;
}

} // namespace sparsim
