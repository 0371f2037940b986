#include "sim/gradients/mean_field.hpp"

#include "sim/base/parallel.hpp"
#include "sim/gradients/random_streams.hpp"
#include "sim/gradients/source.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace sparsim {
namespace {

constexpr std::uint64_t kSaltCarried = 0x636172726965646eull; // the carried entries' fresh gradient
constexpr int kLevelsPerOctave = 8;                           // visit probabilities 2^(-l/8)
constexpr int kLevels = 60 * kLevelsPerOctave + 1;            // below 2^-60 an entry is left out
constexpr double kLeftOut = 0x1.0p-60;
// Edges of an entry's pieces around the points where R alone reaches +-floor, in units of the noise's amplitude:
// within a piece the chance to exceed the floor changes by at most a factor the noise's tail sets.
constexpr std::array<double, 11> kOffsets{-8, -4, -2, -1, -0.5, 0, 0.5, 1, 2, 4, 8};
// The truncated normal's support is cut at 9 standard deviations from its centre (a mass below 2e-19).
constexpr double kSupportSpread = 9;

double density(double z) { return std::exp(-z * z / 2) / std::sqrt(2 * std::numbers::pi); }

// P, E[R; .] and E[R^2; .].
struct Moments {
  double mass = 0, first = 0, second = 0;
};

// The standard normal's mass beyond |z| on z's side, accurate in either tail.
double beyond(double z) { return std::erfc(std::fabs(z) * (std::numbers::sqrt2 / 2)) / 2; }

// P(z1 < Z < z2) from the masses beyond |z1| and |z2|, without cancellation in either tail.
double mass_between(double z1, double beyond1, double z2, double beyond2)
{
  if (z1 >= 0)
    return beyond1 - beyond2;
  if (z2 <= 0)
    return beyond2 - beyond1;
  return 1 - beyond1 - beyond2;
}

// One entry's residual: 0 with probability 1 - nonzero, else N(centre, spread^2) truncated to [-T, T] and cut to
// its effective support [low, high].
struct ResidualLaw {
  double nonzero = 0, centre = 0, spread = 0;
  double normaliser = 0, low = 0, high = 0;
  double beyond_low = 0, beyond_high = 0; // the parent normal's mass beyond the support's ends

  ResidualLaw(double z, double b, double s, double truncation)
      : nonzero(z)
      , centre(b)
      , spread(s)
  {
    if (nonzero <= 0 || !(spread > 0) || !(truncation > 0)) {
      nonzero = 0;
      return;
    }
    low = std::max(-truncation, centre - kSupportSpread * spread);
    high = std::min(truncation, centre + kSupportSpread * spread);
    if (high > low) {
      beyond_low = beyond(standard(low));
      beyond_high = beyond(standard(high));
      normaliser = mass_between(standard(low), beyond_low, standard(high), beyond_high);
    }
    if (!(normaliser > 0))
      nonzero = 0;
  }
  bool has_nonzero() const { return nonzero > 0; }
  double standard(double r) const { return (r - centre) / spread; }

  // Of the nonzero part (times its probability): R in [lo, hi], from the standard points z, their masses beyond
  // and densities.
  Moments between(double z1, double beyond1, double density1, double z2, double beyond2, double density2) const
  {
    const double m0 = mass_between(z1, beyond1, z2, beyond2);
    const double m1 = density1 - density2, m2 = m0 + z1 * density1 - z2 * density2;
    const double k = nonzero / normaliser;
    return {k * m0, k * (centre * m0 + spread * m1),
            k * (centre * centre * m0 + 2 * centre * spread * m1 + spread * spread * m2)};
  }
  Moments between_all() const
  {
    if (!has_nonzero())
      return {};
    return between(standard(low), beyond_low, density(standard(low)), standard(high), beyond_high,
                   density(standard(high)));
  }
  Moments between(double lo, double hi) const
  {
    if (!has_nonzero() || hi <= lo)
      return {};
    const double z1 = standard(lo), z2 = standard(hi);
    return between(z1, beyond(z1), density(z1), z2, beyond(z2), density(z2));
  }
  // R of the nonzero part (of the law N(centre, spread^2)) conditioned on [lo, hi], by the inverse distribution
  // function at u in [0, 1).
  static double draw_between(double centre, double spread, double lo, double hi, double u)
  {
    constexpr double r = std::numbers::sqrt2 / 2;
    const double z1 = (lo - centre) / spread, z2 = (hi - centre) / spread;
    double z = 0;
    if (z1 >= 0) { // the upper tail, by the survival function
      const double q1 = std::erfc(z1 * r) / 2, q2 = std::erfc(z2 * r) / 2;
      z = -normal_quantile(std::max(q1 - u * (q1 - q2), 1e-300));
    } else if (z2 <= 0) {
      const double p1 = std::erfc(-z1 * r) / 2, p2 = std::erfc(-z2 * r) / 2;
      z = normal_quantile(std::max(p1 + u * (p2 - p1), 1e-300));
    } else {
      const double p1 = std::erfc(-z1 * r) / 2, p2 = 1 - std::erfc(z2 * r) / 2;
      z = normal_quantile(std::clamp(p1 + u * (p2 - p1), 1e-300, 1 - 1e-16));
    }
    return centre + spread * std::clamp(z, z1, z2);
  }
};

// The noise's partial moments at the pieces' offsets from the two points where R alone reaches +-t: at an edge
// r = t - m + o s the upper side needs X > -o, at r = -t - m + o s the lower side needs X < -o, whatever the entry.
struct OffsetTails {
  std::array<NoiseMagnitude::Partial, kOffsets.size()> upper, lower; // above(-o), above(o)
  explicit OffsetTails(const NoiseMagnitude& noise)
  {
    for (std::size_t j = 0; j < kOffsets.size(); ++j) {
      upper[j] = noise.above(-kOffsets[j]);
      lower[j] = noise.above(kOffsets[j]);
    }
  }
};

// A point of R where the entry's pieces meet, with what every piece beside it needs: the standard normal's point,
// mass beyond and density there, and the noise's partial moments that take acc = m + r + s X beyond +t (`up`: X >
// (t - m - r) / s) and beyond -t (`down`, mirrored: -X > (t + m + r) / s).
struct Edge {
  double r = 0, z = 0, beyond = 0, density = 0;
  NoiseMagnitude::Partial up, down;
};

// The edges of an entry's pieces for threshold t: the support's ends and, inside, the offsets around +-t - m.
void entry_edges(double m, double s, const ResidualLaw& law, double t, const NoiseMagnitude& noise,
                 const OffsetTails& offsets, std::vector<Edge>& edges)
{
  edges.clear();
  auto add = [&](double r, const NoiseMagnitude::Partial* up, const NoiseMagnitude::Partial* down) {
    Edge& edge = edges.emplace_back();
    edge.r = r;
    edge.up = up ? *up : noise.above((t - m - r) / s);
    edge.down = down ? *down : noise.above((t + m + r) / s);
  };
  add(law.low, nullptr, nullptr);
  for (std::size_t j = 0; j < kOffsets.size(); ++j)
    if (const double r = -t - m + kOffsets[j] * s; r > law.low && r < law.high)
      add(r, nullptr, &offsets.lower[j]);
  for (std::size_t j = 0; j < kOffsets.size(); ++j)
    if (const double r = t - m + kOffsets[j] * s; r > law.low && r < law.high)
      add(r, &offsets.upper[j], nullptr);
  add(law.high, nullptr, nullptr);
  if (!std::is_sorted(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.r < b.r; }))
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.r < b.r; });
  for (Edge& edge : edges) {
    edge.z = law.standard(edge.r);
    edge.density = density(edge.z);
  }
  for (std::size_t e = 1; e + 1 < edges.size(); ++e)
    edges[e].beyond = beyond(edges[e].z);
  edges.front().beyond = law.beyond_low;
  edges.back().beyond = law.beyond_high;
}

// A piece of an entry's proposal: R in [low, high] with probability `weight` (the zero atom: low = high = 0), with
// the fresh gradient (`fresh`) or without it (a row absent from the batch: acc = R).
struct Piece {
  double weight = 0;
  double low = 0, high = 0;
  bool fresh = true;
  double up = 0, down = 0; // fresh: P(X > (floor - m - high) / s), P(X < -(floor + m + low) / s)
  double proposal = 0;     // weight times the probability of the union of the two
};
// The most pieces an entry has: the zero atom, one per pair of adjacent edges (the support's two ends and the
// offsets around +-floor - m), and the two certain parts of an absent row.
constexpr std::size_t kMostPieces = 1 + (2 * kOffsets.size() + 1) + 2;
static_assert(kMostPieces <= 255, "a plan counts an entry's pieces in a byte");

// The entry's pieces for `floor`; returns the total proposal Q.
double entry_pieces(double m, double s, const ResidualLaw& law, bool absent_possible, double floor,
                    const NoiseMagnitude& noise, const OffsetTails& offsets, std::vector<Edge>& edges,
                    std::vector<Piece>& out)
{
  out.clear();
  auto add_fresh = [&](double weight, double low, double high, double up, double down) {
    out.push_back({weight, low, high, true, up, down, weight * std::min(1.0, up + down)});
  };
  if (law.nonzero < 1)
    add_fresh(1 - law.nonzero, 0, 0, noise.upper_tail((floor - m) / s), noise.upper_tail((floor + m) / s));
  if (law.has_nonzero()) {
    entry_edges(m, s, law, floor, noise, offsets, edges);
    for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
      const Edge &lo = edges[e], &hi = edges[e + 1];
      if (!(hi.r > lo.r))
        continue;
      if (const double mass = law.nonzero / law.normaliser * mass_between(lo.z, lo.beyond, hi.z, hi.beyond); mass > 0)
        add_fresh(mass, lo.r, hi.r, hi.up.probability, lo.down.probability);
    }
    if (absent_possible) { // acc = R: the parts of R's range beyond the floor, each a certain event
      for (const auto& [low, high] :
           {std::pair{std::max(floor, law.low), law.high}, std::pair{law.low, std::min(-floor, law.high)}})
        if (const double mass = law.between(low, high).mass; mass > 0)
          out.push_back({mass, low, high, false, 1, 0, mass});
    }
  }
  double total = 0;
  for (const Piece& piece : out)
    total += piece.proposal;
  return total;
}

// The truncated normal N(b, s^2) on [-T, T] whose mean and variance are the targets, by Newton steps on b and
// multiplicative ones on s from the given start; b stays within [-T, T].
void fit_truncated_normal(double mean, double variance, double truncation, double& b, double& s)
{
  const double sd = std::sqrt(variance);
  if (std::fabs(mean) + kSupportSpread * sd < truncation || !(s > 0)) {
    b = mean;
    s = sd;
    if (std::fabs(mean) + kSupportSpread * sd < truncation)
      return;
  }
  for (int step = 0; step < 24; ++step) {
    const double z1 = (-truncation - b) / s, z2 = (truncation - b) / s;
    const double mass = mass_between(z1, beyond(z1), z2, beyond(z2));
    if (!(mass > 1e-300))
      break;
    const double d1 = density(z1), d2 = density(z2);
    const double shift = (d1 - d2) / mass;
    const double fitted_mean = b + s * shift;
    const double fitted_variance = s * s * (1 + (z1 * d1 - z2 * d2) / mass - shift * shift);
    if (!(fitted_variance > 0))
      break;
    if (std::fabs(fitted_mean - mean) < 1e-7 * truncation && std::fabs(fitted_variance / variance - 1) < 1e-6)
      break;
    b = std::clamp(b + (mean - fitted_mean) * s * s / fitted_variance, -truncation, truncation);
    s = std::clamp(s * std::clamp(std::sqrt(variance / fitted_variance), 0.5, 2.0), 1e-7 * truncation,
                   100 * truncation);
  }
}

// One entry's assumed-density filter step: acc = R + g (g present with probability `presence`), what stays at or
// below `truncation` in magnitude, as a zero atom and a fitted truncated normal.
MeanFieldResidual::EntryState filter_entry(double m, double s, const ResidualLaw& law, double presence,
                                           double truncation, const NoiseMagnitude& noise, const OffsetTails& offsets,
                                           std::vector<Edge>& edges)
{
  const double x2 = noise.second_moment();
  // With the fresh gradient: the whole, minus what leaves (|acc| > truncation). Within a piece of R between two
  // edges, what leaves is integrated by three nodes, exact where it is quadratic in R.
  const Moments residual = law.between_all();
  double in0 = 1, in1 = m + residual.first, in2 = m * m + 2 * m * residual.first + residual.second + s * s * x2;
  auto leave_at = [&](double r, const NoiseMagnitude::Partial& up, const NoiseMagnitude::Partial& down, double weight) {
    const double c = m + r;
    const double p = up.probability + down.probability;
    const double x1 = up.first - down.first;
    const double x2_out = up.second + down.second;
    in0 -= weight * p;
    in1 -= weight * (c * p + s * x1);
    in2 -= weight * (c * c * p + 2 * c * s * x1 + s * s * x2_out);
  };
  if (law.nonzero < 1)
    leave_at(0, noise.above((truncation - m) / s), noise.above((truncation + m) / s), 1 - law.nonzero);
  if (law.has_nonzero()) {
    entry_edges(m, s, law, truncation, noise, offsets, edges);
    for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
      const Edge &lo = edges[e], &hi = edges[e + 1];
      if (!(hi.r > lo.r) || hi.up.probability + lo.down.probability < 1e-13)
        continue; // empty, or stays below the truncation
      const Moments band = law.between(lo.z, lo.beyond, lo.density, hi.z, hi.beyond, hi.density);
      if (!(band.mass > 0))
        continue;
      // Nodes at the two edges and the piece's mean mu, weighted to keep its mass, mean and variance v.
      const double mu = std::clamp(band.first / band.mass, lo.r, hi.r);
      const double v = std::max(0.0, band.second / band.mass - mu * mu);
      const double below = mu - lo.r, above = hi.r - mu;
      const double w_lo = below > 0 ? std::min(1.0, v / (below * (below + above))) : 0.0;
      const double w_hi = above > 0 ? std::min(1.0 - w_lo, v / (above * (below + above))) : 0.0;
      leave_at(lo.r, lo.up, lo.down, band.mass * w_lo);
      leave_at(hi.r, hi.up, hi.down, band.mass * w_hi);
      leave_at(mu, noise.above((truncation - m - mu) / s), noise.above((truncation + m + mu) / s),
               band.mass * (1 - w_lo - w_hi));
    }
  }
  // Without it (a row absent from the batch): acc = R, nonzero with the law's probability.
  const Moments absent =
      presence < 1 ? law.between(std::max(law.low, -truncation), std::min(law.high, truncation)) : Moments{};
  const double nonzero = std::clamp(presence * in0 + (1 - presence) * absent.mass, 0.0, 1.0);
  MeanFieldResidual::EntryState next;
  if (nonzero < 1e-12)
    return next;
  const double mean = (presence * in1 + (1 - presence) * absent.first) / nonzero;
  const double second = (presence * in2 + (1 - presence) * absent.second) / nonzero;
  const double variance = std::max(second - mean * mean, 1e-12 * truncation * truncation);
  double b = law.has_nonzero() ? law.centre : mean;
  double spread = law.has_nonzero() ? law.spread : std::sqrt(variance);
  fit_truncated_normal(std::clamp(mean, -truncation, truncation), variance, truncation, b, spread);
  next.nonzero = nonzero;
  next.centre = b;
  next.spread = spread;
  return next;
}

int level_of(double proposal)
{
  return std::max(0, static_cast<int>(std::ceil(-std::log2(proposal) * kLevelsPerOctave - 1e-9)));
}
double level_probability(int level) { return std::exp2(-static_cast<double>(level) / kLevelsPerOctave); }

} // namespace

// The proposal of one (iteration, floor), shared by the ranks.
struct MeanFieldResidual::Plan {
  int iteration = 0;
  double floor = 0;
  std::vector<Index> entries;           // grouped by level, ascending index within one
  std::vector<float> proposal;          // Q_i beside them
  std::vector<std::size_t> level_begin; // kLevels + 1 offsets
  // The pieces of positions [0, cached_end) (the levels the ranks together visit most), as entry_pieces gives
  // them: position `at` has pieces[piece_begin[at], piece_begin[at + 1]), their proposals also side by side (a
  // visit reads them all to choose one).
  std::size_t cached_end = 0;
  std::vector<std::uint32_t> piece_begin;
  std::vector<Piece> pieces;
  std::vector<double> piece_proposals;

  std::span<const Piece> cached_pieces(std::size_t at) const
  {
    return {pieces.data() + piece_begin[at], pieces.data() + piece_begin[at + 1]};
  }
  std::span<const double> cached_proposals(std::size_t at) const
  {
    return {piece_proposals.data() + piece_begin[at], piece_proposals.data() + piece_begin[at + 1]};
  }
  std::uint64_t cache_bytes() const
  {
    return pieces.size() * (sizeof(Piece) + sizeof(double)) + piece_begin.size() * sizeof(std::uint32_t);
  }
};

bool FreshGradientModel::maybe_absent(Index i) const
{
  return std::any_of(row_sparse.begin(), row_sparse.end(), [&](IndexRange r) { return r.contains(i); });
}

MeanFieldResidual::MeanFieldResidual(std::uint64_t n, int ranks, std::size_t carried_cap)
    : n_(n)
    , cap_(carried_cap)
    , carried_(static_cast<std::size_t>(ranks))
{
}

void MeanFieldResidual::allocate_state()
{
  if (!nonzero_.empty())
    return;
  nonzero_.assign(n_, 0.0f);
  centre_.assign(n_, 0.0f);
  spread_.assign(n_, 0.0f);
}

void MeanFieldResidual::store(Index i, EntryState s)
{
  nonzero_[i] = static_cast<float>(s.nonzero);
  centre_[i] = static_cast<float>(s.centre);
  spread_[i] = static_cast<float>(s.spread);
}

void MeanFieldResidual::set_state(Index i, EntryState s, double truncation)
{
  allocate_state();
  store(i, s);
  truncation_ = truncation;
  std::lock_guard lock(plan_mutex_);
  plans_.clear();
}

std::uint64_t MeanFieldResidual::largest_piece_cache() const
{
  std::lock_guard lock(plan_mutex_);
  return largest_piece_cache_;
}

std::size_t MeanFieldResidual::carried_entries() const
{
  std::size_t total = 0;
  for (const SparseVector& store : carried_)
    total += store.size();
  return total;
}

void MeanFieldResidual::prepare(const FreshGradientModel& fresh, double floor, int threads)
{
  plan(fresh, floor, threads);
}

std::shared_ptr<const MeanFieldResidual::Plan> MeanFieldResidual::plan(const FreshGradientModel& fresh, double floor,
                                                                       int threads) const
{
  std::lock_guard lock(plan_mutex_);
  std::erase_if(plans_, [&](const auto& p) { return p->iteration != fresh.iteration; });
  for (const auto& p : plans_)
    if (p->floor == floor)
      return p;
  auto built = build_plan(fresh, floor, threads);
  largest_piece_cache_ = std::max(largest_piece_cache_, built->cache_bytes());
  if (plans_.size() >= 3)
    plans_.erase(plans_.begin());
  plans_.push_back(built);
  return built;
}

std::shared_ptr<const MeanFieldResidual::Plan> MeanFieldResidual::build_plan(const FreshGradientModel& fresh,
                                                                             double floor, int threads) const
{
  auto plan = std::make_shared<Plan>();
  plan->iteration = fresh.iteration;
  plan->floor = floor;
  // Every entry's total proposal, level and number of pieces, in fixed blocks, then a counting sort by level
  // (blocks in order, so a level stays in ascending index): the same for any thread count.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  const std::size_t blocks = (n_ + kBlock - 1) / kBlock;
  std::vector<float> proposal(n_);
  std::vector<std::uint16_t> level(n_);
  std::vector<std::uint8_t> piece_count(n_);
  std::vector<std::size_t> counts(blocks * kLevels, 0), level_pieces(blocks * kLevels, 0);
  const OffsetTails offsets(*fresh.magnitude);
  auto pieces_of = [&](std::size_t i, std::vector<Edge>& edges, std::vector<Piece>& pieces) {
    const ResidualLaw law =
        nonzero_.empty() ? ResidualLaw(0, 0, 0, 0) : ResidualLaw(nonzero_[i], centre_[i], spread_[i], truncation_);
    return entry_pieces(fresh.mean[i], std::max<double>(fresh.noise[i], 1e-30), law,
                        fresh.maybe_absent(static_cast<Index>(i)), floor, *fresh.magnitude, offsets, edges, pieces);
  };
  parallel_blocks(n_, kBlock, threads, [&](std::size_t begin, std::size_t end) {
    std::vector<Edge> edges;
    std::vector<Piece> pieces;
    std::size_t* count = counts.data() + begin / kBlock * kLevels;
    std::size_t* count_pieces = level_pieces.data() + begin / kBlock * kLevels;
    for (std::size_t i = begin; i < end; ++i) {
      const double q = pieces_of(i, edges, pieces);
      proposal[i] = static_cast<float>(q);
      piece_count[i] = static_cast<std::uint8_t>(pieces.size());
      level[i] = q < kLeftOut ? std::uint16_t{0xFFFF} : static_cast<std::uint16_t>(level_of(q));
      // The float's rounding may lift Q above its level's probability: one level up then.
      if (level[i] != 0xFFFF && level[i] > 0 && static_cast<double>(proposal[i]) > level_probability(level[i]))
        --level[i];
      if (level[i] != 0xFFFF) {
        ++count[level[i]];
        count_pieces[level[i]] += pieces.size();
      }
    }
  });
  plan->level_begin.assign(kLevels + 1, 0);
  std::size_t position = 0;
  for (int l = 0; l < kLevels; ++l) {
    plan->level_begin[l] = position;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t c = counts[b * kLevels + l];
      counts[b * kLevels + l] = position;
      position += c;
    }
  }
  plan->level_begin[kLevels] = position;
  plan->entries.resize(position);
  plan->proposal.resize(position);
  parallel_blocks(n_, kBlock, threads, [&](std::size_t begin, std::size_t end) {
    std::size_t* next = counts.data() + begin / kBlock * kLevels;
    for (std::size_t i = begin; i < end; ++i)
      if (level[i] != 0xFFFF) {
        const std::size_t at = next[level[i]]++;
        plan->entries[at] = static_cast<Index>(i);
        plan->proposal[at] = proposal[i];
      }
  });
  // The cached levels: from the top, those the ranks together visit kCacheVisits times or more per entry, while
  // their pieces fit piece_cache_bound(n).
  const double ranks = static_cast<double>(carried_.size());
  std::uint64_t cache_bytes = 0;
  for (int l = 0; l < kLevels && ranks * level_probability(l) >= kCacheVisits; ++l) {
    std::uint64_t pieces = 0;
    for (std::size_t b = 0; b < blocks; ++b)
      pieces += level_pieces[b * kLevels + l];
    const std::uint64_t entries = plan->level_begin[l + 1] - plan->level_begin[l];
    cache_bytes += pieces * (sizeof(Piece) + sizeof(double)) + entries * sizeof(std::uint32_t);
    if (cache_bytes > piece_cache_bound(n_))
      break;
    plan->cached_end = plan->level_begin[l + 1];
  }
  // Their pieces computed again (the first pass kept only Q), in position order.
  plan->piece_begin.assign(plan->cached_end + 1, 0);
  for (std::size_t at = 0; at < plan->cached_end; ++at)
    plan->piece_begin[at + 1] = plan->piece_begin[at] + piece_count[plan->entries[at]];
  plan->pieces.resize(plan->piece_begin[plan->cached_end]);
  plan->piece_proposals.resize(plan->pieces.size());
  parallel_blocks(plan->cached_end, kBlock, threads, [&](std::size_t begin, std::size_t end) {
    std::vector<Edge> edges;
    std::vector<Piece> pieces;
    for (std::size_t at = begin; at < end; ++at) {
      pieces_of(plan->entries[at], edges, pieces);
      std::copy(pieces.begin(), pieces.end(), plan->pieces.begin() + plan->piece_begin[at]);
      std::transform(pieces.begin(), pieces.end(), plan->piece_proposals.begin() + plan->piece_begin[at],
                     [](const Piece& piece) { return piece.proposal; });
    }
  });
  return plan;
}

void MeanFieldResidual::candidates(const FreshGradientModel& fresh, std::span<const RankId> ranks, double floor,
                                   std::vector<SparseVector>& out) const
{
  const auto current = plan(fresh, floor, 1);
  out.resize(ranks.size());
  for (std::size_t s = 0; s < ranks.size(); ++s)
    sample(*current, fresh, ranks[s], out[s]);
}

void MeanFieldResidual::candidates_at_least(const FreshGradientModel& fresh, std::span<const RankId> ranks,
                                            double floor, std::span<const std::uint64_t> needed,
                                            std::vector<SparseVector>& out) const
{
  candidates(fresh, ranks, floor, out);
  std::vector<SparseVector> again;
  for (std::size_t s = 0; s < ranks.size(); ++s)
    for (double lower = floor; out[s].size() < needed[s] && lower > 0;) {
      lower = lower > 1e-30 * floor ? lower / 2 : 0.0;
      candidates(fresh, ranks.subspan(s, 1), lower, again);
      out[s] = std::move(again[0]);
    }
}

void MeanFieldResidual::sample(const Plan& plan, const FreshGradientModel& fresh, RankId rank, SparseVector& out) const
{
  const NoiseMagnitude& noise = *fresh.magnitude;
  const auto floor = static_cast<float>(plan.floor);
  std::vector<std::pair<Index, float>> kept;
  const OffsetTails offsets(noise);
  std::vector<Edge> edges;
  std::vector<Piece> pieces;
  std::vector<double> proposals;
  const std::uint64_t rank_base =
      mix_coordinates(fresh.streams, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(fresh.iteration), 0);
  const SparseVector& carried = carried_[static_cast<std::size_t>(rank)];
  auto is_carried = [&](Index i) { return std::binary_search(carried.indices.begin(), carried.indices.end(), i); };
  // The drawn part: each level's entries visited with its probability, by geometric skips.
  for (int l = 0; l < kLevels; ++l) {
    const std::size_t begin = plan.level_begin[l], end = plan.level_begin[l + 1];
    if (begin == end)
      continue;
    const std::uint64_t base = mix_coordinates(rank_base, static_cast<std::uint64_t>(l), 0, 0);
    std::uint64_t counter = 0;
    auto uniform = [&] { return uniform01(stream_bits(base, counter++)); };
    const double visit = level_probability(l);
    const double log_miss = std::log1p(-std::min(visit, 1 - 1e-16));
    auto skip = [&] {
      return visit >= 1 ? 0.0 : std::floor(std::log(uniform_open_closed(stream_bits(base, counter++))) / log_miss);
    };
    for (double position = static_cast<double>(begin) + skip(); position < static_cast<double>(end);
         position += 1 + skip()) {
      const auto at = static_cast<std::size_t>(position);
      const Index i = plan.entries[at];
      if (uniform() * visit >= plan.proposal[at])
        continue; // thinned from the level's probability to the entry's own proposal
      const double m = fresh.mean[i];
      const double s = std::max<double>(fresh.noise[i], 1e-30);
      const bool maybe_absent = fresh.maybe_absent(i);
      // The entry's pieces: the plan's, or computed for this visit (an entry the ranks rarely visit).
      std::span<const Piece> entry;
      std::span<const double> entry_proposals;
      if (at < plan.cached_end) {
        entry = plan.cached_pieces(at);
        entry_proposals = plan.cached_proposals(at);
      } else {
        const ResidualLaw law =
            nonzero_.empty() ? ResidualLaw(0, 0, 0, 0) : ResidualLaw(nonzero_[i], centre_[i], spread_[i], truncation_);
        entry_pieces(m, s, law, maybe_absent, plan.floor, noise, offsets, edges, pieces);
        proposals.resize(pieces.size());
        std::transform(pieces.begin(), pieces.end(), proposals.begin(), [](const Piece& p) { return p.proposal; });
        entry = pieces;
        entry_proposals = proposals;
      }
      double total = 0;
      for (const double proposal : entry_proposals)
        total += proposal;
      // The piece, by its share of the proposal.
      double pick = uniform() * total;
      std::size_t p = 0;
      while (p + 1 < entry_proposals.size() && pick >= entry_proposals[p])
        pick -= entry_proposals[p++];
      const Piece& piece = entry[p];
      const double r = piece.low == piece.high
                           ? 0.0
                           : ResidualLaw::draw_between(centre_[i], spread_[i], piece.low, piece.high, uniform());
      double acc = r;
      if (piece.fresh) {
        // X from the union of {X > a_up} and {X < -a_down}: a side by its probability, X beyond its edge, and a
        // draw in both sides kept half the time (the union's law, not the sum's).
        const double a_up = (plan.floor - m - piece.high) / s, a_down = (plan.floor + m + piece.low) / s;
        double x = 0;
        for (;;) {
          const bool up = uniform() * (piece.up + piece.down) < piece.up;
          const double u_side = uniform(), u_magnitude = uniform();
          x = up ? noise.draw_above(a_up, u_side, u_magnitude) : -noise.draw_above(a_down, u_side, u_magnitude);
          if (!(x > a_up && x < -a_down) || uniform() < 0.5)
            break;
        }
        acc = m + r + s * x;
      }
      const auto value = static_cast<float>(acc);
      if (!(std::fabs(value) > floor))
        continue;
      if (maybe_absent && fresh.present(rank, i) != piece.fresh)
        continue;
      if (is_carried(i))
        continue; // the rank holds this entry's residual exactly
      kept.emplace_back(i, value);
    }
  }
  // The carried part: the stored value plus a fresh draw of the gradient.
  for (std::size_t e = 0; e < carried.size(); ++e) {
    const Index i = carried.indices[e];
    const std::uint64_t bits =
        stream_bits(mix_coordinates(fresh.streams ^ kSaltCarried, static_cast<std::uint64_t>(rank),
                                    static_cast<std::uint64_t>(fresh.iteration), i),
                    0);
    double g = 0;
    if (!fresh.maybe_absent(i) || fresh.present(rank, i)) {
      const double magnitude = noise.magnitude(std::min(NoiseMagnitude::kMaxY, -std::log1p(-uniform01(bits))));
      g = fresh.mean[i] + fresh.noise[i] * ((bits & 1) ? magnitude : -magnitude);
    }
    const auto value = static_cast<float>(carried.values[e] + g);
    if (std::fabs(value) > floor)
      kept.emplace_back(i, value);
  }
  std::sort(kept.begin(), kept.end());
  out.indices.resize(kept.size());
  out.values.resize(kept.size());
  for (std::size_t e = 0; e < kept.size(); ++e) {
    out.indices[e] = kept[e].first;
    out.values[e] = kept[e].second;
  }
}

MeanFieldResidual::AccSums MeanFieldResidual::acc_sums(const FreshGradientModel& fresh, int threads) const
{
  // Per entry: acc = R + g, g = mean + noise X when the row is present (probability p), else 0:
  // E[acc] = E[R] + p mean, E[acc^2] = E[R^2] + p (2 mean E[R] + mean^2 + noise^2 E[X^2]). Summed in fixed blocks.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<AccSums> blocks((n_ + kBlock - 1) / kBlock);
  const double x2 = fresh.magnitude->second_moment();
  parallel_blocks(n_, kBlock, threads, [&](std::size_t begin, std::size_t end) {
    AccSums& part = blocks[begin / kBlock];
    for (std::size_t i = begin; i < end; ++i) {
      const auto index = static_cast<Index>(i);
      const Moments r =
          nonzero_.empty() ? Moments{} : ResidualLaw(nonzero_[i], centre_[i], spread_[i], truncation_).between_all();
      const double p = fresh.maybe_absent(index) ? fresh.presence(index) : 1.0;
      const double m = fresh.mean[i], s = fresh.noise[i];
      part.sum += r.first + p * m;
      part.squares += r.second + p * (2 * m * r.first + m * m + s * s * x2);
    }
  });
  AccSums total;
  for (const AccSums& part : blocks) {
    total.sum += part.sum;
    total.squares += part.squares;
  }
  return total;
}

void MeanFieldResidual::update(const FreshGradientModel& fresh, double truncation, int threads)
{
  allocate_state();
  if (!(truncation > 0)) { // nothing stays below: the residual is zero
    std::fill(nonzero_.begin(), nonzero_.end(), 0.0f);
    truncation_ = 0;
    return;
  }
  const OffsetTails offsets(*fresh.magnitude);
  parallel_blocks(n_, std::size_t{1} << 16, threads, [&](std::size_t begin, std::size_t end) {
    std::vector<Edge> edges;
    for (std::size_t i = begin; i < end; ++i) {
      const auto index = static_cast<Index>(i);
      const ResidualLaw law(nonzero_[i], centre_[i], spread_[i], truncation_);
      const double presence = fresh.maybe_absent(index) ? fresh.presence(index) : 1.0;
      store(index, filter_entry(fresh.mean[i], std::max<double>(fresh.noise[i], 1e-30), law, presence, truncation,
                                *fresh.magnitude, offsets, edges));
    }
  });
  truncation_ = truncation;
  std::lock_guard lock(plan_mutex_);
  plans_.clear();
}

double MeanFieldResidual::top_k_floor_at_least(std::span<const double> thresholds)
{
  double lowest = std::numeric_limits<double>::infinity();
  for (const double threshold : thresholds)
    if (threshold >= 0)
      lowest = std::min(lowest, threshold);
  return std::isfinite(lowest) ? kTopKFloorShare * lowest : 0.0;
}

double MeanFieldResidual::truncation_of(std::vector<double> thresholds)
{
  const auto middle = thresholds.begin() + static_cast<std::ptrdiff_t>(thresholds.size() / 2);
  std::nth_element(thresholds.begin(), middle, thresholds.end());
  return *middle;
}

void MeanFieldResidual::carry(RankId rank, SparseVector kept)
{
  largest_ = std::max(largest_, kept.size());
  if (kept.size() > cap_) { // evict the smallest magnitudes (ties: the larger index), keep index order
    std::vector<std::size_t> order(kept.size());
    for (std::size_t e = 0; e < order.size(); ++e)
      order[e] = e;
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(cap_), order.end(),
                     [&](std::size_t a, std::size_t b) {
                       const float ma = std::fabs(kept.values[a]), mb = std::fabs(kept.values[b]);
                       return ma != mb ? ma > mb : a < b;
                     });
    order.resize(cap_);
    std::sort(order.begin(), order.end());
    SparseVector capped;
    for (std::size_t e : order) {
      capped.indices.push_back(kept.indices[e]);
      capped.values.push_back(kept.values[e]);
    }
    evicted_ += kept.size() - cap_;
    kept = std::move(capped);
  }
  carried_[static_cast<std::size_t>(rank)] = std::move(kept);
}

double normal_quantile(double p)
{
  if (!(p > 0 && p < 1))
    throw std::invalid_argument("normal_quantile: p must be in (0, 1)");
  // Acklam's rational approximation (relative error 1.2e-9), then one Halley step on erfc.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double low = 0.02425;
  double x = 0;
  if (p < low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // Halley: e = Phi(x) - p, from erfc on the side where it is accurate.
  const double e =
      x < 0 ? std::erfc(-x / std::numbers::sqrt2) / 2 - p : (1 - p) - std::erfc(x / std::numbers::sqrt2) / 2;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

} // namespace sparsim
