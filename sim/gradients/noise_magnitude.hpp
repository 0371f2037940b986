// The magnitude of the calibrated source's per-rank noise, |X| with X = Z exp(tau B - tau^2) for independent
// standard normals Z and B (a normal variance mixture), as a tabulated distribution for the candidates
// generation (sim/gradients/candidate_sampler.hpp).
//
// With L(x) = -log P(|X| > x), |X| = L^-1(Y) for Y ~ Exp(1). The table holds L^-1 on a uniform grid of y and
// interpolates linearly between grid points; that tabulated L^-1 *defines* the distribution the candidates
// generation samples: the event |X| > L^-1(y) has probability exactly exp(-y) under it, so the generation's
// bucket probabilities need no further approximation. Against the mixture itself (P(|X| > x) computed by
// quadrature over B) the survival function differs by less than 1e-4 relative up to y = 64 (tested).
#pragma once

#include <cstdint>
#include <vector>

namespace sparsim {

class NoiseMagnitude {
public:
  static constexpr double kMaxY = 64;       // beyond: probability below exp(-64) = 1.6e-28, never visited
  static constexpr int kStepsPerUnit = 256; // grid of y

  explicit NoiseMagnitude(double tau);

  // L^-1(y): the magnitude exceeded with probability exp(-y), 0 <= y <= kMaxY.
  double magnitude(double y) const
  {
    const double position = y * kStepsPerUnit;
    const auto cell = static_cast<std::size_t>(position);
    if (cell + 1 >= inverse_.size())
      return inverse_.back();
    const double fraction = position - static_cast<double>(cell);
    return inverse_[cell] + fraction * (inverse_[cell + 1] - inverse_[cell]);
  }
  // L(x) under the tabulated distribution: -log P(|X| > x); 0 for x <= 0, kMaxY beyond the table.
  double log_survival(double x) const;
  // P(X > a) for the signed noise (X is symmetric): exp(-L(a)) / 2 for a >= 0, 1 - exp(-L(-a)) / 2 below.
  double upper_tail(double a) const;
  // The signed noise's partial moments above a: P(X > a), E[X; X > a] and E[X^2; X > a], under the tabulated
  // distribution (the mean-field residual's moment matching, sim/gradients/mean_field.hpp).
  struct Partial {
    double probability = 0, first = 0, second = 0;
  };
  Partial above(double a) const;
  // E[X^2] under the tabulated distribution (1 up to the table's resolution).
  double second_moment() const { return tail_second_.front(); }
  // X beyond a on the upper side, X > a, from two uniforms in [0, 1): exact under the tabulated distribution.
  double draw_above(double a, double u_side, double u_magnitude) const;

  // -log P(|X| > x) for the mixture itself, by quadrature over B (the reference the table is built from).
  static double mixture_log_survival(double tau, double x);

private:
  std::vector<double> inverse_; // L^-1 at y = j / kStepsPerUnit
  // E[|X|; Y > y] and E[X^2; Y > y] at the grid's y (|X| = L^-1(Y), Y ~ Exp(1)): the integrals of L^-1(y') e^-y'
  // and L^-1(y')^2 e^-y' from y to kMaxY, by the trapezoid rule from the top.
  std::vector<double> tail_first_, tail_second_;
  Partial beyond_table_; // above(a) for a at or beyond the table's last magnitude
  double tail_at(const std::vector<double>& table, double y) const;
  // An index that narrows log_survival's search: x's double bits above the low mantissa bits name a bucket
  // [edge_b, edge_b+1) (a fixed fraction of an octave), and bucket_start_[b] is the first grid point above edge_b,
  // so the cell of any x in the bucket lies between bucket_start_[b] and bucket_start_[b + 1].
  static constexpr int kBucketBits = 52 - 12; // 4096 buckets per octave
  std::uint64_t first_bucket_ = 0;
  std::vector<std::uint32_t> bucket_start_;
};

} // namespace sparsim
