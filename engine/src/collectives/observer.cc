#include "collectives/observer.h"

namespace threelc::engine {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kCompress:
      return "compress";
    case Phase::kDecompress:
      return "decompress";
    case Phase::kSend:
      return "send";
    case Phase::kReceive:
      return "receive";
    case Phase::kReduce:
      return "reduce";
    case Phase::kCopy:
      return "fusion_copy";
  }
  return "unknown";
}

}  // namespace threelc::engine
