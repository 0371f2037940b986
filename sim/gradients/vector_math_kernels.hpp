// The per-instruction-set kernels behind vector_math (internal). Each runs over `count` doubles, a multiple of
// its width; vector_math pads the tail. The AVX and AVX-512 files are compiled for their instruction sets and
// hold only these plain functions (no inline C++ from headers that another file could share).
#pragma once

#include <cstddef>

namespace sparsim::vector_math::kernels {

void log_sse2(const double* x, double* out, std::size_t count);
void exp_sse2(const double* x, double* out, std::size_t count);
void sincospi_sse2(const double* x, double* sin_out, double* cos_out, std::size_t count);

void log_avx(const double* x, double* out, std::size_t count);
void exp_avx(const double* x, double* out, std::size_t count);
void sincospi_avx(const double* x, double* sin_out, double* cos_out, std::size_t count);

void log_avx512(const double* x, double* out, std::size_t count);
void exp_avx512(const double* x, double* out, std::size_t count);
void sincospi_avx512(const double* x, double* sin_out, double* cos_out, std::size_t count);

} // namespace sparsim::vector_math::kernels

namespace sparsim::vector_math::kernels {

// One loop per function for an instruction set described by `Set`: its width, load and store, and SLEEF's
// functions. Each kernel file instantiates these with its own `Set` type (in an anonymous namespace), so the
// instantiations are distinct functions compiled for that file's instruction set.
template <class Set> void log_loop(const double* x, double* out, std::size_t count)
{
  for (std::size_t i = 0; i < count; i += Set::width)
    Set::store(out + i, Set::log(Set::load(x + i)));
}

template <class Set> void exp_loop(const double* x, double* out, std::size_t count)
{
  for (std::size_t i = 0; i < count; i += Set::width)
    Set::store(out + i, Set::exp(Set::load(x + i)));
}

template <class Set> void sincospi_loop(const double* x, double* sin_out, double* cos_out, std::size_t count)
{
  for (std::size_t i = 0; i < count; i += Set::width) {
    const auto both = Set::sincospi(Set::load(x + i));
    Set::store(sin_out + i, both.x);
    Set::store(cos_out + i, both.y);
  }
}

} // namespace sparsim::vector_math::kernels
