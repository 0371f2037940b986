#include "sim/gradients/npy.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <optional>
#include <unistd.h>

namespace sparsim {

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "float conversions below assume IEEE 754 types");

NpyError::NpyError(std::string origin, std::string problem)
    : std::runtime_error(origin + ": " + problem)
    , origin_(std::move(origin))
    , problem_(std::move(problem))
{
}

std::size_t npy_item_bytes(NpyDtype dtype)
{
  switch (dtype) {
  case NpyDtype::float16:
    return 2;
  case NpyDtype::float32:
    return 4;
  case NpyDtype::float64:
    return 8;
  }
  return 0;
}

std::string npy_dtype_name(NpyDtype dtype) { return fmt::format("float{}", 8 * npy_item_bytes(dtype)); }

std::size_t NpyHeader::data_bytes() const { return element_count * npy_item_bytes(dtype); }

std::string npy_shape_text(const std::vector<std::size_t>& shape)
{
  if (shape.size() == 1)
    return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

namespace {

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t version_end = 8; // magic (6 bytes) + major + minor

// A header excerpt safe to print: non-printable bytes escaped, long headers cut.
std::string excerpt(std::string_view text)
{
  constexpr std::size_t max_shown = 80;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max_shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return text.size() > max_shown ? out + "..." : out;
}

unsigned byte_at(std::span<const std::byte> bytes, std::size_t i) { return std::to_integer<unsigned>(bytes[i]); }

// Little-endian unsigned integer of `width` bytes starting at `at`.
std::uint64_t little_endian(std::span<const std::byte> bytes, std::size_t at, std::size_t width)
{
  std::uint64_t value = 0;
  for (std::size_t i = width; i-- > 0;)
    value = (value << 8) | byte_at(bytes, at + i);
  return value;
}

struct Preamble {
  int major = 0;
  int minor = 0;
  std::size_t header_begin = 0; // first byte of the dict literal
  std::size_t data_offset = 0;  // first byte of the data
};

// Magic, version and header length: the first 10 (version 1.0) or 12 (2.0, 3.0) bytes.
Preamble parse_preamble(std::span<const std::byte> bytes, std::string_view origin)
{
  const std::size_t compared = std::min(bytes.size(), magic.size());
  for (std::size_t i = 0; i < compared; ++i)
    if (byte_at(bytes, i) != static_cast<unsigned char>(magic[i]))
      throw NpyError(std::string(origin), "not a .npy file (it does not start with the magic string \\x93NUMPY)");
  if (bytes.size() < version_end)
    throw NpyError(
        std::string(origin),
        fmt::format("truncated .npy file: {} bytes, too short for the magic string and version", bytes.size()));
  Preamble p;
  p.major = static_cast<int>(byte_at(bytes, 6));
  p.minor = static_cast<int>(byte_at(bytes, 7));
  if (p.major < 1 || p.major > 3 || p.minor != 0)
    throw NpyError(std::string(origin), fmt::format("unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are "
                                                    "supported)",
                                                    p.major, p.minor));
  // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 in 4.
  const std::size_t length_bytes = p.major == 1 ? 2 : 4;
  p.header_begin = version_end + length_bytes;
  if (bytes.size() < p.header_begin)
    throw NpyError(std::string(origin),
                   fmt::format("truncated .npy file: {} bytes, too short for the header length", bytes.size()));
  p.data_offset = p.header_begin + static_cast<std::size_t>(little_endian(bytes, version_end, length_bytes));
  return p;
}

// The header's dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }: Python syntax
// restricted to what numpy writes (strings without escapes, True/False, tuples of non-negative integers).
class HeaderParser {
public:
  HeaderParser(std::string_view text, std::string_view origin)
      : text_(text)
      , origin_(origin)
  {
  }

  NpyHeader parse()
  {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::size_t>> shape;

    skip_space();
    expect('{');
    skip_space();
    while (peek() != '}') {
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr" && !descr)
        descr = parse_string();
      else if (key == "fortran_order" && !fortran_order)
        fortran_order = parse_bool();
      else if (key == "shape" && !shape)
        shape = parse_shape();
      else if (key == "descr" || key == "fortran_order" || key == "shape")
        fail(fmt::format("the key '{}' appears twice", key));
      else
        fail(fmt::format("unexpected key '{}' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')",
                         excerpt(key)));
      skip_space();
      if (peek() != ',')
        break;
      ++pos_;
      skip_space();
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size())
      fail("unexpected characters after the closing brace");

    if (!descr)
      throw error("the header has no 'descr' key (the dtype)");
    if (!fortran_order)
      throw error("the header has no 'fortran_order' key");
    if (!shape)
      throw error("the header has no 'shape' key");

    NpyHeader header;
    header.dtype = dtype_of(*descr);
    header.shape = std::move(*shape);
    if (header.shape.empty() || header.shape.size() > 3)
      throw error(fmt::format("the shape {} has {} dimensions; 1, 2 or 3 are supported", npy_shape_text(header.shape),
                              header.shape.size()));
    if (*fortran_order && header.shape.size() > 1)
      throw error(fmt::format("the {}-D array is in Fortran order, which is not supported (save a C-order array: "
                              "numpy.ascontiguousarray)",
                              header.shape.size()));
    const std::size_t item = npy_item_bytes(header.dtype);
    header.element_count = 1;
    for (std::size_t dim : header.shape) {
      if (dim != 0 && header.element_count > std::numeric_limits<std::size_t>::max() / dim / item)
        throw error(fmt::format("the shape {} is too large: its byte count overflows", npy_shape_text(header.shape)));
      header.element_count *= dim;
    }
    return header;
  }

private:
  NpyError error(const std::string& problem) const
  {
    return NpyError(std::string(origin_), fmt::format("bad .npy header: {} in \"{}\"", problem, excerpt(text_)));
  }
  [[noreturn]] void fail(const std::string& problem) const
  {
    throw error(fmt::format("{} at offset {} of the dict literal", problem, pos_));
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space()
  {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c)
  {
    if (pos_ >= text_.size())
      fail(fmt::format("expected '{}' but the header ended", c));
    if (text_[pos_] != c)
      fail(fmt::format("expected '{}'", c));
    ++pos_;
  }

  std::string parse_string()
  {
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail("expected a quoted string");
    const std::size_t begin = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\')
        fail("escape sequences in strings are not supported");
      if (text_[pos_] == '\n')
        fail("unterminated string");
      ++pos_;
    }
    if (pos_ >= text_.size())
      fail("unterminated string");
    return std::string(text_.substr(begin, pos_++ - begin));
  }

  bool parse_bool()
  {
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("expected True or False");
  }

  std::size_t parse_dimension()
  {
    if (peek() < '0' || peek() > '9')
      fail("expected a non-negative integer dimension");
    std::size_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const auto digit = static_cast<std::size_t>(peek() - '0');
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10)
        fail("a dimension overflows 64 bits");
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }

  // A Python tuple: (), (3,), (2, 3), (2, 3,). "(3)" is an integer in Python, not a tuple.
  std::vector<std::size_t> parse_shape()
  {
    expect('(');
    skip_space();
    std::vector<std::size_t> shape;
    bool comma_seen = false;
    while (peek() != ')') {
      shape.push_back(parse_dimension());
      skip_space();
      if (peek() != ',')
        break;
      comma_seen = true;
      ++pos_;
      skip_space();
    }
    expect(')');
    if (shape.size() == 1 && !comma_seen)
      fail("the shape is a parenthesised integer, not a tuple (a 1-D shape is written (n,))");
    return shape;
  }

  NpyDtype dtype_of(const std::string& descr) const
  {
    if (descr == "<f4")
      return NpyDtype::float32;
    if (descr == "<f8")
      return NpyDtype::float64;
    if (descr == "<f2")
      return NpyDtype::float16;
    if (!descr.empty() && descr[0] == '>')
      throw error(fmt::format("the dtype '{}' is big-endian, which is not supported (save a little-endian array: "
                              "a.astype('<f4'))",
                              excerpt(descr)));
    throw error(
        fmt::format("the dtype '{}' is not supported (float32 '<f4', float64 '<f8' or float16 '<f2')", excerpt(descr)));
  }

  std::string_view text_;
  std::string_view origin_;
  std::size_t pos_ = 0;
};

// A file holds exactly the header and the data: less is a truncated file, more is trailing garbage.
void check_data_size(const NpyHeader& header, std::size_t file_bytes, std::string_view origin)
{
  const std::size_t present = file_bytes - header.data_offset;
  if (present < header.data_bytes())
    throw NpyError(std::string(origin),
                   fmt::format("truncated .npy file: the shape {} needs {} bytes of data, the file holds {}",
                               npy_shape_text(header.shape), header.data_bytes(), present));
  if (present > header.data_bytes())
    throw NpyError(std::string(origin),
                   fmt::format("{} bytes of trailing garbage after the data of shape {} ({} bytes expected)",
                               present - header.data_bytes(), npy_shape_text(header.shape), header.data_bytes()));
}

// IEEE binary16 to binary32; every half value, subnormals included, is exact in float.
float half_to_float(std::uint16_t h)
{
  const std::uint32_t sign = static_cast<std::uint32_t>(h >> 15) << 31;
  const std::uint32_t exponent = (h >> 10) & 0x1f;
  const std::uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) // infinity or NaN (the payload is kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  // Rebias the exponent from 15 to 127; widen the 10-bit mantissa to 23 bits.
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

void decode(const NpyHeader& header, std::span<const std::byte> data, std::span<float> out)
{
  switch (header.dtype) {
  case NpyDtype::float32:
    if constexpr (std::endian::native == std::endian::little) {
      if (!out.empty()) // memcpy's pointers must not be null, even for 0 bytes
        std::memcpy(out.data(), data.data(), out.size_bytes());
    } else {
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(little_endian(data, 4 * i, 4)));
    }
    break;
  case NpyDtype::float64:
    // Round to nearest; beyond float's range IEEE conversion gives +-infinity.
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(std::bit_cast<double>(little_endian(data, 8 * i, 8)));
    break;
  case NpyDtype::float16:
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = half_to_float(static_cast<std::uint16_t>(little_endian(data, 2 * i, 2)));
    break;
  }
}

// Opens `path` for reading and returns its size; errors say why it cannot be read.
std::ifstream open_for_reading(const std::filesystem::path& path, std::size_t& size)
{
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    throw NpyError(path.string(), "no such file");
  if (std::filesystem::is_directory(status))
    throw NpyError(path.string(), "is a folder, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw NpyError(path.string(), fmt::format("cannot be opened for reading ({})", std::strerror(errno)));
  size = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
  if (ec)
    throw NpyError(path.string(), fmt::format("cannot read its size ({})", ec.message()));
  return in;
}

std::vector<std::byte> read_bytes(std::ifstream& in, std::size_t count, const std::filesystem::path& path)
{
  std::vector<std::byte> bytes(count);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
  if (static_cast<std::size_t>(in.gcount()) != count)
    throw NpyError(path.string(),
                   fmt::format("read {} of its {} bytes (the file changed or a read failed)", in.gcount(), count));
  return bytes;
}

} // namespace

NpyHeader parse_npy_header(std::span<const std::byte> bytes, std::string_view origin)
{
  const Preamble preamble = parse_preamble(bytes, origin);
  if (bytes.size() < preamble.data_offset)
    throw NpyError(std::string(origin),
                   fmt::format("truncated .npy file: the header is {} bytes long but only {} follow the preamble",
                               preamble.data_offset - preamble.header_begin, bytes.size() - preamble.header_begin));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + preamble.header_begin,
                              preamble.data_offset - preamble.header_begin);
  NpyHeader header = HeaderParser(text, origin).parse();
  header.major_version = preamble.major;
  header.minor_version = preamble.minor;
  header.data_offset = preamble.data_offset;
  return header;
}

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view origin)
{
  const NpyHeader header = parse_npy_header(bytes, origin);
  check_data_size(header, bytes.size(), origin);
  NpyArray array;
  array.shape = header.shape;
  array.data.resize(header.element_count);
  decode(header, bytes.subspan(header.data_offset), array.data);
  return array;
}

namespace {

// An open file whose header has been read and checked (including the file's size), positioned at the data.
struct OpenedNpy {
  std::ifstream in;
  NpyHeader header;
};

OpenedNpy open_npy(const std::filesystem::path& path)
{
  // Version 2.0 and 3.0 preambles are 12 bytes: magic (6), version (2), header length (4).
  constexpr std::size_t longest_preamble = 12;
  std::size_t size = 0;
  OpenedNpy file{open_for_reading(path, size), {}};
  std::vector<std::byte> bytes = read_bytes(file.in, std::min(size, longest_preamble), path);
  const Preamble preamble = parse_preamble(bytes, path.string());
  const std::size_t header_end = std::min(size, preamble.data_offset);
  if (header_end > bytes.size()) {
    const std::vector<std::byte> rest = read_bytes(file.in, header_end - bytes.size(), path);
    bytes.insert(bytes.end(), rest.begin(), rest.end());
  }
  file.header = parse_npy_header(std::span(bytes).first(header_end), path.string());
  check_data_size(file.header, size, path.string());
  file.in.seekg(static_cast<std::streamoff>(file.header.data_offset));
  return file;
}

} // namespace

NpyArray read_npy(const std::filesystem::path& path)
{
  OpenedNpy file = open_npy(path);
  NpyArray array;
  array.shape = file.header.shape;
  array.data.resize(file.header.element_count);
  if (file.header.dtype == NpyDtype::float32 && std::endian::native == std::endian::little) {
    // Straight into the result: no second copy of a large file.
    file.in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(file.header.data_bytes()));
    if (static_cast<std::size_t>(file.in.gcount()) != file.header.data_bytes())
      throw NpyError(path.string(), fmt::format("read {} of its {} bytes of data (the file changed or a read failed)",
                                                file.in.gcount(), file.header.data_bytes()));
  } else {
    decode(file.header, read_bytes(file.in, file.header.data_bytes(), path), array.data);
  }
  return array;
}

NpyHeader read_npy_header(const std::filesystem::path& path) { return open_npy(path).header; }

std::vector<std::byte> encode_npy(std::span<const float> data, const std::vector<std::size_t>& shape)
{
  if (shape.empty() || shape.size() > 3)
    throw std::invalid_argument(fmt::format("encode_npy: the shape {} has {} dimensions; 1, 2 or 3 are supported",
                                            npy_shape_text(shape), shape.size()));
  std::size_t count = 1;
  for (std::size_t dim : shape)
    count = (dim != 0 && count > std::numeric_limits<std::size_t>::max() / dim) ? 0 : count * dim;
  if (count != data.size())
    throw std::invalid_argument(
        fmt::format("encode_npy: the shape {} does not hold the {} values given", npy_shape_text(shape), data.size()));

  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", npy_shape_text(shape));
  // numpy pads with spaces and a newline so that the data starts at a multiple of 64 bytes (adding a full 64
  // when the header is already aligned, as numpy does).
  constexpr std::size_t alignment = 64;
  constexpr std::size_t preamble_bytes = 10; // version 1.0: magic (6), version (2), header length (2)
  header.append(alignment - (preamble_bytes + header.size() + 1) % alignment, ' ');
  header += '\n';

  std::string preamble(magic);
  preamble += '\x01'; // version 1.0
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xff); // header length, little-endian uint16
  preamble += static_cast<char>(header.size() >> 8);
  const std::string head = preamble + header;

  std::vector<std::byte> bytes(head.size() + data.size_bytes());
  std::memcpy(bytes.data(), head.data(), head.size());
  if constexpr (std::endian::native == std::endian::little) {
    if (!data.empty())
      std::memcpy(bytes.data() + head.size(), data.data(), data.size_bytes());
  } else {
    std::size_t at = head.size();
    for (float value : data) {
      const auto bits = std::bit_cast<std::uint32_t>(value);
      for (int shift = 0; shift < 32; shift += 8)
        bytes[at++] = static_cast<std::byte>((bits >> shift) & 0xff);
    }
  }
  return bytes;
}

void write_npy(const std::filesystem::path& path, std::span<const float> data, std::vector<std::size_t> shape)
{
  const std::vector<std::byte> bytes = encode_npy(data, shape);
  const std::filesystem::path temporary = path.string() + fmt::format(".tmp-{}", getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw NpyError(path.string(), fmt::format("cannot create {} ({})", temporary.string(), std::strerror(errno)));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temporary);
      throw NpyError(path.string(), fmt::format("writing {} failed", temporary.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary);
    throw NpyError(path.string(), fmt::format("cannot rename {} into place ({})", temporary.string(), ec.message()));
  }
}

} // namespace sparsim
