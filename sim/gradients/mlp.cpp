#include "sim/gradients/mlp.hpp"

#include "sim/gradients/source.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sparsim {
namespace {

// Stream tag of the initialisation draws in mix_coordinates' rank slot, apart from any rank's draws.
constexpr std::uint64_t kInitStream = 0x1417'0000'0000'0001ull;

// The softmax cross-entropy of one sample's logits; writes the softmax probabilities into `probabilities`.
double cross_entropy(std::span<const float> logits, std::uint8_t label, std::span<float> probabilities)
{
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (std::size_t c = 0; c < logits.size(); ++c) {
    probabilities[c] = std::exp(logits[c] - top);
    sum += probabilities[c];
  }
  for (auto& p : probabilities)
    p = static_cast<float>(p / sum);
  return std::log(sum) + top - logits[label];
}

} // namespace

Mlp::Mlp(std::vector<std::size_t> widths)
    : widths_(std::move(widths))
{
  if (widths_.size() < 2 || std::find(widths_.begin(), widths_.end(), 0) != widths_.end())
    throw std::invalid_argument("an MLP needs at least an input and an output width, none of them 0");
  layers_.resize(widths_.size() - 1);
  // The flat vector starts with the last layer (bias, then weight) and ends with the first.
  std::size_t offset = 0;
  for (std::size_t l = layers_.size(); l-- > 0;) {
    MlpLayer& layer = layers_[l];
    layer.in = widths_[l];
    layer.out = widths_[l + 1];
    layer.bias_offset = offset;
    layer.weight_offset = offset + layer.out;
    offset += layer.out + layer.out * layer.in;
  }
  parameter_count_ = offset;
}

std::string Mlp::describe() const
{
  std::string text = std::to_string(widths_.front());
  for (std::size_t l = 1; l < widths_.size(); ++l) {
    text += '-';
    text += std::to_string(widths_[l]);
  }
  return text;
}

void Mlp::initialise(std::span<float> params, std::uint64_t seed) const
{
  if (params.size() != parameter_count_)
    throw std::invalid_argument("Mlp::initialise: wrong parameter count");
  for (const MlpLayer& layer : layers_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(layer.in));
    const std::size_t begin = layer.bias_offset, end = layer.weight_offset + layer.out * layer.in;
    for (std::size_t i = begin; i < end; ++i) {
      const double unit = static_cast<double>(mix_coordinates(seed, kInitStream, 0, i) >> 11) * 0x1.0p-53;
      params[i] = static_cast<float>((2 * unit - 1) * bound);
    }
  }
}

void Mlp::forward(std::span<const float> params, std::span<const float> inputs, std::size_t batch,
                  MlpScratch& scratch) const
{
  scratch.activations.resize(layers_.size());
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const MlpLayer& layer = layers_[l];
    const float* x = l == 0 ? inputs.data() : scratch.activations[l - 1].data();
    const float* weight = params.data() + layer.weight_offset;
    const float* bias = params.data() + layer.bias_offset;

    // Z = X W^T + b, one sample at a time, accumulating rows of W^T (contiguous, vectorisable) scaled by the
    // sample's inputs; zero inputs (black pixels, switched-off ReLUs: about half) are skipped.
    scratch.transposed.resize(layer.in * layer.out);
    for (std::size_t j = 0; j < layer.in; ++j)
      for (std::size_t o = 0; o < layer.out; ++o)
        scratch.transposed[j * layer.out + o] = weight[o * layer.in + j];
    const bool hidden = l + 1 < layers_.size();
    std::vector<float>& a = scratch.activations[l];
    a.resize(batch * layer.out);
    for (std::size_t s = 0; s < batch; ++s) {
      float* z = a.data() + s * layer.out;
      std::copy(bias, bias + layer.out, z);
      const float* xs = x + s * layer.in;
      for (std::size_t j = 0; j < layer.in; ++j) {
        if (xs[j] == 0.0f)
          continue;
        const float* wt = scratch.transposed.data() + j * layer.out;
        for (std::size_t o = 0; o < layer.out; ++o)
          z[o] += xs[j] * wt[o];
      }
      if (hidden) // ReLU
        for (std::size_t o = 0; o < layer.out; ++o)
          z[o] = std::max(z[o], 0.0f);
    }
  }
}

double Mlp::loss_and_gradient(std::span<const float> params, std::span<const float> inputs,
                              std::span<const std::uint8_t> labels, std::span<float> gradient,
                              MlpScratch& scratch) const
{
  const std::size_t batch = labels.size();
  if (params.size() != parameter_count_ || gradient.size() != parameter_count_ ||
      inputs.size() != batch * widths_.front() || batch == 0)
    throw std::invalid_argument("Mlp::loss_and_gradient: inconsistent sizes");
  forward(params, inputs, batch, scratch);

  // d(mean loss)/d logits = (softmax - one-hot) / batch.
  const std::size_t classes = widths_.back();
  const std::vector<float>& logits = scratch.activations.back();
  scratch.delta.resize(batch * classes);
  double loss = 0;
  for (std::size_t s = 0; s < batch; ++s) {
    std::span<float> d(scratch.delta.data() + s * classes, classes);
    loss += cross_entropy({logits.data() + s * classes, classes}, labels[s], d);
    d[labels[s]] -= 1.0f;
    for (auto& v : d)
      v /= static_cast<float>(batch);
  }

  // Backward, last layer first: dW = delta^T X, db = column sums of delta, delta below = (delta W) * ReLU'.
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const MlpLayer& layer = layers_[l];
    const float* x = l == 0 ? inputs.data() : scratch.activations[l - 1].data();
    const float* weight = params.data() + layer.weight_offset;
    float* weight_gradient = gradient.data() + layer.weight_offset;
    float* bias_gradient = gradient.data() + layer.bias_offset;
    for (std::size_t o = 0; o < layer.out; ++o) {
      float* row = weight_gradient + o * layer.in;
      for (std::size_t s = 0; s < batch; ++s) {
        const float d = scratch.delta[s * layer.out + o];
        if (d == 0.0f) // a unit ReLU switched off for this sample: nothing flows back
          continue;
        bias_gradient[o] += d;
        const float* xs = x + s * layer.in;
        for (std::size_t j = 0; j < layer.in; ++j)
          row[j] += d * xs[j];
      }
    }
    if (l == 0)
      break;
    scratch.delta_below.assign(batch * layer.in, 0.0f);
    for (std::size_t s = 0; s < batch; ++s) {
      float* below = scratch.delta_below.data() + s * layer.in;
      for (std::size_t o = 0; o < layer.out; ++o) {
        const float d = scratch.delta[s * layer.out + o];
        if (d == 0.0f)
          continue;
        const float* w = weight + o * layer.in;
        for (std::size_t j = 0; j < layer.in; ++j)
          below[j] += d * w[j];
      }
      const float* xs = x + s * layer.in; // the ReLU outputs of the layer below: positive where it was active
      for (std::size_t j = 0; j < layer.in; ++j)
        below[j] = xs[j] > 0.0f ? below[j] : 0.0f;
    }
    std::swap(scratch.delta, scratch.delta_below);
  }
  return loss / static_cast<double>(batch);
}

Mlp::Evaluation Mlp::evaluate(std::span<const float> params, std::span<const float> inputs,
                              std::span<const std::uint8_t> labels, MlpScratch& scratch) const
{
  const std::size_t batch = labels.size();
  if (params.size() != parameter_count_ || inputs.size() != batch * widths_.front())
    throw std::invalid_argument("Mlp::evaluate: inconsistent sizes");
  Evaluation result;
  if (batch == 0)
    return result;
  forward(params, inputs, batch, scratch);
  const std::size_t classes = widths_.back();
  std::vector<float> probabilities(classes);
  for (std::size_t s = 0; s < batch; ++s) {
    std::span<const float> logits(scratch.activations.back().data() + s * classes, classes);
    result.loss_sum += cross_entropy(logits, labels[s], probabilities);
    const auto predicted = static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    result.correct += predicted == labels[s];
  }
  return result;
}

} // namespace sparsim
