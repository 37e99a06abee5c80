// threelc-bench: benchmarks, one subcommand each. Figures are ratios against a baseline
// measured in the same process (see docs/BENCHMARKS.md).
#include <cstdio>
#include <cstring>
#include <string_view>

int run_codec_bench(int argc, char** argv);
int run_ring_bench(int argc, char** argv);
int run_allreduce_bench(int argc, char** argv);

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "codec") return run_codec_bench(argc - 2, argv + 2);
  if (argc >= 2 && std::string_view(argv[1]) == "ring") return run_ring_bench(argc - 2, argv + 2);
  if (argc >= 2 && std::string_view(argv[1]) == "allreduce") {
    return run_allreduce_bench(argc - 2, argv + 2);
  }
  std::fprintf(stderr,
               "usage: threelc-bench codec [options]   (threelc-bench codec --help for options)\n"
               "       threelc-bench ring [options]    (threelc-bench ring --help; run one per "
               "rank)\n"
               "       threelc-bench allreduce [options]  (threelc-bench allreduce --help; run "
               "one per rank)\n");
  return argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) ? 0
                                                                                               : 2;
}
