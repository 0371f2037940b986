// vector_math's kernels for SSE2 (every x86-64 CPU), 2 doubles per instruction; compiled with the project's flags.
#include "sim/gradients/vector_math_kernels.hpp"

#include <emmintrin.h>
#include <sleef.h>

namespace sparsim::vector_math::kernels {
namespace {

struct Sse2Set {
  static constexpr std::size_t width = 2;
  static __m128d load(const double* p) { return _mm_loadu_pd(p); }
  static void store(double* p, __m128d v) { _mm_storeu_pd(p, v); }
  static __m128d log(__m128d v) { return Sleef_cinz_logd2_u10sse2(v); }
  static __m128d exp(__m128d v) { return Sleef_cinz_expd2_u10sse2(v); }
  static Sleef___m128d_2 sincospi(__m128d v) { return Sleef_cinz_sincospid2_u05sse2(v); }
};

} // namespace

void log_sse2(const double* x, double* out, std::size_t count) { log_loop<Sse2Set>(x, out, count); }
void exp_sse2(const double* x, double* out, std::size_t count) { exp_loop<Sse2Set>(x, out, count); }
void sincospi_sse2(const double* x, double* sin_out, double* cos_out, std::size_t count)
{
  sincospi_loop<Sse2Set>(x, sin_out, cos_out, count);
}

} // namespace sparsim::vector_math::kernels
