/* One MPI_Allreduce of n floats (MPI_SUM), timed in simulated time, for the SMPI comparison.
 *
 * Usage (under smpirun): allreduce N
 * Every rank calls MPI_Allreduce right after MPI_Init, so all ranks start it at the same simulated time, as the
 * ranks of `sparsim run` start an iteration after a zero-cost barrier. Rank 0 prints one line:
 *   smpi_allreduce ranks=P n=N start_min=... start_max=... time_max=...
 * time_max is the largest MPI_Wtime() difference around the call over the ranks (sparsim's "total" row is the
 * largest iteration time over the ranks).
 *
 * The buffers come from SMPI_SHARED_MALLOC: with smpi/shared-malloc:global every rank's buffers share the same
 * few physical pages, so P * n floats need no memory and SMPI skips the copy of message data between shared
 * buffers. The sums are still computed (into shared pages, so their values mean nothing): this program measures
 * time, sparsim's own runs check values. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 2 || atol(argv[1]) < 1) {
    if (rank == 0)
      fprintf(stderr, "usage: allreduce N (floats, N >= 1)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int n = atoi(argv[1]);
  float* input = SMPI_SHARED_MALLOC((size_t)n * sizeof(float));
  float* output = SMPI_SHARED_MALLOC((size_t)n * sizeof(float));

  const double start = MPI_Wtime();
  MPI_Allreduce(input, output, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double elapsed = MPI_Wtime() - start;

  double start_min = 0, start_max = 0, time_max = 0;
  MPI_Reduce(&start, &start_min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&start, &start_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&elapsed, &time_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("smpi_allreduce ranks=%d n=%d start_min=%.12g start_max=%.12g time_max=%.12g\n", ranks, n, start_min,
           start_max, time_max);

  SMPI_SHARED_FREE(input);
  SMPI_SHARED_FREE(output);
  MPI_Finalize();
  return 0;
}
