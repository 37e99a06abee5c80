#include <cstdio>
int run_codec_bench(int, char**) {
  std::fprintf(stderr, "codec benchmark: not yet written\n");
  return 1;
}
