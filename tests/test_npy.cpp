// The .npy reader and writer against numpy-written files and hand-built bytes, every malformed input giving an
// NpyError that names the file and the problem; the replay gradient source returning the recorded values for
// each (rank, iteration), with its config errors naming the JSON path; and a TopkA run on replayed gradients
// through the CLI, its result sizes checked against a brute-force error-feedback oracle.
#include "sim/gradients/npy.hpp"
#include "sim/gradients/source.hpp"
#include "sparsim_cli.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <set>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

const std::filesystem::path data_dir = std::filesystem::path(SPARSIM_SOURCE_DIR) / "tests" / "data";

std::vector<std::byte> to_bytes(std::string_view text)
{
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> file_bytes(const std::filesystem::path& path) { return to_bytes(read_text(path)); }

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes)
{
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian bytes of each value's object representation (this test runs on little-endian machines only).
template <typename T> std::string raw_values(const std::vector<T>& values)
{
  static_assert(std::endian::native == std::endian::little);
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// An independent .npy writer: magic, version, header length (2 bytes for 1.x, 4 otherwise), the dict padded
// with spaces and a newline to a multiple of 64 bytes, then `data` as given.
std::vector<std::byte> handmade_npy(const std::string& dict, const std::string& data, int major = 1, int minor = 0)
{
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (std::size_t i = 0; i < length_bytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return to_bytes(out + header + data);
}

std::string f4_dict(const std::string& shape)
{
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

// Parsing `bytes` must throw an NpyError whose message names the origin and contains `problem`.
void expect_npy_error(const std::vector<std::byte>& bytes, const std::string& problem)
{
  try {
    parse_npy(bytes, "case.npy");
    ADD_FAILURE() << "no error; expected one containing: " << problem;
  } catch (const NpyError& e) {
    EXPECT_EQ(e.origin(), "case.npy");
    EXPECT_EQ(std::string(e.what()).rfind("case.npy: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b)
{
  // memcmp's pointers must not be null, even for 0 bytes (an empty vector's data() may be).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// --- round trips ---------------------------------------------------------------------------------------------

class NpyRoundTrip : public ::testing::TestWithParam<std::vector<std::size_t>> {};

TEST_P(NpyRoundTrip, WriteThenReadGivesTheSameShapeAndBits)
{
  const std::vector<std::size_t> shape = GetParam();
  std::size_t count = 1;
  for (auto d : shape)
    count *= d;
  // Special values first (signed zero, subnormal, extremes, infinities, NaN), then varied ones.
  std::vector<float> data = {-0.0f,
                             1e-45f,
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             0.1f};
  data.resize(count);
  for (std::size_t i = 6; i < count; ++i)
    data[i] = static_cast<float>(i) * -0.37f;

  const auto dir = scratch_dir("npy-roundtrip");
  const auto path = dir / "a.npy";
  write_npy(path, data, shape);
  const NpyArray back = read_npy(path);
  EXPECT_EQ(back.shape, shape);
  EXPECT_TRUE(same_bits(back.data, data));

  const std::vector<std::byte> bytes = file_bytes(path);
  EXPECT_EQ(bytes, encode_npy(data, shape));
  const NpyHeader header = read_npy_header(path);
  EXPECT_EQ(header.data_offset % 64, 0u); // numpy's alignment
  EXPECT_EQ(header.data_offset + 4 * count, bytes.size());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1)
      << "the temporary file was left behind";
}

INSTANTIATE_TEST_SUITE_P(Shapes, NpyRoundTrip,
                         ::testing::Values(std::vector<std::size_t>{0}, std::vector<std::size_t>{1},
                                           std::vector<std::size_t>{7}, std::vector<std::size_t>{3, 4},
                                           std::vector<std::size_t>{0, 5}, std::vector<std::size_t>{2, 3, 4},
                                           std::vector<std::size_t>{2, 0, 3}, std::vector<std::size_t>{1, 1, 1000}));

TEST(Npy, WriteReplacesAnExistingFileWhole)
{
  const auto path = scratch_dir("npy-replace") / "a.npy";
  write_npy(path, std::vector<float>(100, 1.0f), {100});
  write_npy(path, std::vector<float>{2.0f, 3.0f}, {2});
  EXPECT_EQ(read_npy(path).data, (std::vector<float>{2.0f, 3.0f}));
}

TEST(Npy, WriterRejectsAShapeThatDoesNotHoldTheData)
{
  const std::vector<float> six(6, 1.0f);
  EXPECT_THROW(encode_npy(six, {2, 2}), std::invalid_argument);
  EXPECT_THROW(encode_npy(six, {}), std::invalid_argument);
  EXPECT_THROW(encode_npy(six, {1, 1, 2, 3}), std::invalid_argument);
  EXPECT_THROW(encode_npy(six, {std::size_t{1} << 63, 2, 6}), std::invalid_argument); // the product wraps to 6
}

TEST(Npy, UnwritableFolderIsAnNpyErrorNamingThePath)
{
  const auto path = scratch_dir("npy-unwritable") / "missing-folder" / "a.npy";
  try {
    write_npy(path, std::vector<float>{1.0f}, {1});
    ADD_FAILURE() << "no error";
  } catch (const NpyError& e) {
    EXPECT_EQ(e.origin(), path.string());
  }
}

// --- numpy's own files ---------------------------------------------------------------------------------------

TEST(Npy, WriterMatchesNumpyByteForByte)
{
  const std::vector<float> values = {-1.875f, -1.125f, -0.375f, 0.375f, 1.125f, 1.875f}; // (arange(6) - 2.5) * 0.75
  EXPECT_EQ(encode_npy(values, {2, 3}), file_bytes(data_dir / "numpy_f4_2x3.npy"));
  EXPECT_EQ(encode_npy({}, {0}), file_bytes(data_dir / "numpy_f4_empty.npy"));
}

TEST(Npy, ReadsNumpyVersion2File)
{
  const std::vector<std::byte> bytes = file_bytes(data_dir / "numpy_v2_f4_2x2x2.npy");
  ASSERT_EQ(std::to_integer<int>(bytes[6]), 2); // the fixture really is version 2.0
  const NpyArray a = read_npy(data_dir / "numpy_v2_f4_2x2x2.npy");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 2, 2}));
  EXPECT_EQ(a.data, (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(read_npy_header(data_dir / "numpy_v2_f4_2x2x2.npy").major_version, 2);
}

TEST(Npy, ReadsNumpyFloat64AndFloat16Files)
{
  const NpyArray f8 = read_npy(data_dir / "numpy_f8_4.npy");
  EXPECT_EQ(f8.shape, (std::vector<std::size_t>{4}));
  EXPECT_EQ(f8.data, (std::vector<float>{0.1f, -2.5f, std::numeric_limits<float>::infinity(), 3.0f}));

  const NpyArray f2 = read_npy(data_dir / "numpy_f2_5.npy");
  // float16(0.1) is 0x2e66 = 1638 * 2^-14 = 0.0999755859375.
  EXPECT_EQ(f2.data, (std::vector<float>{1.0f, -2.0f, 65504.0f, 0x1.0p-24f, 0.0999755859375f}));
}

// --- versions and dtypes from hand-built bytes ---------------------------------------------------------------

TEST(Npy, Versions2And3UseAFourByteHeaderLength)
{
  const std::vector<float> values = {1.5f, -2.5f, 4.0f};
  for (int major : {2, 3}) {
    const NpyArray a = parse_npy(handmade_npy(f4_dict("(3,)"), raw_values(values), major));
    EXPECT_EQ(a.data, values) << "version " << major;
  }
  // The same bytes declared as version 1.0 misread the length field and fail cleanly.
  auto v2 = handmade_npy(f4_dict("(3,)"), raw_values(values), 2);
  v2[6] = std::byte{1};
  EXPECT_THROW(parse_npy(v2), NpyError);
}

TEST(Npy, Float64ConvertsToTheNearestFloat)
{
  const std::vector<double> values = {0.5, -1.25, 0.1, 1e-50, 1e300, -1e300, 16777217.0, -0.0};
  const NpyArray a =
      parse_npy(handmade_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4), }", raw_values(values)));
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 4}));
  const float inf = std::numeric_limits<float>::infinity();
  // 16777217 = 2^24 + 1 is a tie between 2^24 and 2^24 + 2: round to even gives 2^24.
  EXPECT_EQ(a.data, (std::vector<float>{0.5f, -1.25f, 0.1f, 0.0f, inf, -inf, 16777216.0f, 0.0f}));
  EXPECT_TRUE(std::signbit(a.data[7]));
}

TEST(Npy, Float16ConvertsExactly)
{
  const std::vector<std::uint16_t> bits = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x0400,
                                           0x3555, 0x7C00, 0xFC00, 0x8000, 0x7E00};
  const NpyArray a =
      parse_npy(handmade_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (11,), }", raw_values(bits)));
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> expected = {1.0f,        -2.0f, 65504.0f, 0x1.0p-24f, 1023 * 0x1.0p-24f, 0x1.0p-14f,
                                       0x1.554p-2f, inf,   -inf,     -0.0f}; // 0x3555: 1.0101010101b * 2^-2
  ASSERT_EQ(a.data.size(), 11u);
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(a.data[i], expected[i]) << "half 0x" << std::hex << bits[i];
  EXPECT_TRUE(std::signbit(a.data[9]));
  EXPECT_TRUE(std::isnan(a.data[10]));
}

TEST(Npy, AcceptsWhatNumpyMayWrite)
{
  const std::string one = raw_values(std::vector<float>{7.0f});
  // Double quotes, no trailing comma, other key order, no spaces; Fortran order for a 1-D array.
  for (const std::string dict : {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,)}",
                                 "{'shape':(1,),'fortran_order':False,'descr':'<f4'}",
                                 "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }"}) {
    const NpyArray a = parse_npy(handmade_npy(dict, one));
    EXPECT_EQ(a.data, std::vector<float>{7.0f}) << dict;
  }
  // Data need not be 64-byte aligned (numpy before 1.9 aligned to 16).
  std::string header = "\x93NUMPY\x01";
  header += '\0';
  const std::string dict = f4_dict("(1,)") + "\n";
  header += static_cast<char>(dict.size());
  header += '\0';
  EXPECT_EQ(parse_npy(to_bytes(header + dict + one)).data, std::vector<float>{7.0f});
}

// --- malformed input -----------------------------------------------------------------------------------------

TEST(NpyMalformed, PreambleErrors)
{
  expect_npy_error(to_bytes("NOTNUMPYxxxxxxxx"), "does not start with the magic string");
  expect_npy_error(to_bytes("PK\x03\x04"), "magic"); // a zip (.npz), not a .npy
  expect_npy_error({}, "truncated");
  expect_npy_error(to_bytes("\x93NUM"), "truncated");
  expect_npy_error(to_bytes(std::string("\x93NUMPY\x01\x00\x10", 9)), "truncated");
  auto v4 = handmade_npy(f4_dict("(1,)"), "abcd");
  v4[6] = std::byte{4};
  expect_npy_error(v4, "unsupported .npy format version 4.0");
  auto v11 = handmade_npy(f4_dict("(1,)"), "abcd");
  v11[7] = std::byte{1};
  expect_npy_error(v11, "unsupported .npy format version 1.1");
  auto long_header = handmade_npy(f4_dict("(1,)"), "abcd");
  long_header[8] = std::byte{0xff};
  long_header[9] = std::byte{0xff};
  expect_npy_error(long_header, "truncated .npy file: the header is 65535 bytes long");
}

TEST(NpyMalformed, HeaderNotADictLiteral)
{
  const std::string four = "abcd";
  expect_npy_error(handmade_npy("[1, 2]", four), "expected '{'");
  expect_npy_error(handmade_npy("", four), "expected '{' but the header ended");
  expect_npy_error(handmade_npy("{'descr' '<f4'}", four), "expected ':'");
  expect_npy_error(handmade_npy("{'descr': '<f4", four), "unterminated string");
  expect_npy_error(handmade_npy("{descr: '<f4'}", four), "expected a quoted string");
  expect_npy_error(handmade_npy("{'descr': '<f\\x34'}", four), "escape sequences");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", four), "expected '}'");
  expect_npy_error(handmade_npy(f4_dict("(1,)") + " x", four), "unexpected characters after the closing brace");
  expect_npy_error(handmade_npy(f4_dict("(1,)") + std::string("\0", 1), four), "after the closing brace");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': no, 'shape': (1,)}", four), "True or False");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", four), "expected '('");
  // Non-ASCII bytes appear escaped in the message.
  expect_npy_error(handmade_npy("{\xff\xfe}", four), "{\\xff\\xfe}");
}

TEST(NpyMalformed, MissingExtraAndDuplicateKeys)
{
  const std::string four = "abcd";
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': False}", four), "no 'shape' key");
  expect_npy_error(handmade_npy("{'fortran_order': False, 'shape': (1,)}", four), "no 'descr' key");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'shape': (1,)}", four), "no 'fortran_order' key");
  expect_npy_error(handmade_npy("{}", four), "no 'descr' key");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", four),
                   "unexpected key 'x'");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", four),
                   "the key 'descr' appears twice");
}

TEST(NpyMalformed, UnsupportedDtypes)
{
  auto with_descr = [](const std::string& descr) {
    return handmade_npy("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }", "abcdefgh");
  };
  expect_npy_error(with_descr("<i4"), "the dtype '<i4' is not supported");
  expect_npy_error(with_descr("|u1"), "the dtype '|u1' is not supported");
  expect_npy_error(with_descr("<c8"), "not supported");
  expect_npy_error(with_descr("f4"), "not supported");
  expect_npy_error(with_descr(">f4"), "'>f4' is big-endian");
  expect_npy_error(with_descr(">f8"), "big-endian");
  expect_npy_error(handmade_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd"),
                   "expected a quoted string"); // structured dtypes are lists
}

TEST(NpyMalformed, FortranOrderOfMoreThanOneDimension)
{
  const std::string data = raw_values(std::vector<float>(6, 1.0f));
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data),
                   "Fortran order, which is not supported");
  expect_npy_error(handmade_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2, 3), }", data),
                   "Fortran order");
}

TEST(NpyMalformed, BadShapes)
{
  const std::string four = "abcd";
  expect_npy_error(handmade_npy(f4_dict("(1)"), four), "not a tuple");
  expect_npy_error(handmade_npy(f4_dict("(-1,)"), four), "non-negative integer");
  expect_npy_error(handmade_npy(f4_dict("(1.5,)"), four), "expected ')'");
  expect_npy_error(handmade_npy(f4_dict("(1,,)"), four), "non-negative integer");
  expect_npy_error(handmade_npy(f4_dict("()"), four), "has 0 dimensions; 1, 2 or 3 are supported");
  expect_npy_error(handmade_npy(f4_dict("(1, 1, 1, 1)"), four), "has 4 dimensions");
  expect_npy_error(handmade_npy(f4_dict("(18446744073709551616,)"), four), "overflows 64 bits"); // 2^64
  expect_npy_error(handmade_npy(f4_dict("(4294967296, 4294967296)"), four), "too large");        // 2^64 elements
  expect_npy_error(handmade_npy(f4_dict("(4611686018427387904,)"), four), "too large");          // 2^62 * 4 bytes
  // Huge dimensions with a zero make an empty array, which is fine.
  EXPECT_TRUE(parse_npy(handmade_npy(f4_dict("(0, 4611686018427387904)"), "")).data.empty());
}

TEST(NpyMalformed, DataSizeMismatch)
{
  const std::string twelve = raw_values(std::vector<float>{1, 2, 3});
  expect_npy_error(handmade_npy(f4_dict("(4,)"), twelve),
                   "truncated .npy file: the shape (4,) needs 16 bytes of data, the file holds 12");
  expect_npy_error(handmade_npy(f4_dict("(2,)"), twelve), "4 bytes of trailing garbage after the data of shape (2,)");
  expect_npy_error(handmade_npy(f4_dict("(0,)"), "x"), "1 bytes of trailing garbage");
  expect_npy_error(handmade_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", twelve), "needs 16 bytes");
}

// Every prefix of a valid file, and every single-byte change of its header, either parses or gives an NpyError:
// no crash, no other exception, no misread size.
TEST(NpyMalformed, EveryTruncationAndHeaderByteChangeIsHandled)
{
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const std::vector<std::byte> good = encode_npy(values, {2, 3});
  for (std::size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_THROW(parse_npy(std::span(good).first(cut)), NpyError) << "prefix of " << cut << " bytes";

  const std::size_t header_end = parse_npy_header(good).data_offset;
  int parsed = 0;
  for (std::size_t at = 0; at < header_end; ++at)
    for (int value = 0; value < 256; ++value) {
      std::vector<std::byte> changed = good;
      changed[at] = static_cast<std::byte>(value);
      try {
        const NpyArray a = parse_npy(changed);
        std::size_t count = 1;
        for (auto d : a.shape)
          count *= d;
        EXPECT_EQ(count, a.data.size());
        ++parsed;
      } catch (const NpyError&) {
      }
    }
  EXPECT_GT(parsed, static_cast<int>(header_end)); // at least the unchanged bytes parse
}

TEST(NpyMalformed, FileErrorsNameThePath)
{
  const auto dir = scratch_dir("npy-files");
  try {
    read_npy(dir / "absent.npy");
    ADD_FAILURE() << "no error";
  } catch (const NpyError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "absent.npy").string() + ": no such file");
  }
  EXPECT_THROW(read_npy(dir), NpyError);
  EXPECT_THROW(read_npy_header(dir / "absent.npy"), NpyError);

  // A truncated file: read_npy and read_npy_header (which does not read the data) both notice.
  std::vector<std::byte> bytes = encode_npy(std::vector<float>{1, 2, 3}, {3});
  bytes.pop_back();
  write_bytes(dir / "short.npy", bytes);
  for (auto reader : {+[](const std::filesystem::path& p) { read_npy(p); },
                      +[](const std::filesystem::path& p) { read_npy_header(p); }}) {
    try {
      reader(dir / "short.npy");
      ADD_FAILURE() << "no error";
    } catch (const NpyError& e) {
      EXPECT_EQ(e.origin(), (dir / "short.npy").string());
      EXPECT_NE(std::string(e.what()).find("needs 12 bytes of data, the file holds 11"), std::string::npos) << e.what();
    }
  }
  // A header that claims more than the file holds.
  write_bytes(dir / "claims.npy", to_bytes(std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f{", 13)));
  EXPECT_THROW(read_npy_header(dir / "claims.npy"), NpyError);
  EXPECT_THROW(read_npy(dir / "claims.npy"), NpyError);
}

// --- the replay source ---------------------------------------------------------------------------------------

// The recorded value of (iteration, rank, index): distinct, exact in float.
float recorded(std::size_t iteration, std::size_t rank, std::size_t i)
{
  return static_cast<float>(iteration * 1000 + rank * 100 + i) * (i % 2 ? -0.5f : 0.5f);
}

std::vector<float> recorded_stack(std::size_t iterations, std::size_t ranks, std::size_t n)
{
  std::vector<float> out;
  for (std::size_t it = 0; it < iterations; ++it)
    for (std::size_t r = 0; r < ranks; ++r)
      for (std::size_t i = 0; i < n; ++i)
        out.push_back(recorded(it, r, i));
  return out;
}

// Writes it{i}_rank{r}.npy files under dir/dumps.
void write_recorded_files(const std::filesystem::path& dir, std::size_t iterations, std::size_t ranks, std::size_t n)
{
  std::filesystem::create_directories(dir / "dumps");
  for (std::size_t it = 0; it < iterations; ++it)
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<float> values;
      for (std::size_t i = 0; i < n; ++i)
        values.push_back(recorded(it, r, i));
      write_npy(dir / "dumps" / fmt::format("it{}_rank{}.npy", it, r), values, {n});
    }
}

std::unique_ptr<GradientSource> replay(const nlohmann::json& gradients, const std::filesystem::path& dir,
                                       std::uint64_t n, int ranks)
{
  return parse_gradient_source(JsonReader(gradients, "gradients"), GradientContext{1, n, ranks, dir});
}

std::vector<float> generated(const GradientSource& source, int rank, int iteration, std::size_t n)
{
  std::vector<float> out(n);
  source.generate(rank, iteration, out);
  return out;
}

std::vector<float> expected_gradient(std::size_t iteration, std::size_t rank, std::size_t n)
{
  std::vector<float> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(recorded(iteration, rank, i));
  return out;
}

// The ConfigError of loading `gradients`, or a failure if there is none.
ConfigError replay_error(const nlohmann::json& gradients, const std::filesystem::path& dir, std::uint64_t n, int ranks)
{
  try {
    replay(gradients, dir, n, ranks);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for " << gradients.dump();
  return ConfigError("", "", "");
}

TEST(Replay, StackReplaysEachRankAndIterationWithWrapAndLoop)
{
  const auto dir = scratch_dir("replay-stack");
  const std::size_t I = 2, R = 3, n = 5;
  write_npy(dir / "stack.npy", recorded_stack(I, R, n), {I, R, n});
  const auto source = replay({{"source", "replay"}, {"file", "stack.npy"}}, dir, n, 7);
  EXPECT_EQ(source->name(), "replay");
  for (int it = 0; it < 5; ++it)
    for (int r = 0; r < 7; ++r)
      EXPECT_EQ(generated(*source, r, it, n), expected_gradient(it % I, r % R, n)) << "rank " << r << " it " << it;
}

TEST(Replay, TwoDimensionalStackIsTheSameInEveryIteration)
{
  const auto dir = scratch_dir("replay-2d");
  const std::size_t R = 2, n = 4;
  write_npy(dir / "ranks.npy", recorded_stack(1, R, n), {R, n});
  const auto source = replay({{"source", "replay"}, {"file", "ranks.npy"}, {"loop", false}}, dir, n, 3);
  for (int it : {0, 1, 9})
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(generated(*source, r, it, n), expected_gradient(0, r % R, n));
}

TEST(Replay, FilesReplayEachRankAndIterationWithWrapAndLoop)
{
  const auto dir = scratch_dir("replay-files");
  const std::size_t I = 3, R = 2, n = 6;
  write_recorded_files(dir, I, R, n);
  const auto source = replay({{"source", "replay"}, {"files", "dumps/it{iteration}_rank{rank}.npy"}}, dir, n, 5);
  for (int it = 0; it < 7; ++it)
    for (int r = 0; r < 5; ++r)
      EXPECT_EQ(generated(*source, r, it, n), expected_gradient(it % I, r % R, n)) << "rank " << r << " it " << it;
}

TEST(Replay, PatternWithoutIterationIsTheSameInEveryIteration)
{
  const auto dir = scratch_dir("replay-no-iteration");
  write_recorded_files(dir, 2, 2, 3);
  const auto source = replay({{"source", "replay"}, {"files", "dumps/it1_rank{rank}.npy"}}, dir, 3, 2);
  for (int it : {0, 1, 2})
    EXPECT_EQ(generated(*source, 1, it, 3), expected_gradient(1, 1, 3));
}

// Two recordings of 2 iterations of 1 rank and n = 3 in `dir` (one .npy stack, one file per iteration), and
// the replay settings of each with "loop": false.
std::vector<nlohmann::json> unlooped_recordings(const std::filesystem::path& dir)
{
  write_npy(dir / "stack.npy", recorded_stack(2, 1, 3), {2, 1, 3});
  write_recorded_files(dir, 2, 1, 3);
  return {{{"source", "replay"}, {"file", "stack.npy"}, {"loop", false}},
          {{"source", "replay"}, {"files", "dumps/it{iteration}_rank{rank}.npy"}, {"loop", false}}};
}

TEST(Replay, WithoutLoopAnIterationBeyondTheRecordingIsAnError)
{
  const auto dir = scratch_dir("replay-noloop");
  for (const nlohmann::json& gradients : unlooped_recordings(dir)) {
    const auto source = replay(gradients, dir, 3, 1);
    EXPECT_EQ(generated(*source, 0, 1, 3), expected_gradient(1, 0, 3));
    try {
      generated(*source, 0, 2, 3);
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("iteration 2 is beyond the 2 recorded iterations and gradients.loop is "
                                           "false"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Replay, WithoutLoopARunLongerThanTheRecordingIsRefusedAtLoad)
{
  const auto dir = scratch_dir("replay-noloop-load");
  for (const nlohmann::json& gradients : unlooped_recordings(dir)) {
    SCOPED_TRACE(gradients.dump());
    for (int iterations : {1, 2}) // as many as recorded, or fewer: accepted
      EXPECT_NO_THROW(
          parse_gradient_source(JsonReader(gradients, "gradients"), GradientContext{1, 3, 1, dir, iterations}));
    try {
      parse_gradient_source(JsonReader(gradients, "gradients"), GradientContext{1, 3, 1, dir, 3});
      ADD_FAILURE() << "a run of 3 iterations over 2 recorded ones accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "gradients.loop");
      EXPECT_NE(e.expected().find("at least the config's 3 iterations"), std::string::npos) << e.what();
      EXPECT_NE(e.expected().find("records 2"), std::string::npos) << e.what();
    }
    // Looping over the recording is fine for any length.
    nlohmann::json looping = gradients;
    looping["loop"] = true;
    EXPECT_NO_THROW(parse_gradient_source(JsonReader(looping, "gradients"), GradientContext{1, 3, 1, dir, 50}));
  }
}

TEST(Replay, RankModeErrorRejectsMoreRanksThanRecorded)
{
  const auto dir = scratch_dir("replay-ranks");
  write_npy(dir / "stack.npy", recorded_stack(1, 3, 4), {1, 3, 4});
  write_recorded_files(dir, 1, 3, 4);
  for (const nlohmann::json& gradients :
       {nlohmann::json{{"source", "replay"}, {"file", "stack.npy"}, {"ranks", "error"}},
        nlohmann::json{{"source", "replay"}, {"files", "dumps/it{iteration}_rank{rank}.npy"}, {"ranks", "error"}}}) {
    EXPECT_NO_THROW(replay(gradients, dir, 4, 3));
    const ConfigError e = replay_error(gradients, dir, 4, 4);
    EXPECT_EQ(e.path(), "gradients.ranks");
    EXPECT_NE(std::string(e.what()).find("at least the config's 4 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("records 3"), std::string::npos) << e.what();
  }
}

TEST(Replay, StackConfigErrorsNameTheField)
{
  const auto dir = scratch_dir("replay-stack-errors");
  write_npy(dir / "stack.npy", recorded_stack(2, 2, 5), {2, 2, 5});

  ConfigError missing = replay_error({{"source", "replay"}, {"file", "nope.npy"}}, dir, 5, 2);
  EXPECT_EQ(missing.path(), "gradients.file");
  EXPECT_NE(std::string(missing.what()).find((dir / "nope.npy").string() + ": no such file"), std::string::npos)
      << missing.what();

  ConfigError wrong_n = replay_error({{"source", "replay"}, {"file", "stack.npy"}}, dir, 8, 2);
  EXPECT_EQ(wrong_n.path(), "gradients.file");
  EXPECT_NE(std::string(wrong_n.what()).find("workload.n = 8 values (the last dimension is 5)"), std::string::npos)
      << wrong_n.what();

  write_bytes(dir / "garbage.npy", to_bytes("hello, world"));
  ConfigError garbage = replay_error({{"source", "replay"}, {"file", "garbage.npy"}}, dir, 5, 2);
  EXPECT_EQ(garbage.path(), "gradients.file");
  EXPECT_NE(std::string(garbage.what()).find("magic"), std::string::npos) << garbage.what();

  write_npy(dir / "empty.npy", {}, {0, 2, 5});
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", "empty.npy"}}, dir, 5, 2).path(), "gradients.file");

  EXPECT_EQ(replay_error({{"source", "replay"}}, dir, 5, 2).path(), "gradients");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", "stack.npy"}, {"files", "x{rank}.npy"}}, dir, 5, 2).path(),
            "gradients");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", ""}}, dir, 5, 2).path(), "gradients.file");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", 3}}, dir, 5, 2).path(), "gradients.file");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", "stack.npy"}, {"ranks", "clamp"}}, dir, 5, 2).path(),
            "gradients.ranks");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", "stack.npy"}, {"loop", "yes"}}, dir, 5, 2).path(),
            "gradients.loop");
  EXPECT_EQ(replay_error({{"source", "replay"}, {"file", "stack.npy"}, {"filez", "a"}}, dir, 5, 2).path(),
            "gradients.filez");
}

TEST(Replay, FilesConfigErrorsNameTheField)
{
  const auto dir = scratch_dir("replay-files-errors");
  write_recorded_files(dir, 2, 2, 5);
  const std::string pattern = "dumps/it{iteration}_rank{rank}.npy";

  ConfigError none = replay_error({{"source", "replay"}, {"files", "other/it{iteration}_rank{rank}.npy"}}, dir, 5, 2);
  EXPECT_EQ(none.path(), "gradients.files");
  EXPECT_NE(std::string(none.what()).find((dir / "other/it0_rank0.npy").string() + ", does not exist"),
            std::string::npos)
      << none.what();

  ConfigError wrong_n = replay_error({{"source", "replay"}, {"files", pattern}}, dir, 6, 2);
  EXPECT_EQ(wrong_n.path(), "gradients.files");
  EXPECT_NE(std::string(wrong_n.what()).find("workload.n = 6 values"), std::string::npos) << wrong_n.what();
  EXPECT_NE(std::string(wrong_n.what()).find("has shape (5,)"), std::string::npos) << wrong_n.what();

  for (const std::string bad : {"dumps/it{iter}_rank{rank}.npy", "dumps/it{iteration_rank.npy", "dumps/}{rank}.npy"})
    EXPECT_EQ(replay_error({{"source", "replay"}, {"files", bad}}, dir, 5, 2).path(), "gradients.files") << bad;

  // A hole in the recording: iteration 1 of rank 1 is gone.
  std::filesystem::remove(dir / "dumps/it1_rank1.npy");
  ConfigError hole = replay_error({{"source", "replay"}, {"files", pattern}}, dir, 5, 2);
  EXPECT_EQ(hole.path(), "gradients.files");
  EXPECT_NE(std::string(hole.what()).find((dir / "dumps/it1_rank1.npy").string() + " is missing"), std::string::npos)
      << hole.what();

  // A 2-D file where 1-D ones are expected.
  write_npy(dir / "dumps/it1_rank1.npy", std::vector<float>(10, 1.0f), {2, 5});
  ConfigError two_d = replay_error({{"source", "replay"}, {"files", pattern}}, dir, 5, 2);
  EXPECT_NE(std::string(two_d.what()).find("has shape (2, 5)"), std::string::npos) << two_d.what();
}

TEST(Replay, StackIsReadOnceAndFilesOnDemand)
{
  const auto dir = scratch_dir("replay-cache");
  write_npy(dir / "stack.npy", recorded_stack(2, 2, 3), {2, 2, 3});
  const auto stack = replay({{"source", "replay"}, {"file", "stack.npy"}}, dir, 3, 2);
  EXPECT_EQ(generated(*stack, 0, 0, 3), expected_gradient(0, 0, 3));
  std::filesystem::remove(dir / "stack.npy");
  EXPECT_EQ(generated(*stack, 1, 1, 3), expected_gradient(1, 1, 3)); // from memory

  write_recorded_files(dir, 2, 2, 3);
  const auto files = replay({{"source", "replay"}, {"files", "dumps/it{iteration}_rank{rank}.npy"}}, dir, 3, 2);
  EXPECT_EQ(generated(*files, 0, 0, 3), expected_gradient(0, 0, 3));
  std::filesystem::remove(dir / "dumps/it0_rank0.npy");
  std::filesystem::remove(dir / "dumps/it1_rank0.npy");
  EXPECT_EQ(generated(*files, 0, 0, 3), expected_gradient(0, 0, 3)); // iteration 0 is cached
  EXPECT_EQ(generated(*files, 1, 1, 3), expected_gradient(1, 1, 3)); // read now
  try {
    generated(*files, 0, 1, 3);
    ADD_FAILURE() << "no error";
  } catch (const NpyError& e) {
    EXPECT_EQ(e.origin(), (dir / "dumps/it1_rank0.npy").string());
  }
}

TEST(Replay, NonFiniteValuesAreAnErrorNamingTheirPosition)
{
  const auto dir = scratch_dir("replay-nan");
  std::vector<float> values = recorded_stack(2, 2, 3);
  values[(1 * 2 + 0) * 3 + 2] = std::numeric_limits<float>::quiet_NaN(); // iteration 1, rank 0, index 2
  write_npy(dir / "stack.npy", values, {2, 2, 3});
  const auto source = replay({{"source", "replay"}, {"file", "stack.npy"}}, dir, 3, 2);
  try {
    generated(*source, 0, 0, 3);
    ADD_FAILURE() << "no error";
  } catch (const NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("the value at (1, 0, 2) is nan"), std::string::npos) << e.what();
  }
}

TEST(Replay, ResolvedJsonLoadsAgain)
{
  const auto dir = scratch_dir("replay-json");
  write_npy(dir / "stack.npy", recorded_stack(1, 1, 2), {1, 1, 2});
  const nlohmann::json given = {{"source", "replay"}, {"file", "stack.npy"}, {"loop", false}, {"ranks", "error"}};
  const nlohmann::json resolved = replay(given, dir, 2, 1)->to_json();
  EXPECT_EQ(resolved, given);
  EXPECT_NO_THROW(replay(resolved, dir, 2, 1));
}

// --- holes and the sidecar ------------------------------------------------------------------------------------

const std::string kDumps = "dumps/it{iteration}_rank{rank}.npy";

// The message of `e` contains every one of `parts`.
void expect_mentions(const ConfigError& e, std::initializer_list<std::string> parts)
{
  for (const std::string& part : parts)
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "no \"" << part << "\" in: " << e.what();
}

TEST(Replay, HoleInTheIterationsIsAConfigError)
{
  const auto dir = scratch_dir("replay-hole-iterations");
  write_recorded_files(dir, 5, 2, 3);
  EXPECT_NO_THROW(replay({{"source", "replay"}, {"files", kDumps}}, dir, 3, 2));
  // Iteration 2 gone for both ranks: the scan would stop at 2 iterations; iterations 3 and 4 show the hole.
  std::filesystem::remove(dir / "dumps/it2_rank0.npy");
  std::filesystem::remove(dir / "dumps/it2_rank1.npy");
  const ConfigError e = replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 3, 2);
  EXPECT_EQ(e.path(), "gradients.files");
  EXPECT_EQ(e.value(), "\"" + kDumps + "\"");
  expect_mentions(e, {(dir / "dumps/it3_rank0.npy").string() + " exists, but " +
                          (dir / "dumps/it2_rank0.npy").string() + " does not",
                      "iterations are counted from 0"});
  // Only the last recorded iteration's files there: the first one beyond the hole is named.
  std::filesystem::remove(dir / "dumps/it3_rank0.npy");
  std::filesystem::remove(dir / "dumps/it3_rank1.npy");
  std::filesystem::remove(dir / "dumps/it4_rank0.npy");
  expect_mentions(replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 3, 2),
                  {(dir / "dumps/it4_rank1.npy").string() + " exists"});
  // Without the files beyond the hole, the recording is the two iterations before it.
  std::filesystem::remove(dir / "dumps/it4_rank1.npy");
  EXPECT_NO_THROW(replay({{"source", "replay"}, {"files", kDumps}, {"loop", false}}, dir, 3, 2));
}

TEST(Replay, HoleInTheRanksIsAConfigError)
{
  const auto dir = scratch_dir("replay-hole-ranks");
  write_recorded_files(dir, 2, 4, 3);
  std::filesystem::remove(dir / "dumps/it0_rank2.npy");
  std::filesystem::remove(dir / "dumps/it1_rank2.npy");
  const ConfigError e = replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 3, 2);
  EXPECT_EQ(e.path(), "gradients.files");
  expect_mentions(e, {(dir / "dumps/it0_rank3.npy").string() + " exists, but " +
                          (dir / "dumps/it0_rank2.npy").string() + " does not",
                      "ranks are counted from 0"});
}

TEST(Replay, HoleScanLooksIntoThePatternsFoldersAndIgnoresOtherNames)
{
  const auto dir = scratch_dir("replay-hole-folders");
  // One folder per rank; names the pattern does not make (leading zeros, other files) do not count.
  for (std::size_t r = 0; r < 2; ++r) {
    std::filesystem::create_directories(dir / "rec" / fmt::format("rank{}", r));
    for (std::size_t it = 0; it < 2; ++it)
      write_npy(dir / "rec" / fmt::format("rank{}", r) / fmt::format("it{}.npy", it), expected_gradient(it, r, 3), {3});
  }
  write_npy(dir / "rec/rank0/it07.npy", expected_gradient(0, 0, 3), {3});
  std::ofstream(dir / "rec/rank0/notes.txt") << "not a recording";
  std::ofstream(dir / "rec/notes.txt") << "not a recording";
  const std::string pattern = "rec/rank{rank}/it{iteration}.npy";
  const auto source = replay({{"source", "replay"}, {"files", pattern}, {"ranks", "error"}}, dir, 3, 2);
  EXPECT_EQ(generated(*source, 1, 1, 3), expected_gradient(1, 1, 3));
  // it3 of rank 1 after a missing it2, one folder down.
  write_npy(dir / "rec/rank1/it3.npy", expected_gradient(3, 1, 3), {3});
  const ConfigError e = replay_error({{"source", "replay"}, {"files", pattern}}, dir, 3, 2);
  expect_mentions(e, {(dir / "rec/rank1/it3.npy").string() + " exists, but " + (dir / "rec/rank0/it2.npy").string()});
}

// A sidecar for write_recorded_files(dir, I, R, n): recording.json in dir/dumps, with a two-layer table.
nlohmann::json sidecar_for(std::size_t iterations, std::size_t ranks, std::size_t n)
{
  return {
      {"files", "it{iteration}_rank{rank}.npy"},
      {"n", n},
      {"ranks", ranks},
      {"iterations", iterations},
      {"first_step", 10},
      {"batch", 8},
      {"dtype", "float32"},
      {"recorder", "simulated"},
      {"model",
       {{"name", "tiny"},
        {"flatten_order", "forward"},
        {"layers",
         {{{"name", "fc.weight"}, {"size", n - 1}, {"kind", "fc"}},
          {{"name", "fc.bias"}, {"size", 1}, {"kind", "bias"}, {"output", true}}}},
        {"compute",
         {{"forward_backward", "2.5ms"}, {"batch", 8}, {"device", "test"}, {"method", "test"}, {"source", "test"}}}}}};
}

void write_sidecar(const std::filesystem::path& dir, const nlohmann::json& sidecar)
{
  std::ofstream(dir / "dumps" / "recording.json") << sidecar.dump(1);
}

TEST(Replay, SidecarGivesTheTrainingStep)
{
  const auto dir = scratch_dir("replay-sidecar");
  write_recorded_files(dir, 3, 2, 5);
  EXPECT_EQ(replay({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2)->training_step().has_value(), false);
  write_sidecar(dir, sidecar_for(3, 2, 5));
  const auto source = replay({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2);
  ASSERT_TRUE(source->training_step().has_value());
  EXPECT_DOUBLE_EQ(source->training_step()->forward_backward, 2.5e-3);
  EXPECT_EQ(generated(*source, 1, 2, 5), expected_gradient(2, 1, 5));
  // Its layers at their places in the gradient (sparsim stats' per-layer shares).
  const std::vector<LayerRange> layers = source->layer_ranges();
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].name, "fc.weight");
  EXPECT_EQ(layers[0].begin, 0u);
  EXPECT_EQ(layers[0].size, 4u);
  EXPECT_FALSE(layers[0].output);
  EXPECT_EQ(layers[1].begin, 4u);
  EXPECT_EQ(layers[1].kind, "bias");
  EXPECT_TRUE(layers[1].output);
  // The sidecar is found beside the files, not in the config's folder: a pattern through another folder
  // ("dumps/../dumps/") still names the sidecar's folder.
  EXPECT_TRUE(replay({{"source", "replay"}, {"files", "dumps/../dumps/it{iteration}_rank{rank}.npy"}}, dir, 5, 2)
                  ->training_step()
                  .has_value());
  // A table without a compute object: no training step.
  nlohmann::json no_compute = sidecar_for(3, 2, 5);
  no_compute["model"].erase("compute");
  write_sidecar(dir, no_compute);
  EXPECT_EQ(replay({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2)->training_step().has_value(), false);
  // Nor without a table.
  no_compute.erase("model");
  write_sidecar(dir, no_compute);
  EXPECT_EQ(replay({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2)->training_step().has_value(), false);
  EXPECT_TRUE(replay({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2)->layer_ranges().empty());
}

TEST(Replay, GradientsModelGivesTheTableInsteadOfTheSidecar)
{
  const auto dir = scratch_dir("replay-model");
  write_recorded_files(dir, 2, 2, 5);
  write_npy(dir / "stack.npy", recorded_stack(2, 2, 5), {2, 2, 5});
  write_sidecar(dir, sidecar_for(2, 2, 5));
  nlohmann::json table = sidecar_for(2, 2, 5)["model"];
  table["compute"]["forward_backward"] = "7ms";
  std::ofstream(dir / "table.json") << table.dump();
  for (const nlohmann::json& gradients :
       {nlohmann::json{{"source", "replay"}, {"files", kDumps}, {"model", "table.json"}},
        nlohmann::json{{"source", "replay"}, {"file", "stack.npy"}, {"model", "table.json"}}}) {
    SCOPED_TRACE(gradients.dump());
    const auto source = replay(gradients, dir, 5, 2);
    ASSERT_TRUE(source->training_step().has_value());
    EXPECT_DOUBLE_EQ(source->training_step()->forward_backward, 7e-3);
    EXPECT_EQ(source->to_json(), [&] {
      nlohmann::json resolved = gradients;
      resolved["loop"] = true;
      resolved["ranks"] = "wrap";
      return resolved;
    }());
  }
  // A table that does not hold n parameters, and one that is no table.
  const ConfigError wrong = replay_error({{"source", "replay"}, {"file", "stack.npy"}, {"model", "vgg16"}}, dir, 5, 2);
  EXPECT_EQ(wrong.path(), "gradients.model");
  expect_mentions(wrong, {"workload.n = 5 parameters (its layers hold 14728266)"});
  EXPECT_EQ(replay_error({{"source", "replay"}, {"files", kDumps}, {"model", "nowhere.json"}}, dir, 5, 2).path(),
            "gradients.model");
}

TEST(Replay, SidecarThatDisagreesWithTheFilesIsAConfigError)
{
  const auto dir = scratch_dir("replay-sidecar-errors");
  write_recorded_files(dir, 3, 2, 5);
  const std::string sidecar = (dir / "dumps/recording.json").string();
  // One wrong field of the sidecar at a time: the error's JSON path, value and what it names.
  struct Case {
    std::string key;
    nlohmann::json value;
    std::string path;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"iterations",
       4,
       "iterations",
       {"the iterations gradients.files \"" + kDumps + "\" holds, 3", (dir / "dumps/it3_rank0.npy").string()}},
      {"ranks", 3, "ranks", {"the ranks gradients.files \"" + kDumps + "\" holds, 2"}},
      {"n", 6, "n", {"workload.n = 5"}},
      {"dtype", "float16", "dtype", {"the dtype of the recorded files", "holds float32"}},
      {"files", "grad_{iteration}_{rank}.npy", "files", {"\"it{iteration}_rank{rank}.npy\""}},
      {"dtype", "int8", "dtype", {"\"float32\""}},
      {"iterations", 0, "iterations", {"an integer >= 1"}},
      {"colour", "blue", "colour", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + " = " + c.value.dump());
    nlohmann::json wrong = sidecar_for(3, 2, 5);
    wrong[c.key] = c.value;
    if (c.key == "n")
      wrong.erase("model"); // whose sizes, adding up to 5, would be the first disagreement
    write_sidecar(dir, wrong);
    const ConfigError e = replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2);
    EXPECT_EQ(e.path(), "(" + sidecar + ")." + c.path);
    EXPECT_EQ(e.value(), describe_json(c.value));
    for (const std::string& part : c.mentions)
      expect_mentions(e, {part});
  }
  // The layer table must hold n parameters.
  nlohmann::json short_table = sidecar_for(3, 2, 5);
  short_table["model"]["layers"][0]["size"] = 3;
  write_sidecar(dir, short_table);
  const ConfigError e = replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2);
  EXPECT_EQ(e.path(), "(" + sidecar + ").model.layers");
  expect_mentions(e, {"2 layers of 4 parameters", "the recording's n = 5"});
  // A bad layer table names its field inside the sidecar.
  nlohmann::json bad_kind = sidecar_for(3, 2, 5);
  bad_kind["model"]["layers"][1]["kind"] = "attention";
  write_sidecar(dir, bad_kind);
  EXPECT_EQ(replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2).path(),
            "(" + sidecar + ").model.layers[1].kind");
  // Not JSON.
  std::ofstream(dir / "dumps/recording.json") << "{\"files\": ";
  EXPECT_EQ(replay_error({{"source", "replay"}, {"files", kDumps}}, dir, 5, 2).path(), "(" + sidecar + ")");
}

// The committed fixture of tests/configs/replay_example.json holds recorded_stack(2, 3, 16), written by write_npy.
TEST(Replay, CommittedFixtureIsTheDocumentedArray)
{
  EXPECT_EQ(file_bytes(data_dir / "replay_stack.npy"), encode_npy(recorded_stack(2, 3, 16), {2, 3, 16}));
}

// --- end to end: TopkA on replayed gradients through the CLI -------------------------------------------------

// Indices of the k largest magnitudes (distinct magnitudes assumed), sorted.
std::vector<std::size_t> top_k(const std::vector<float>& x, std::size_t k)
{
  std::vector<std::size_t> order(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

TEST(ReplayCli, TopkaRunsOnReplayedGradientsWithWrapAndLoop)
{
  // 3 recorded ranks and 2 recorded iterations of random values; 5 simulated ranks and 4 iterations.
  const std::size_t I = 2, R = 3, n = 64, k = 8;
  const int P = 5, iterations = 4;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> stack(I * R * n);
  for (auto& v : stack)
    v = uniform(rng);
  const auto data = scratch_dir("replay-cli-data");
  write_npy(data / "stack.npy", stack, {I, R, n});

  const nlohmann::json config = {
      {"name", "replay_topka"},
      {"ranks", P},
      {"iterations", iterations},
      {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "topka"}}},
      {"workload", {{"n", n}, {"density", static_cast<double>(k) / n}}},
      {"gradients", {{"source", "replay"}, {"file", (data / "stack.npy").string()}}},
  };
  const CliResult r = run_config(config, "replay-cli");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto manifest = nlohmann::json::parse(read_text(r.dir / "manifest.json"));
  EXPECT_EQ(manifest["config"]["gradients"]["source"], "replay");
  EXPECT_TRUE(manifest["verification"]["checked"].get<bool>());

  // Oracle: error feedback per recorded rank (wrapped ranks repeat one of them); U is the union of selections.
  std::vector<std::vector<float>> residual(R, std::vector<float>(n, 0.0f));
  const auto totals = total_rows(r.dir);
  ASSERT_EQ(totals.size(), static_cast<std::size_t>(iterations));
  for (int it = 0; it < iterations; ++it) {
    std::set<std::size_t> selected;
    for (std::size_t rr = 0; rr < R; ++rr) {
      for (std::size_t i = 0; i < n; ++i)
        residual[rr][i] += stack[((it % I) * R + rr) * n + i];
      for (std::size_t i : top_k(residual[rr], k)) {
        selected.insert(i);
        residual[rr][i] = 0.0f;
      }
    }
    EXPECT_EQ(number(totals[it], "result_nnz"), static_cast<double>(selected.size())) << "iteration " << it;
    EXPECT_EQ(number(totals[it], "local_selected_sum"), static_cast<double>(P * k));
  }
}

TEST(ReplayCli, ExampleConfigRuns)
{
  const auto out = scratch_dir("replay-example");
  const CliResult r = run_cli("run " + std::string(SPARSIM_SOURCE_DIR) + "/tests/configs/replay_example.json --out " +
                              out.string() + " --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(total_rows(out).size(), 3u);
}

// A run of 3 ranks and 3 iterations of TopkA on a recording write_recorded_files(folder, 3, 3, 8) makes, with
// `compute` and `gradients` (which name that folder) as given.
nlohmann::json recorded_run(const nlohmann::json& gradients, const nlohmann::json& compute)
{
  return {
      {"ranks", 3},
      {"iterations", 3},
      {"topology", {{"type", "star"}, {"nodes", 3}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "topka"}}},
      {"workload", {{"n", 8}, {"density", 0.25}}},
      {"gradients", gradients},
      {"compute", compute},
  };
}

TEST(ReplayCli, TrainingStepOfTheSidecarIsChargedUnderComputeTrainingModel)
{
  const auto data = scratch_dir("replay-cli-sidecar-data");
  write_recorded_files(data, 3, 3, 8);
  write_sidecar(data, sidecar_for(3, 3, 8));
  const nlohmann::json gradients = {{"source", "replay"}, {"files", (data / kDumps).string()}, {"loop", false}};
  const CliResult r = run_config(recorded_run(gradients, {{"training", "model"}}), "replay-cli-sidecar");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto manifest = nlohmann::json::parse(read_text(r.dir / "manifest.json"));
  EXPECT_DOUBLE_EQ(manifest["config"]["compute"]["forward_backward_s"].get<double>(), 2.5e-3);
  for (int it = 0; it < 3; ++it)
    EXPECT_DOUBLE_EQ(phase_time(r.dir, it, "compute"), 2.5e-3) << "iteration " << it;

  // Without the sidecar, "model" has nothing to charge.
  std::filesystem::remove(data / "dumps/recording.json");
  const CliResult bare = run_config(recorded_run(gradients, {{"training", "model"}}), "replay-cli-bare");
  EXPECT_EQ(bare.exit_code, 2) << bare.output;
  EXPECT_NE(bare.output.find("config error at compute.training:"), std::string::npos) << bare.output;
  EXPECT_NE(bare.output.find("\"replay\" with a recording sidecar or gradients.model"), std::string::npos)
      << bare.output;
}

TEST(ReplayCli, HoleOrDisagreeingSidecarIsAConfigErrorWithStatus2)
{
  const auto data = scratch_dir("replay-cli-hole-data");
  write_recorded_files(data, 4, 3, 8);
  const nlohmann::json gradients = {{"source", "replay"}, {"files", (data / kDumps).string()}};
  // The sidecar says 4 iterations; iteration 1 of rank 0 is gone: a hole (the other ranks have iteration 1).
  write_sidecar(data, sidecar_for(4, 3, 8));
  std::filesystem::remove(data / "dumps/it1_rank0.npy");
  const CliResult hole = run_config(recorded_run(gradients, {}), "replay-cli-hole");
  EXPECT_EQ(hole.exit_code, 2) << hole.output;
  EXPECT_NE(hole.output.find("config error at gradients.files:"), std::string::npos) << hole.output;
  EXPECT_NE(hole.output.find((data / "dumps/it1_rank1.npy").string() + " exists, but " +
                             (data / "dumps/it1_rank0.npy").string() + " does not"),
            std::string::npos)
      << hole.output;
  // The last iteration gone for every rank: no hole, but the sidecar holds one iteration more than the files.
  write_recorded_files(data, 3, 3, 8);
  for (int r = 0; r < 3; ++r)
    std::filesystem::remove(data / fmt::format("dumps/it3_rank{}.npy", r));
  const CliResult shorter = run_config(recorded_run(gradients, {}), "replay-cli-shorter");
  EXPECT_EQ(shorter.exit_code, 2) << shorter.output;
  EXPECT_NE(shorter.output.find("config error at (" + (data / "dumps/recording.json").string() +
                                ").iterations: got 4, expected the iterations gradients.files"),
            std::string::npos)
      << shorter.output;
}

TEST(ReplayCli, MissingFileIsAConfigErrorWithStatus2)
{
  const nlohmann::json config = {
      {"ranks", 2},
      {"topology", {{"type", "star"}, {"nodes", 2}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "topka"}}},
      {"workload", {{"n", 16}}},
      {"gradients", {{"source", "replay"}, {"file", "nowhere.npy"}}},
  };
  const CliResult r = run_config(config, "replay-cli-missing");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config error at gradients.file:"), std::string::npos) << r.output;
}

} // namespace
