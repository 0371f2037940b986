// Elementwise log, exp and sin/cos of pi x over arrays of doubles, by SLEEF's "consistent" functions (the
// `cinz` builds: no fused multiply-add, no reliance on denormal flushing). SLEEF documents that a cinz
// function returns the same bits for every instruction set it is built for, so the widest build this CPU has
// runs and a run's results do not depend on the machine (tested: VectorMath.EveryInstructionSetGivesTheSameBits).
// Accuracy: log and exp within 1.0 ULP, sin/cos of pi x within 0.506 ULP (SLEEF's documented bounds).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace sparsim::vector_math {

// The SLEEF builds this module can call: 2, 4 and 8 doubles per instruction.
enum class InstructionSet { sse2, avx, avx512 };

// The widest instruction set this CPU supports (SSE2 is part of x86-64, so always one).
InstructionSet widest_available();
// Every instruction set this CPU supports, narrowest first.
std::vector<InstructionSet> available();
std::string_view name(InstructionSet set);
// Whether this CPU has AVX-512F with DQ and VL: what the project's own AVX-512 loops (functions compiled with
// `gnu::target("avx512f,avx512dq,avx512vl")`) need. Checked once.
bool avx512_loops_supported();

// out[i] = log(x[i]) and out[i] = exp(x[i]); out may be x. Any length; the spans have equal sizes.
void log(std::span<const double> x, std::span<double> out, InstructionSet set = widest_available());
void exp(std::span<const double> x, std::span<double> out, InstructionSet set = widest_available());
// sin_out[i] = sin(pi x[i]), cos_out[i] = cos(pi x[i]) (exact for the multiple of pi, unlike sin(pi * x)).
void sincospi(std::span<const double> x, std::span<double> sin_out, std::span<double> cos_out,
              InstructionSet set = widest_available());

} // namespace sparsim::vector_math
