// A closed-loop gradient source: data-parallel SGD of a small MLP (sim/gradients/mlp.hpp) on Fashion-MNIST
// (sim/gradients/fashion_mnist.hpp). Gradients are real, and the model learns from the updates the simulated
// collective actually produced, so sparsification error and error feedback act on training as they would
// on a cluster (the setting of Li and Hoefler's Ok-Topk evaluation, at toy scale).
//
// Iteration t, rank r: the gradient of the mean cross-entropy over r's mini-batch, at the shared weights
// w_t. Mini-batches partition each epoch: the training set is shuffled once per epoch (seeded by the run
// seed and the epoch), and iteration t's global batch of P*B samples is positions (t*P + r)*B + j of the
// endless sequence of epochs, rank r taking the r-th block of B. The driver then hands over the reduced sum
// once per iteration, and w_{t+1} = w_t - lr * sum / P (plain SGD, no momentum or weight decay).
//
// Memory: one model shared by every rank, the previous iteration's weights, and scratch buffers; no
// per-rank copies. generate() is a function of (rank, iteration) for the current iteration and the one
// before it (the driver's dense verifier regenerates iteration t after update t was applied); asking for
// any other iteration is a logic error. Not thread-safe: SimGrid runs one actor at a time.
#pragma once

#include "sim/gradients/fashion_mnist.hpp"
#include "sim/gradients/mlp.hpp"
#include "sim/gradients/source.hpp"

#include <array>
#include <memory>

namespace sparsim {

struct TrainingOptions {
  std::filesystem::path dataset;          // folder of the four IDX files
  std::vector<std::size_t> hidden = {64}; // hidden layer widths, input side first
  std::size_t batch = 32;                 // samples per rank per iteration
  double learning_rate = 0.1;
  int eval_every = 10;             // test accuracy on iterations 0, eval_every, 2*eval_every, ...
  std::size_t eval_samples = 1000; // the first eval_samples test images
};

class TrainingSource final : public GradientSource {
public:
  TrainingSource(std::shared_ptr<const FashionMnist> data, TrainingOptions options, std::uint64_t seed, int ranks);

  std::string name() const override { return "fashion_mnist_mlp"; }
  bool closed_loop() const override { return true; }
  nlohmann::json to_json() const override;
  void generate(RankId rank, int iteration, std::span<float> out) const override;
  void apply_update(int iteration, const SparseVector& sum, int ranks) override;
  void apply_dense_update(int iteration, std::span<const float> sum, int ranks) override;
  // One entry per applied iteration: {"iteration", "train_loss"} (the mean over ranks of their mini-batch
  // losses at w_t), plus {"test_accuracy", "test_loss"} at w_t on evaluated iterations.
  nlohmann::json training_log() const override { return log_; }

  const Mlp& model() const { return model_; }
  std::span<const float> weights() const { return current_; }
  // The training-set indices of rank `rank`'s mini-batch at iteration `iteration`.
  std::vector<std::uint32_t> batch_samples(RankId rank, int iteration) const;

private:
  // Records the loss of w_t and the test metrics, then moves to w_{t+1}.
  void begin_update(int iteration, int ranks);
  const std::vector<std::uint32_t>& epoch_order(std::uint64_t epoch) const;

  std::shared_ptr<const FashionMnist> data_;
  TrainingOptions options_;
  std::uint64_t seed_;
  int ranks_;
  Mlp model_;
  std::vector<float> current_;  // w_t, t = updates_
  std::vector<float> previous_; // w_{t-1}
  int updates_ = 0;
  nlohmann::json log_ = nlohmann::json::array();

  // Scratch, reused by every generate() call.
  struct EpochOrder {
    std::uint64_t epoch = 0;
    bool filled = false;
    std::vector<std::uint32_t> order;
  };
  mutable std::array<EpochOrder, 2> orders_; // the epochs around the current iteration's batches
  mutable MlpScratch scratch_;
  mutable std::vector<float> inputs_;
  mutable std::vector<std::uint8_t> labels_;
  mutable std::vector<float> gradient_;    // for losses of ranks the driver did not ask for
  mutable std::vector<double> batch_loss_; // [rank]: the loss of the last mini-batch of the current iteration
  mutable std::vector<int> batch_loss_iteration_;
};

// Reads the keys of {"source": "fashion_mnist_mlp", ...} (the caller calls finish()). ConfigError at
// gradients.dataset when the files are missing or malformed, at workload.n when n is not the MLP's
// parameter count.
std::unique_ptr<GradientSource> make_training_source(JsonReader& gradients, const GradientContext& context);

} // namespace sparsim
