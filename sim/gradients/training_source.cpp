#include "sim/gradients/training_source.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace sparsim {
namespace {

// Debian's dataset-fashion-mnist package installs the IDX files here.
constexpr const char* kDefaultDataset = "/usr/share/datasets/fashion-mnist";
// Stream tag of the epoch shuffles in mix_coordinates' rank slot, apart from any rank's draws.
constexpr std::uint64_t kShuffleStream = 0x5348'0000'0000'0002ull;
// Test images per forward pass when evaluating (bounds the scratch buffers; the result does not depend on it).
constexpr std::size_t kEvalChunk = 256;

// Pixels scaled to [0, 1] (torchvision's ToTensor), no mean subtraction: black background pixels stay 0,
// so first-layer weights from them get zero gradient, as in the usual PyTorch Fashion-MNIST setup.
void gather(const IdxImages& images, const std::vector<std::uint8_t>& labels, std::span<const std::uint32_t> samples,
            std::vector<float>& inputs, std::vector<std::uint8_t>& batch_labels)
{
  const std::size_t pixels = images.pixels_per_image();
  inputs.resize(samples.size() * pixels);
  batch_labels.resize(samples.size());
  for (std::size_t s = 0; s < samples.size(); ++s) {
    const auto image = images.image(samples[s]);
    for (std::size_t p = 0; p < pixels; ++p)
      inputs[s * pixels + p] = static_cast<float>(image[p]) / 255.0f;
    batch_labels[s] = labels[samples[s]];
  }
}

// The layer widths of an MLP from `inputs` pixels through the hidden widths to the classes.
std::vector<std::size_t> widths_of(std::size_t inputs, const std::vector<std::size_t>& hidden)
{
  std::vector<std::size_t> widths = {inputs};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(FashionMnist::kClasses);
  return widths;
}

} // namespace

TrainingSource::TrainingSource(std::shared_ptr<const FashionMnist> data, TrainingOptions options, std::uint64_t seed,
                               int ranks)
    : data_(std::move(data))
    , options_(std::move(options))
    , seed_(seed)
    , ranks_(ranks)
    , model_(widths_of(data_->train_images.pixels_per_image(), options_.hidden))
    , current_(model_.parameter_count())
    , previous_(model_.parameter_count())
    , gradient_(model_.parameter_count())
    , batch_loss_(ranks, 0.0)
    , batch_loss_iteration_(ranks, -1)
{
  if (options_.batch == 0 || options_.eval_every < 1 || options_.eval_samples > data_->test_images.count)
    throw std::invalid_argument("TrainingSource: batch and eval_every must be positive, eval_samples at most the "
                                "test set");
  model_.initialise(current_, seed_);
}

nlohmann::json TrainingSource::to_json() const
{
  return {{"source", name()},
          {"dataset", options_.dataset.string()},
          {"hidden", options_.hidden},
          {"batch", options_.batch},
          {"learning_rate", options_.learning_rate},
          {"eval_every", options_.eval_every},
          {"eval_samples", options_.eval_samples}};
}

const std::vector<std::uint32_t>& TrainingSource::epoch_order(std::uint64_t epoch) const
{
  for (const EpochOrder& cached : orders_)
    if (cached.filled && cached.epoch == epoch)
      return cached.order;
  // Replace an empty slot, else the older epoch; then a Fisher-Yates shuffle driven by (seed, epoch, i).
  EpochOrder& slot =
      !orders_[0].filled || (orders_[1].filled && orders_[0].epoch < orders_[1].epoch) ? orders_[0] : orders_[1];
  const auto count = static_cast<std::uint32_t>(data_->train_images.count);
  slot.order.resize(count);
  for (std::uint32_t i = 0; i < count; ++i)
    slot.order[i] = i;
  for (std::uint32_t i = count - 1; i > 0; --i)
    std::swap(slot.order[i], slot.order[mix_coordinates(seed_, kShuffleStream, epoch, i) % (i + 1)]);
  slot.epoch = epoch;
  slot.filled = true;
  return slot.order;
}

std::vector<std::uint32_t> TrainingSource::batch_samples(RankId rank, int iteration) const
{
  const std::uint64_t count = data_->train_images.count;
  const std::uint64_t first = (static_cast<std::uint64_t>(iteration) * ranks_ + rank) * options_.batch;
  std::vector<std::uint32_t> samples(options_.batch);
  for (std::size_t j = 0; j < options_.batch; ++j) {
    const std::uint64_t position = first + j;
    samples[j] = epoch_order(position / count)[position % count];
  }
  return samples;
}

void TrainingSource::generate(RankId rank, int iteration, std::span<float> out) const
{
  if (rank < 0 || rank >= ranks_ || out.size() != model_.parameter_count())
    throw std::invalid_argument(fmt::format("fashion_mnist_mlp: rank {} of {}, or {} gradient entries for a model of "
                                            "{} parameters",
                                            rank, ranks_, out.size(), model_.parameter_count()));
  const std::vector<float>* weights = nullptr;
  if (iteration == updates_)
    weights = &current_;
  else if (iteration + 1 == updates_)
    weights = &previous_;
  else
    throw std::logic_error(fmt::format("fashion_mnist_mlp: gradient of iteration {} asked for after {} updates (only "
                                       "the current and the previous iteration are available)",
                                       iteration, updates_));
  gather(data_->train_images, data_->train_labels, batch_samples(rank, iteration), inputs_, labels_);
  const double loss = model_.loss_and_gradient(*weights, inputs_, labels_, out, scratch_);
  if (iteration == updates_) {
    batch_loss_[rank] = loss;
    batch_loss_iteration_[rank] = iteration;
  }
}

void TrainingSource::begin_update(int iteration, int ranks)
{
  if (iteration != updates_ || ranks != ranks_)
    throw std::logic_error(fmt::format("fashion_mnist_mlp: update of iteration {} from {} ranks, expected iteration "
                                       "{} from {}",
                                       iteration, ranks, updates_, ranks_));
  nlohmann::json entry = {{"iteration", iteration}};
  double loss_sum = 0;
  for (int r = 0; r < ranks_; ++r) {
    if (batch_loss_iteration_[r] != iteration)
      generate(r, iteration, gradient_);
    loss_sum += batch_loss_[r];
  }
  entry["train_loss"] = loss_sum / ranks_;

  if (iteration % options_.eval_every == 0) {
    Mlp::Evaluation total;
    std::vector<std::uint32_t> samples;
    for (std::size_t begin = 0; begin < options_.eval_samples; begin += kEvalChunk) {
      samples.clear();
      for (std::size_t i = begin; i < std::min(begin + kEvalChunk, options_.eval_samples); ++i)
        samples.push_back(static_cast<std::uint32_t>(i));
      gather(data_->test_images, data_->test_labels, samples, inputs_, labels_);
      const Mlp::Evaluation chunk = model_.evaluate(current_, inputs_, labels_, scratch_);
      total.loss_sum += chunk.loss_sum;
      total.correct += chunk.correct;
    }
    entry["test_accuracy"] = static_cast<double>(total.correct) / static_cast<double>(options_.eval_samples);
    entry["test_loss"] = total.loss_sum / static_cast<double>(options_.eval_samples);
  }
  log_.push_back(std::move(entry));
  previous_ = current_;
  ++updates_;
}

void TrainingSource::apply_update(int iteration, const SparseVector& sum, int ranks)
{
  for (Index i : sum.indices)
    if (i >= current_.size())
      throw std::logic_error(
          fmt::format("fashion_mnist_mlp: update index {} beyond the model's {} parameters", i, current_.size()));
  begin_update(iteration, ranks);
  const auto scale = static_cast<float>(options_.learning_rate / ranks);
  for (std::size_t e = 0; e < sum.size(); ++e)
    current_[sum.indices[e]] -= scale * sum.values[e];
}

void TrainingSource::apply_dense_update(int iteration, std::span<const float> sum, int ranks)
{
  if (sum.size() != current_.size())
    throw std::runtime_error(fmt::format("fashion_mnist_mlp: a dense update of {} values for a model of {} "
                                         "parameters (workload.data must be \"real\" to train)",
                                         sum.size(), current_.size()));
  begin_update(iteration, ranks);
  const auto scale = static_cast<float>(options_.learning_rate / ranks);
  for (std::size_t i = 0; i < sum.size(); ++i)
    current_[i] -= scale * sum[i];
}

std::unique_ptr<GradientSource> make_training_source(JsonReader& gradients, const GradientContext& context)
{
  if (context.phantom_data)
    throw ConfigError("workload.data", "\"phantom\"",
                      "\"real\" with gradients.source \"fashion_mnist_mlp\" (training applies the values the "
                      "collective produces, and phantom data has none)");
  TrainingOptions options;
  const std::string dataset = gradients.get_string("dataset", kDefaultDataset);
  options.dataset =
      std::filesystem::path(dataset).is_absolute() ? std::filesystem::path(dataset) : context.config_dir / dataset;
  if (gradients.has("hidden")) {
    options.hidden.clear();
    for (std::int64_t width : gradients.get_int_list("hidden", 1, 1 << 16))
      options.hidden.push_back(static_cast<std::size_t>(width));
  }
  options.batch = static_cast<std::size_t>(gradients.get_int("batch", 32, 1, 1 << 16));
  options.learning_rate = gradients.get_number("learning_rate", 0.1, 0.0, 1e6, true);
  options.eval_every = static_cast<int>(gradients.get_int("eval_every", 10, 1, 1'000'000));
  options.eval_samples = static_cast<std::size_t>(gradients.get_int("eval_samples", 1000, 1, 1'000'000));

  // Fashion-MNIST's image size and class count are fixed, so n is known before reading the files.
  const Mlp model(widths_of(FashionMnist::kImageSide * FashionMnist::kImageSide, options.hidden));
  if (model.parameter_count() != context.n)
    throw ConfigError("workload.n", std::to_string(context.n),
                      fmt::format("{}, the parameter count of the {} MLP of gradients.hidden", model.parameter_count(),
                                  model.describe()));

  std::shared_ptr<FashionMnist> data;
  try {
    data = std::make_shared<FashionMnist>(load_fashion_mnist(options.dataset));
  } catch (const DatasetError& e) {
    throw ConfigError(gradients.path_of("dataset"), describe_json(options.dataset.string()),
                      fmt::format("a folder holding Fashion-MNIST's IDX files ({})", e.what()));
  }
  if (options.eval_samples > data->test_images.count)
    gradients.fail("eval_samples", options.eval_samples,
                   fmt::format("at most the {} test images", data->test_images.count));
  return std::make_unique<TrainingSource>(std::move(data), std::move(options), context.seed, context.ranks);
}

} // namespace sparsim
