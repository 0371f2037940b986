// Replayed gradients: vectors recorded in a real training run (for example PyTorch gradients flattened into
// one vector per rank and saved with numpy.save), fed to the collective instead of synthetic ones, so the
// simulation sees real sparsity structure (heavy tails, index locality, overlap between ranks).
//
// Config ("gradients" object, paths relative to the config's folder):
//   {"source": "replay", "files": "dumps/it{iteration}_rank{rank}.npy"}  one 1-D file of n values per recorded
//       rank and iteration. The recorded iterations are 0, 1, ... as long as the file of rank 0 exists, the
//       recorded ranks 0, 1, ... as long as the file of iteration 0 exists; every file in between must exist,
//       and a file the pattern names beyond them (it5 when it3 is missing) is a hole: an error.
//       A pattern without {iteration} (or {rank}) records one iteration (or one rank).
//       The sidecar: a recording.json in the pattern's folder (the folder before its first placeholder; the
//       recorder, python/sparsim_record, writes one) must agree with the files: its "files" is the pattern's
//       rest, its n, ranks, iterations and dtype are the files'. Its "model" is the layer table.
//   {"source": "replay", "file": "stack.npy"}  one array of shape (iterations, ranks, n), or (ranks, n) or
//       (n,) for gradients that are the same in every iteration (and, for (n,), on every rank).
//   "loop" (default true): iteration i replays recorded iteration i mod I; false makes an iteration beyond
//       the recording an error (raised when it is reached: the source does not know the iteration count).
//   "ranks": "wrap" (default): rank r replays recorded rank r mod R; "error": more ranks than recorded is a
//       config error. Wrapped ranks share gradients exactly, so their selections overlap more than real
//       ranks' would: prefer recording as many ranks as are simulated.
//   "model" (optional): the layer table of the recorded parameters ("vgg16", ... or a file, as the calibrated
//       source's), instead of the sidecar's; its sizes must add up to n. With a table that has a "compute"
//       object, compute.training "model" charges its forward_backward.
// Values are float32, float64 or float16 (.npy dtypes '<f4', '<f8', '<f2'), converted to float. A
// non-finite value is an error when its file is read (fp16 runs with loss scaling record inf/NaN in the
// steps they skip: drop those steps from the recording).
//
// Validation happens when the config is loaded: the files exist, are well-formed .npy files with the expected
// shape, and their length is workload.n; otherwise a ConfigError names gradients.file or gradients.files (or
// the sidecar's key that disagrees with the files, "(PATH/recording.json).iterations").
// Only headers and sizes are read then; values are read when first needed.
//
// Memory: "file" keeps the whole stack in memory once read, as float (I * R * n * 4 bytes, whatever the
// stored dtype); "files" keeps the files of one recorded iteration (up to R * n floats), read on demand and
// dropped when another iteration is requested. Nothing is kept per simulated rank, but the recording itself
// is dense per recorded rank: replaying thousands of recorded ranks of a large model does not fit, which is
// what "wrap" over a few recorded ranks is for. (The driver holds dense per-rank vectors anyway.)
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/gradients/source.hpp"

#include <memory>

namespace sparsim {

// Reads the replay keys ("file" or "files", "loop", "ranks", "model") from `gradients` (whose "source" was read),
// validates the recording against `context` and returns the source. The caller calls gradients.finish().
std::unique_ptr<GradientSource> make_replay_source(JsonReader& gradients, const GradientContext& context);

} // namespace sparsim
