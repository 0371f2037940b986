// A multilayer perceptron written out by hand (no framework): fully connected layers with ReLU between
// them, softmax cross-entropy on the last layer's outputs, forward and backward passes on a mini-batch.
// It is the model behind the closed-loop training source: small enough to train thousands of mini-batches
// inside a simulation, real enough for its gradients to show the structure real sparsifiers meet.
//
// Parameters live in one flat vector of n floats, in reverse registration order, as the Ok-Topk reference
// flattens its VGG and LSTM models (last layer first; shared/docs/algorithms.md). PyTorch registers each
// layer's weight, then its bias, so reversing puts every bias before its weight:
//
//   [ bias_L | weight_L | bias_{L-1} | weight_{L-1} | ... | bias_1 | weight_1 ]
//
// A weight is a row-major [out][in] matrix (PyTorch's nn.Linear layout): element (o, j), from input j to
// output o, sits at weight_offset + o * in + j.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sparsim {

struct MlpLayer {
  std::size_t in = 0;
  std::size_t out = 0;
  std::size_t weight_offset = 0; // into the flat parameter vector
  std::size_t bias_offset = 0;
};

// Buffers reused from one mini-batch to the next (sized on first use).
struct MlpScratch {
  std::vector<std::vector<float>> activations; // layer l's outputs (after ReLU on hidden layers), [sample][unit]
  std::vector<float> transposed;               // one layer's weight transposed, [in][out]
  std::vector<float> delta;                    // d loss / d (a layer's pre-activation), [sample][unit]
  std::vector<float> delta_below;              // the same one layer down
};

class Mlp {
public:
  // widths: input size, hidden widths..., number of classes (at least two entries).
  explicit Mlp(std::vector<std::size_t> widths);

  const std::vector<std::size_t>& widths() const { return widths_; }
  // layers()[0] is the first layer (input side); its parameters are at the end of the flat vector.
  const std::vector<MlpLayer>& layers() const { return layers_; }
  std::size_t parameter_count() const { return parameter_count_; }
  std::size_t classes() const { return widths_.back(); }
  std::string describe() const; // "784-64-10"

  // Draws every parameter uniformly in [-1/sqrt(in), 1/sqrt(in)) of its layer (PyTorch's nn.Linear
  // default), as a pure function of (seed, flat index).
  void initialise(std::span<float> params, std::uint64_t seed) const;

  // Mean softmax cross-entropy over the batch (`inputs` is [batch][in], labels in 0..classes-1), and its
  // gradient with respect to every parameter written into `gradient` (parameter_count() floats).
  double loss_and_gradient(std::span<const float> params, std::span<const float> inputs,
                           std::span<const std::uint8_t> labels, std::span<float> gradient, MlpScratch& scratch) const;

  // Forward pass only: the summed cross-entropy over the batch and the number of samples whose largest
  // output is their label (ties go to the lower class).
  struct Evaluation {
    double loss_sum = 0;
    std::size_t correct = 0;
  };
  Evaluation evaluate(std::span<const float> params, std::span<const float> inputs,
                      std::span<const std::uint8_t> labels, MlpScratch& scratch) const;

private:
  // Fills scratch.activations; the last layer's are the logits, [batch][classes].
  void forward(std::span<const float> params, std::span<const float> inputs, std::size_t batch,
               MlpScratch& scratch) const;

  std::vector<std::size_t> widths_;
  std::vector<MlpLayer> layers_;
  std::size_t parameter_count_ = 0;
};

} // namespace sparsim
