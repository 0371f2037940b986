#include "sim/gradients/noise_magnitude.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace sparsim {
namespace {

// log erfc(z) for z >= 0 without underflow: the asymptotic series where erfc itself would underflow.
double log_erfc(double z)
{
  if (z < 25)
    return std::log(std::erfc(z));
  const double inverse_square = 1 / (z * z);
  return -z * z - std::log(z * std::sqrt(std::numbers::pi)) +
         std::log1p(-inverse_square / 2 + 3 * inverse_square * inverse_square / 4);
}

} // namespace

double NoiseMagnitude::mixture_log_survival(double tau, double x)
{
  if (x <= 0)
    return 0;
  if (tau == 0)
    return -log_erfc(x / std::numbers::sqrt2);
  // P(|X| > x) = E_B[erfc(x / (sqrt 2 v(B)))], v(b) = exp(tau b - tau^2): Simpson's rule over b in [-12, 12]
  // (the normal's mass outside is 4e-33), summed in log space (the terms span hundreds of orders).
  constexpr int kIntervals = 1200;
  constexpr double kRange = 12;
  const double h = 2 * kRange / kIntervals;
  std::vector<double> terms(kIntervals + 1);
  double largest = -INFINITY;
  for (int j = 0; j <= kIntervals; ++j) {
    const double b = -kRange + j * h;
    const double weight = (j == 0 || j == kIntervals) ? 1 : (j % 2 ? 4 : 2);
    const double v = std::exp(tau * b - tau * tau);
    terms[j] = std::log(weight * h / 3) - b * b / 2 - std::log(2 * std::numbers::pi) / 2 +
               log_erfc(x / (std::numbers::sqrt2 * v));
    largest = std::max(largest, terms[j]);
  }
  double sum = 0;
  for (double t : terms)
    sum += std::exp(t - largest);
  return std::max(0.0, -(largest + std::log(sum)));
}

NoiseMagnitude::NoiseMagnitude(double tau)
{
  if (!(tau >= 0))
    throw std::invalid_argument("NoiseMagnitude: tau must be >= 0");
  // L at x = 0 and on a grid uniform in log x from where L is still negligible (1e-6) to the first point
  // beyond kMaxY: that resolves the bulk and tails stretched by a large tau alike.
  double x_low = 1e-2, x_high = 1;
  while (mixture_log_survival(tau, x_low) > 1e-6)
    x_low /= 2;
  while (mixture_log_survival(tau, x_high) <= kMaxY)
    x_high *= 2;
  constexpr int kPoints = 8192;
  std::vector<double> s(kPoints + 2), L(kPoints + 2);
  s[0] = 0; // x itself, for the first interval [0, x_low]
  L[0] = 0;
  for (int i = 0; i <= kPoints; ++i) {
    s[i + 1] = std::log(x_low) + (std::log(x_high) - std::log(x_low)) * i / kPoints;
    L[i + 1] = mixture_log_survival(tau, std::exp(s[i + 1]));
  }
  // Inverted at every y of the grid, linearly in s between the points around it.
  const int steps = static_cast<int>(kMaxY) * kStepsPerUnit;
  inverse_.resize(static_cast<std::size_t>(steps) + 1);
  std::size_t cell = 0;
  for (int j = 0; j <= steps; ++j) {
    const double y = static_cast<double>(j) / kStepsPerUnit;
    while (cell + 2 < L.size() && L[cell + 1] <= y)
      ++cell;
    const double span = L[cell + 1] - L[cell];
    const double fraction = span > 0 ? std::clamp((y - L[cell]) / span, 0.0, 1.0) : 0.0;
    // Linear in x on [0, x_low], in log x beyond.
    inverse_[static_cast<std::size_t>(j)] =
        cell == 0 ? fraction * x_low : std::exp(s[cell] + fraction * (s[cell + 1] - s[cell]));
  }
  inverse_[0] = 0;
  for (std::size_t j = 1; j < inverse_.size(); ++j) // monotone even where L is flat to rounding
    inverse_[j] = std::max(inverse_[j], inverse_[j - 1]);
  // The tail moments: between grid points L^-1 is linear in y, so the trapezoid rule on a 1/256 grid is
  // accurate to a few 1e-6 of the moments.
  tail_first_.assign(inverse_.size(), 0.0);
  tail_second_.assign(inverse_.size(), 0.0);
  const double step = 1.0 / kStepsPerUnit;
  for (std::size_t j = inverse_.size() - 1; j-- > 0;) {
    const double y0 = static_cast<double>(j) * step, y1 = y0 + step;
    const double a = inverse_[j], b = inverse_[j + 1];
    tail_first_[j] = tail_first_[j + 1] + step / 2 * (a * std::exp(-y0) + b * std::exp(-y1));
    tail_second_[j] = tail_second_[j + 1] + step / 2 * (a * a * std::exp(-y0) + b * b * std::exp(-y1));
  }
  beyond_table_ = {std::exp(-kMaxY) / 2, tail_at(tail_first_, kMaxY) / 2, tail_at(tail_second_, kMaxY) / 2};
  // The search index, from an octave below the first positive grid point to one above the last.
  const double lowest = *std::upper_bound(inverse_.begin(), inverse_.end(), 0.0);
  first_bucket_ = std::bit_cast<std::uint64_t>(lowest / 2) >> kBucketBits;
  const std::uint64_t last_bucket = std::bit_cast<std::uint64_t>(inverse_.back() * 2) >> kBucketBits;
  bucket_start_.resize(last_bucket - first_bucket_ + 2);
  for (std::size_t b = 0; b < bucket_start_.size(); ++b) {
    const auto edge = std::bit_cast<double>((first_bucket_ + b) << kBucketBits);
    bucket_start_[b] =
        static_cast<std::uint32_t>(std::upper_bound(inverse_.begin(), inverse_.end(), edge) - inverse_.begin());
  }
}

double NoiseMagnitude::tail_at(const std::vector<double>& table, double y) const
{
  const double position = std::clamp(y, 0.0, kMaxY) * kStepsPerUnit;
  const auto cell = static_cast<std::size_t>(position);
  if (cell + 1 >= table.size())
    return table.back();
  const double fraction = position - static_cast<double>(cell);
  return table[cell] + fraction * (table[cell + 1] - table[cell]);
}

NoiseMagnitude::Partial NoiseMagnitude::above(double a) const
{
  // By symmetry, with y = L(|a|): E[X; X > a] = E[|X|; |X| > |a|] / 2 whatever a's sign; for a < 0 the
  // probability and the second moment are the whole minus the part below a.
  if (std::fabs(a) >= inverse_.back()) // beyond the table: y = kMaxY
    return a >= 0 ? beyond_table_
                  : Partial{1 - beyond_table_.probability, beyond_table_.first, second_moment() - beyond_table_.second};
  const double y = log_survival(std::fabs(a));
  const double tail_probability = std::exp(-y) / 2;
  const double tail_second = tail_at(tail_second_, y) / 2;
  Partial partial;
  partial.first = tail_at(tail_first_, y) / 2;
  partial.probability = a >= 0 ? tail_probability : 1 - tail_probability;
  partial.second = a >= 0 ? tail_second : second_moment() - tail_second;
  return partial;
}

double NoiseMagnitude::draw_above(double a, double u_side, double u_magnitude) const
{
  const double y = log_survival(std::fabs(a));
  if (a >= 0) // |X| beyond |a|: Y = L(a) + Exp(1)
    return magnitude(std::min(kMaxY, y - std::log1p(-u_magnitude)));
  // X > a < 0: the whole upper half (probability 1/2), or the lower side above a, |X| < |a|.
  const double below = -std::expm1(-y); // P(|X| < |a|)
  if (u_side * (1 + below) < 1)
    return magnitude(std::min(kMaxY, -std::log1p(-u_magnitude)));
  return -magnitude(std::min(kMaxY, -std::log1p(-u_magnitude * below)));
}

double NoiseMagnitude::log_survival(double x) const
{
  if (x <= 0)
    return 0;
  if (x >= inverse_.back())
    return kMaxY;
  // The grid cell [j, j + 1] with inverse_[j] <= x < inverse_[j + 1], then linear within it (the table's own
  // interpolation, inverted).
  // Below the first bucket the cell is at most bucket_start_[0]; within bucket b at most bucket_start_[b + 1].
  const std::uint64_t bucket = std::bit_cast<std::uint64_t>(x) >> kBucketBits; // monotone in x > 0
  const bool below = bucket < first_bucket_;
  const std::size_t b = below ? 0 : std::min<std::size_t>(bucket - first_bucket_, bucket_start_.size() - 2);
  const auto first = inverse_.begin() + (below ? 0 : bucket_start_[b]);
  const auto last = inverse_.begin() + (below ? bucket_start_[0] : bucket_start_[b + 1]);
  const auto upper = std::upper_bound(first, last, x);
  const auto j = static_cast<std::size_t>(upper - inverse_.begin()) - 1;
  const double span = inverse_[j + 1] - inverse_[j];
  const double fraction = span > 0 ? (x - inverse_[j]) / span : 0.0;
  return (static_cast<double>(j) + fraction) / kStepsPerUnit;
}

double NoiseMagnitude::upper_tail(double a) const
{
  if (std::fabs(a) >= inverse_.back()) // beyond the table: y = kMaxY
    return a >= 0 ? beyond_table_.probability : 1 - beyond_table_.probability;
  return a >= 0 ? std::exp(-log_survival(a)) / 2 : 1 - std::exp(-log_survival(-a)) / 2;
}

} // namespace sparsim
