// vector_math's kernels for AVX, 4 doubles per instruction; this file alone is compiled with -mavx.
#include "sim/gradients/vector_math_kernels.hpp"

#include <immintrin.h>
#include <sleef.h>

namespace sparsim::vector_math::kernels {
namespace {

struct AvxSet {
  static constexpr std::size_t width = 4;
  static __m256d load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, __m256d v) { _mm256_storeu_pd(p, v); }
  static __m256d log(__m256d v) { return Sleef_cinz_logd4_u10avx(v); }
  static __m256d exp(__m256d v) { return Sleef_cinz_expd4_u10avx(v); }
  static Sleef___m256d_2 sincospi(__m256d v) { return Sleef_cinz_sincospid4_u05avx(v); }
};

} // namespace

void log_avx(const double* x, double* out, std::size_t count) { log_loop<AvxSet>(x, out, count); }
void exp_avx(const double* x, double* out, std::size_t count) { exp_loop<AvxSet>(x, out, count); }
void sincospi_avx(const double* x, double* sin_out, double* cos_out, std::size_t count)
{
  sincospi_loop<AvxSet>(x, sin_out, cos_out, count);
}

} // namespace sparsim::vector_math::kernels
