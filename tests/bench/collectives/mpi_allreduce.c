/* Baseline: Open MPI's MPI_Allreduce (float32 sum), nccl-tests-style lines from rank 0:
   size(B) time(us) algbw busbw. Usage: mpirun --mca btl self,tcp -np N mpi_allreduce MIN MAX */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t min_bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 8;
  const size_t max_bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (256u << 20);
  float* data = malloc(max_bytes);
  for (size_t i = 0; i < max_bytes / 4; ++i) data[i] = (float)(i % 7);
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int count = (int)(bytes / 4 ? bytes / 4 : 1);
    long iters = (long)((512ul << 20) / (bytes ? bytes : 1));
    if (iters < 5) iters = 5;
    if (iters > 1000) iters = 1000;
    for (int i = 0; i < 2; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - start) / iters, worst;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      double algbw = (double)count * 4 / worst / 1e9;
      printf("%zu %.2f %.3f %.3f\n", (size_t)count * 4, worst * 1e6, algbw, algbw * 2.0 * (size - 1) / size);
      fflush(stdout);
    }
  }
  free(data);
  MPI_Finalize();
  return 0;
}
