// The closed-loop training source: the IDX reader on the real Fashion-MNIST files and on malformed bytes,
// the MLP's gradient against finite differences of an independent double-precision forward pass, the
// determinism and batch partition of the source, learning under exact dense updates, and whole runs
// through the CLI with a dense and a sparse collective.
#include "sim/gradients/training_source.hpp"
#include "sim/run/config.hpp"
#include "sparsim_cli.hpp"

#include <chrono>
#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <set>
#include <zlib.h>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

const std::filesystem::path kDataset = "/usr/share/datasets/fashion-mnist";

std::shared_ptr<const FashionMnist> real_data()
{
  static const auto data = std::make_shared<const FashionMnist>(load_fashion_mnist(kDataset));
  return data;
}

// The parameter count of a 784-h-10 MLP.
std::uint64_t mlp_parameters(std::uint64_t hidden) { return 784 * hidden + hidden + hidden * 10 + 10; }

// ---- IDX bytes built by hand ----

void put_u32(std::vector<std::uint8_t>& bytes, std::uint32_t v)
{
  for (int shift = 24; shift >= 0; shift -= 8)
    bytes.push_back(static_cast<std::uint8_t>(v >> shift));
}

std::vector<std::uint8_t> idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols)
{
  std::vector<std::uint8_t> bytes;
  put_u32(bytes, 0x00000803);
  put_u32(bytes, count);
  put_u32(bytes, rows);
  put_u32(bytes, cols);
  for (std::uint32_t i = 0; i < count * rows * cols; ++i)
    bytes.push_back(static_cast<std::uint8_t>(i * 7));
  return bytes;
}

std::vector<std::uint8_t> idx_labels(const std::vector<std::uint8_t>& labels)
{
  std::vector<std::uint8_t> bytes;
  put_u32(bytes, 0x00000801);
  put_u32(bytes, static_cast<std::uint32_t>(labels.size()));
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

void write_plain(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes)
{
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes)
{
  gzFile out = gzopen(file.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

// A complete tiny dataset (28x28 images) in `dir`: 3 training and 2 test images.
void write_tiny_dataset(const std::filesystem::path& dir, bool gzip, std::vector<std::uint8_t> train_labels = {1, 9, 0})
{
  auto write = gzip ? write_gzip : write_plain;
  const std::string suffix = gzip ? ".gz" : "";
  write(dir / ("train-images-idx3-ubyte" + suffix), idx_images(3, 28, 28));
  write(dir / ("train-labels-idx1-ubyte" + suffix), idx_labels(train_labels));
  write(dir / ("t10k-images-idx3-ubyte" + suffix), idx_images(2, 28, 28));
  write(dir / ("t10k-labels-idx1-ubyte" + suffix), idx_labels({4, 2}));
}

std::string dataset_error(const std::filesystem::path& dir)
{
  try {
    load_fashion_mnist(dir);
  } catch (const DatasetError& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- An independent oracle: the MLP's loss in double precision, from the documented flat layout ----

struct Oracle {
  double loss = 0;
  double smallest_pre_activation = INFINITY; // |z| of hidden units: FD is valid while h is far below it
};

Oracle oracle_loss(const std::vector<std::size_t>& widths, const std::vector<double>& params,
                   const std::vector<float>& inputs, const std::vector<std::uint8_t>& labels)
{
  // Offsets from the layout of sim/gradients/mlp.hpp: [b_L | W_L | ... | b_1 | W_1], W row-major [out][in].
  const std::size_t layers = widths.size() - 1;
  std::vector<std::size_t> bias_at(layers), weight_at(layers);
  std::size_t offset = 0;
  for (std::size_t l = layers; l-- > 0;) {
    bias_at[l] = offset;
    weight_at[l] = offset + widths[l + 1];
    offset += widths[l + 1] * (widths[l] + 1);
  }
  Oracle out;
  const std::size_t batch = labels.size();
  for (std::size_t s = 0; s < batch; ++s) {
    std::vector<double> a(inputs.begin() + s * widths[0], inputs.begin() + (s + 1) * widths[0]);
    for (std::size_t l = 0; l < layers; ++l) {
      std::vector<double> z(widths[l + 1]);
      for (std::size_t o = 0; o < z.size(); ++o) {
        z[o] = params[bias_at[l] + o];
        for (std::size_t j = 0; j < widths[l]; ++j)
          z[o] += params[weight_at[l] + o * widths[l] + j] * a[j];
        if (l + 1 < layers) {
          out.smallest_pre_activation = std::min(out.smallest_pre_activation, std::fabs(z[o]));
          z[o] = std::max(z[o], 0.0);
        }
      }
      a = z;
    }
    double top = a[0];
    for (double v : a)
      top = std::max(top, v);
    double sum = 0;
    for (double v : a)
      sum += std::exp(v - top);
    out.loss += std::log(sum) + top - a[labels[s]];
  }
  out.loss /= static_cast<double>(batch);
  return out;
}

// Checks the analytic gradient of `indices` against central differences of the double oracle.
// Tolerance: the FD derivative (h = 1e-6 in double) is exact to ~1e-9 (truncation h^2 |f'''|, rounding
// 1e-16 / h); the analytic gradient is computed in float, each entry a sum of at most batch * width
// products of O(1) terms, so its error is a few ulps of those terms: 1e-5 absolute plus 1e-4 relative
// leaves a 10x margin while a wrong index, sign or missing factor errs by O(|g|).
void expect_gradient_matches(const Mlp& mlp, const std::vector<float>& params, const std::vector<float>& inputs,
                             const std::vector<std::uint8_t>& labels, const std::vector<std::size_t>& indices)
{
  std::vector<float> gradient(mlp.parameter_count());
  MlpScratch scratch;
  const double loss = mlp.loss_and_gradient(params, inputs, labels, gradient, scratch);
  std::vector<double> p(params.begin(), params.end());
  const Oracle base = oracle_loss(mlp.widths(), p, inputs, labels);
  EXPECT_NEAR(loss, base.loss, 1e-5 * std::max(1.0, base.loss));
  constexpr double h = 1e-6;
  ASSERT_GT(base.smallest_pre_activation, 1e3 * h) << "a ReLU kink within reach of the finite difference";
  for (std::size_t i : indices) {
    p[i] = params[i] + h;
    const double up = oracle_loss(mlp.widths(), p, inputs, labels).loss;
    p[i] = params[i] - h;
    const double down = oracle_loss(mlp.widths(), p, inputs, labels).loss;
    p[i] = params[i];
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(gradient[i], fd, 1e-5 + 1e-4 * std::fabs(fd)) << "parameter " << i;
  }
}

void random_mlp_case(const std::vector<std::size_t>& widths, std::size_t batch, std::uint64_t seed)
{
  const Mlp mlp(widths);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> params(mlp.parameter_count()), inputs(batch * widths.front());
  for (auto& v : params)
    v = uniform(rng);
  for (auto& v : inputs)
    v = uniform(rng);
  std::vector<std::uint8_t> labels(batch);
  for (auto& l : labels)
    l = static_cast<std::uint8_t>(rng() % widths.back());
  std::vector<std::size_t> all(mlp.parameter_count());
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i] = i;
  expect_gradient_matches(mlp, params, inputs, labels, all);
}

TrainingOptions options(std::size_t hidden, std::size_t batch, double learning_rate, int eval_every,
                        std::size_t eval_samples)
{
  TrainingOptions o;
  o.dataset = kDataset;
  o.hidden = {hidden};
  o.batch = batch;
  o.learning_rate = learning_rate;
  o.eval_every = eval_every;
  o.eval_samples = eval_samples;
  return o;
}

// One iteration with the exact dense update: every rank's gradient, summed in rank order.
void dense_step(TrainingSource& source, int ranks, int iteration)
{
  const std::size_t n = source.model().parameter_count();
  std::vector<float> gradient(n), sum(n, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    source.generate(r, iteration, gradient);
    for (std::size_t i = 0; i < n; ++i)
      sum[i] += gradient[i];
  }
  source.apply_dense_update(iteration, sum, ranks);
}

double mean_train_loss(const nlohmann::json& log, std::size_t begin, std::size_t end)
{
  double sum = 0;
  for (std::size_t i = begin; i < end; ++i)
    sum += log.at(i).at("train_loss").get<double>();
  return sum / static_cast<double>(end - begin);
}

nlohmann::json training_config(const std::string& algorithm, double density, int iterations, std::uint64_t n)
{
  return {
      {"name", "training"},
      {"seed", 7},
      {"ranks", 4},
      {"iterations", iterations},
      {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", algorithm}}},
      {"workload", {{"n", n}, {"density", density}}},
      {"gradients",
       {{"source", "fashion_mnist_mlp"},
        {"hidden", {32}},
        {"batch", 32},
        {"learning_rate", 0.1},
        {"eval_every", 25},
        {"eval_samples", 2000}}},
  };
}

} // namespace

// ---- IDX reader ----

TEST(Idx, RealFilesHaveTheDocumentedShapeAndBalancedClasses)
{
  const auto data = real_data();
  EXPECT_EQ(data->train_images.count, 60000u);
  EXPECT_EQ(data->test_images.count, 10000u);
  EXPECT_EQ(data->train_images.rows, 28u);
  EXPECT_EQ(data->train_images.cols, 28u);
  EXPECT_EQ(data->train_images.pixels.size(), 60000u * 784);
  EXPECT_EQ(data->test_images.pixels.size(), 10000u * 784);
  ASSERT_EQ(data->train_labels.size(), 60000u);
  ASSERT_EQ(data->test_labels.size(), 10000u);
  // Fashion-MNIST is balanced: 6,000 training and 1,000 test images per class, labels 0..9.
  std::vector<int> train_counts(10), test_counts(10);
  for (auto l : data->train_labels) {
    ASSERT_LT(l, 10);
    ++train_counts[l];
  }
  for (auto l : data->test_labels) {
    ASSERT_LT(l, 10);
    ++test_counts[l];
  }
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
  // Real pictures: black backgrounds and bright pixels both occur.
  const auto [lo, hi] = std::minmax_element(data->train_images.pixels.begin(), data->train_images.pixels.end());
  EXPECT_EQ(*lo, 0);
  EXPECT_EQ(*hi, 255);
}

TEST(Idx, ParsesWellFormedBytes)
{
  const IdxImages images = parse_idx_images(idx_images(2, 2, 3), "x");
  EXPECT_EQ(images.count, 2u);
  EXPECT_EQ(images.rows, 2u);
  EXPECT_EQ(images.cols, 3u);
  ASSERT_EQ(images.pixels.size(), 12u);
  EXPECT_EQ(images.image(1)[0], 6 * 7);
  EXPECT_EQ(parse_idx_labels(idx_labels({3, 1, 4}), "y"), (std::vector<std::uint8_t>{3, 1, 4}));
}

TEST(Idx, RejectsMalformedBytesWithTheReason)
{
  auto message = [](auto&& parse) -> std::string {
    try {
      parse();
    } catch (const DatasetError& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto images = idx_images(2, 2, 3);
  auto wrong_magic = images;
  wrong_magic[3] = 0x01; // a labels file's magic
  EXPECT_NE(message([&] { parse_idx_images(wrong_magic, "f"); }).find("magic number 0x00000801"), std::string::npos);
  auto float_type = images;
  float_type[2] = 0x0D; // IDX type float
  EXPECT_NE(message([&] { parse_idx_images(float_type, "f"); }).find("magic"), std::string::npos);
  auto short_data = images;
  short_data.pop_back();
  EXPECT_NE(message([&] { parse_idx_images(short_data, "f"); }).find("27 bytes"), std::string::npos);
  auto long_data = images;
  long_data.push_back(0);
  EXPECT_NE(message([&] { parse_idx_images(long_data, "f"); }).find("29 bytes"), std::string::npos);
  const std::vector<std::uint8_t> header_only(images.begin(), images.begin() + 10);
  EXPECT_NE(message([&] { parse_idx_images(header_only, "f"); }).find("shorter than the 16-byte IDX header"),
            std::string::npos);
  EXPECT_NE(message([&] { parse_idx_labels(images, "labels.idx"); }).find("labels.idx: magic"), std::string::npos);
  EXPECT_EQ(message([&] { parse_idx_images(images, "f"); }), "(no error)");
}

TEST(Idx, LoadsPlainAndGzippedFoldersAndRejectsBadOnes)
{
  for (bool gzip : {false, true}) {
    const auto dir = scratch_dir(gzip ? "tiny-gz" : "tiny");
    write_tiny_dataset(dir, gzip);
    const FashionMnist data = load_fashion_mnist(dir);
    EXPECT_EQ(data.train_images.count, 3u);
    EXPECT_EQ(data.test_images.count, 2u);
    EXPECT_EQ(data.train_labels, (std::vector<std::uint8_t>{1, 9, 0}));
    const auto bytes = idx_images(3, 28, 28);
    EXPECT_EQ(data.train_images.pixels, std::vector<std::uint8_t>(bytes.begin() + 16, bytes.end()));
  }
  {
    const auto dir = scratch_dir("label-range");
    write_tiny_dataset(dir, false, {1, 10, 0});
    EXPECT_NE(dataset_error(dir).find("label 10 of image 1 is outside 0..9"), std::string::npos);
  }
  {
    const auto dir = scratch_dir("count-mismatch");
    write_tiny_dataset(dir, false, {1, 2});
    EXPECT_NE(dataset_error(dir).find("2 labels for the 3 images"), std::string::npos);
  }
  {
    const auto dir = scratch_dir("not-28");
    write_tiny_dataset(dir, false);
    write_plain(dir / "t10k-images-idx3-ubyte", idx_images(2, 28, 27));
    EXPECT_NE(dataset_error(dir).find("28x27"), std::string::npos);
  }
  {
    const auto dir = scratch_dir("missing");
    write_tiny_dataset(dir, false);
    std::filesystem::remove(dir / "t10k-labels-idx1-ubyte");
    EXPECT_NE(dataset_error(dir).find("missing " + (dir / "t10k-labels-idx1-ubyte").string()), std::string::npos);
  }
  {
    const auto dir = scratch_dir("truncated-gz");
    write_tiny_dataset(dir, true);
    const auto file = dir / "train-images-idx3-ubyte.gz";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
    EXPECT_NE(dataset_error(dir).find("gzip data"), std::string::npos) << dataset_error(dir);
  }
}

// ---- The MLP ----

TEST(Mlp, FlattensTheLastLayerFirstBiasBeforeWeight)
{
  const Mlp mlp({5, 4, 3});
  ASSERT_EQ(mlp.layers().size(), 2u);
  EXPECT_EQ(mlp.parameter_count(), 4u * 5 + 4 + 3 * 4 + 3);
  EXPECT_EQ(mlp.layers()[1].bias_offset, 0u);
  EXPECT_EQ(mlp.layers()[1].weight_offset, 3u);
  EXPECT_EQ(mlp.layers()[0].bias_offset, 15u);
  EXPECT_EQ(mlp.layers()[0].weight_offset, 19u);
  EXPECT_EQ(mlp.describe(), "5-4-3");
  EXPECT_EQ(Mlp({784, 64, 10}).parameter_count(), 50890u);
}

TEST(Mlp, GradientMatchesFiniteDifferencesOnRandomNetworks)
{
  random_mlp_case({5, 4, 3}, 4, 11);
  random_mlp_case({6, 5, 4, 3}, 3, 12); // two hidden layers: the delta goes through a ReLU twice
}

TEST(Mlp, GradientMatchesFiniteDifferencesOnRealImages)
{
  const auto data = real_data();
  const Mlp mlp({784, 8, 10});
  std::vector<float> params(mlp.parameter_count());
  mlp.initialise(params, 3);
  std::vector<float> inputs;
  std::vector<std::uint8_t> labels;
  for (std::uint32_t s : {0u, 1u, 2u, 3u, 4u}) {
    for (auto p : data->train_images.image(s))
      inputs.push_back(static_cast<float>(p) / 255.0f);
    labels.push_back(data->train_labels[s]);
  }
  // Every output-layer parameter, the hidden biases, and first-layer weights from pixels that are lit in
  // some image (a black pixel's weights have zero gradient, which the check would pass trivially).
  std::vector<std::size_t> indices;
  const MlpLayer& first = mlp.layers()[0];
  for (std::size_t i = 0; i < first.bias_offset + first.out; ++i)
    indices.push_back(i);
  for (std::size_t o : {0u, 3u, 7u})
    for (std::size_t pixel : {300u, 350u, 406u, 500u})
      if (inputs[pixel] > 0 || inputs[784 + pixel] > 0)
        indices.push_back(first.weight_offset + o * 784 + pixel);
  ASSERT_GE(indices.size(), 100u);
  expect_gradient_matches(mlp, params, inputs, labels, indices);
}

// ---- The source ----

TEST(TrainingSource, SameSeedSameGradientsAndRanksDiffer)
{
  const auto data = real_data();
  TrainingSource a(data, options(16, 8, 0.1, 10, 100), 5, 3);
  TrainingSource b(data, options(16, 8, 0.1, 10, 100), 5, 3);
  TrainingSource other_seed(data, options(16, 8, 0.1, 10, 100), 6, 3);
  const std::size_t n = a.model().parameter_count();
  std::vector<float> ga(n), gb(n), g0(n);
  for (int it = 0; it < 3; ++it) {
    for (int r = 0; r < 3; ++r) {
      a.generate(r, it, ga);
      b.generate(r, it, gb);
      EXPECT_EQ(ga, gb) << "rank " << r << " iteration " << it;
      if (r == 0)
        g0 = ga;
      else
        EXPECT_NE(ga, g0) << "ranks 0 and " << r << " have the same gradient";
    }
    other_seed.generate(0, it, gb);
    a.generate(0, it, ga);
    EXPECT_NE(ga, gb);
    dense_step(a, 3, it);
    dense_step(b, 3, it);
    dense_step(other_seed, 3, it);
    EXPECT_TRUE(std::ranges::equal(a.weights(), b.weights()));
  }
  EXPECT_EQ(a.training_log(), b.training_log());
}

TEST(TrainingSource, BatchesPartitionEachEpoch)
{
  const auto data = real_data();
  const int P = 4;
  const std::size_t B = 32;
  TrainingSource source(data, options(16, B, 0.1, 10, 100), 9, P);
  // 60000 / (4 * 32) = 468.75 iterations per epoch: the first 468 draw distinct samples, and the epoch
  // is completed by the first 96 samples of iteration 468.
  std::set<std::uint32_t> seen;
  for (int it = 0; it <= 468; ++it)
    for (int r = 0; r < P; ++r)
      for (std::uint32_t s : source.batch_samples(r, it)) {
        ASSERT_LT(s, 60000u);
        if (seen.size() < 60000) {
          EXPECT_TRUE(seen.insert(s).second) << "sample " << s << " twice in epoch 0";
        }
      }
  EXPECT_EQ(seen.size(), 60000u);
  // The next epoch is a different order.
  const auto first = source.batch_samples(0, 0);
  const auto later = source.batch_samples(0, 470); // positions 60160.., early in epoch 1
  EXPECT_NE(first, later);
  EXPECT_NE(source.batch_samples(0, 0), source.batch_samples(1, 0));
}

TEST(TrainingSource, UpdatesFollowTheReducedSumAndTheLastIterationStaysReproducible)
{
  const auto data = real_data();
  const int P = 2;
  TrainingSource source(data, options(16, 8, 0.5, 10, 100), 4, P);
  const std::size_t n = source.model().parameter_count();
  const std::vector<float> before(source.weights().begin(), source.weights().end());
  std::vector<float> gradient(n), again(n);
  source.generate(1, 0, gradient);

  // A sparse update moves exactly the listed weights, by lr * value / P.
  SparseVector sum;
  sum.indices = {0, 17, static_cast<Index>(n - 1)};
  sum.values = {1.0f, -2.0f, 4.0f};
  source.apply_update(0, sum, P);
  for (std::size_t i = 0; i < n; ++i) {
    float expected = before[i];
    for (std::size_t e = 0; e < sum.size(); ++e)
      if (sum.indices[e] == i)
        expected = before[i] - static_cast<float>(0.5 / P) * sum.values[e];
    ASSERT_EQ(source.weights()[i], expected) << "weight " << i;
  }

  // Iteration 0 can still be regenerated (the dense verifier does) and gives the same gradient; iteration 1
  // uses the new weights; earlier iterations are gone.
  source.generate(1, 0, again);
  EXPECT_EQ(again, gradient);
  source.generate(1, 1, again);
  EXPECT_NE(again, gradient);
  dense_step(source, P, 1);
  EXPECT_THROW(source.generate(0, 0, again), std::logic_error);
  EXPECT_THROW(source.apply_dense_update(1, gradient, P), std::logic_error); // iteration 1 was applied
  EXPECT_THROW(source.apply_dense_update(2, {}, P), std::runtime_error);     // phantom data: no values
  EXPECT_EQ(source.training_log().size(), 2u);
}

TEST(TrainingSource, LearnsFashionMnistWithExactDenseUpdates)
{
  const auto data = real_data();
  const int P = 4, iterations = 100;
  TrainingSource source(data, options(64, 32, 0.1, 33, 2000), 1, P);
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it)
    dense_step(source, P, it);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d iterations x %d ranks of a %s MLP, batch 32: %.3f s (%.2f ms per gradient)\n", iterations, P,
              source.model().describe().c_str(), seconds, 1e3 * seconds / (iterations * P));

  const nlohmann::json log = source.training_log();
  ASSERT_EQ(log.size(), static_cast<std::size_t>(iterations));
  for (int it = 0; it < iterations; ++it) {
    EXPECT_EQ(log[it]["iteration"], it);
    EXPECT_EQ(log[it].contains("test_accuracy"), it % 33 == 0) << it;
  }
  // Small initial weights give a nearly uniform softmax: loss ln 10 = 2.30, accuracy near chance.
  EXPECT_NEAR(log[0]["train_loss"].get<double>(), std::log(10.0), 0.2);
  EXPECT_LT(log[0]["test_accuracy"].get<double>(), 0.3);
  const double early = mean_train_loss(log, 0, 5), late = mean_train_loss(log, iterations - 10, iterations);
  std::printf("train loss %.3f -> %.3f; test accuracy %.3f -> %.3f\n", early, late,
              log[0]["test_accuracy"].get<double>(), log[99]["test_accuracy"].get<double>());
  EXPECT_LT(late, 0.7 * early);
  EXPECT_GT(log[99]["test_accuracy"].get<double>(), 0.6);
  EXPECT_LT(log[99]["test_loss"].get<double>(), log[0]["test_loss"].get<double>());
}

// ---- Config ----

TEST(TrainingConfig, RejectsAWrongNAndAMissingDataset)
{
  nlohmann::json config = training_config("dense_ring", 0.01, 1, mlp_parameters(32) + 1);
  try {
    parse_config(config, ".");
    ADD_FAILURE() << "n off by one accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "workload.n");
    EXPECT_NE(e.expected().find(std::to_string(mlp_parameters(32))), std::string::npos) << e.what();
    EXPECT_NE(e.expected().find("784-32-10"), std::string::npos) << e.what();
  }
  config = training_config("dense_ring", 0.01, 1, mlp_parameters(32));
  config["gradients"]["dataset"] = "no-such-folder";
  try {
    parse_config(config, "/tmp");
    ADD_FAILURE() << "a missing dataset accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "gradients.dataset");
    EXPECT_NE(std::string(e.what()).find("/tmp/no-such-folder/train-images-idx3-ubyte"), std::string::npos) << e.what();
  }
  config = training_config("dense_ring", 0.01, 1, mlp_parameters(32));
  config["gradients"]["eval_samples"] = 10001;
  try {
    parse_config(config, ".");
    ADD_FAILURE() << "more evaluation samples than test images accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "gradients.eval_samples");
  }
  // Phantom data (dense algorithms only) moves no values to train on: refused at load, naming the path.
  config = training_config("dense_ring", 0.01, 1, mlp_parameters(32));
  config["workload"]["data"] = "phantom";
  config["simulation"] = {{"verify", false}};
  try {
    parse_config(config, ".");
    ADD_FAILURE() << "phantom data accepted for training";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "workload.data");
    EXPECT_NE(e.expected().find("\"real\""), std::string::npos) << e.what();
  }
  config = training_config("dense_ring", 0.01, 1, mlp_parameters(32));
  config["gradients"]["momentum"] = 0.9;
  EXPECT_THROW(parse_config(config, "."), ConfigError);
  config = training_config("dense_ring", 0.01, 1, mlp_parameters(32));
  EXPECT_EQ(parse_config(config, ".").gradients->name(), "fashion_mnist_mlp");
}

// ---- Whole runs ----

class TrainingRuns : public ::testing::TestWithParam<std::pair<std::string, double>> {};

TEST_P(TrainingRuns, TheLossGoesDownThroughTheSimulatedCollective)
{
  const auto [algorithm, density] = GetParam();
  const int iterations = 100;
  const CliResult run = run_config(training_config(algorithm, density, iterations, mlp_parameters(32)),
                                   algorithm + std::to_string(static_cast<int>(density * 100)));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  EXPECT_TRUE(manifest["verification"]["checked"].get<bool>());
  ASSERT_TRUE(manifest.contains("training"));
  const nlohmann::json& log = manifest["training"];
  ASSERT_EQ(log.size(), static_cast<std::size_t>(iterations));
  const double early = mean_train_loss(log, 0, 5), late = mean_train_loss(log, iterations - 10, iterations);
  std::printf("%s density %.2f: train loss %.3f -> %.3f, test accuracy %.3f -> %.3f\n", algorithm.c_str(), density,
              early, late, log[0]["test_accuracy"].get<double>(), log[75]["test_accuracy"].get<double>());
  EXPECT_LT(late, 0.7 * early);
  EXPECT_GT(log[75]["test_accuracy"].get<double>(), 0.5);
  // Iteration 0 runs on the seeded initial weights whatever the collective: the loss of the same source
  // driven in-process.
  TrainingSource reference(real_data(), options(32, 32, 0.1, 25, 2000), 7, 4);
  dense_step(reference, 4, 0);
  EXPECT_EQ(log[0]["train_loss"].get<double>(), reference.training_log()[0]["train_loss"].get<double>());
  EXPECT_EQ(log[0]["test_accuracy"].get<double>(), reference.training_log()[0]["test_accuracy"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, TrainingRuns,
                         ::testing::Values(std::make_pair(std::string("dense_ring"), 0.01),
                                           std::make_pair(std::string("topka"), 0.01),
                                           std::make_pair(std::string("topka"), 0.1)),
                         [](const auto& info) {
                           return info.param.first + "_density" +
                                  std::to_string(static_cast<int>(info.param.second * 100));
                         });
