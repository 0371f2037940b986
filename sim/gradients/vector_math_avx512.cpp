// vector_math's kernels for AVX-512F, 8 doubles per instruction; this file alone is compiled with -mavx512f.
#include "sim/gradients/vector_math_kernels.hpp"

#include <immintrin.h>
#include <sleef.h>

namespace sparsim::vector_math::kernels {
namespace {

struct Avx512Set {
  static constexpr std::size_t width = 8;
  static __m512d load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, __m512d v) { _mm512_storeu_pd(p, v); }
  static __m512d log(__m512d v) { return Sleef_cinz_logd8_u10avx512fnofma(v); }
  static __m512d exp(__m512d v) { return Sleef_cinz_expd8_u10avx512fnofma(v); }
  static Sleef___m512d_2 sincospi(__m512d v) { return Sleef_cinz_sincospid8_u05avx512fnofma(v); }
};

} // namespace

void log_avx512(const double* x, double* out, std::size_t count) { log_loop<Avx512Set>(x, out, count); }
void exp_avx512(const double* x, double* out, std::size_t count) { exp_loop<Avx512Set>(x, out, count); }
void sincospi_avx512(const double* x, double* sin_out, double* cos_out, std::size_t count)
{
  sincospi_loop<Avx512Set>(x, sin_out, cos_out, count);
}

} // namespace sparsim::vector_math::kernels
