// The start of every message the transport writes about this process: "threelc rank R: ".
#pragma once

#include <string>

namespace threelc::transport {

inline std::string rank_prefix(int rank) { return "threelc rank " + std::to_string(rank) + ": "; }

}  // namespace threelc::transport
