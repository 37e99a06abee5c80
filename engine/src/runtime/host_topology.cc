#include "runtime/host_topology.h"

#include <deque>
#include <map>
#include <string>

#include "negotiation/wire.h"
#include "runtime/control_channel.h"

namespace threelc::engine {

namespace {

std::vector<std::byte> text(const std::string& s) {
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  return {b, b + s.size()};
}

}  // namespace

Identity exchange_identity(transport::Context& context, const transport::Options& options,
                           const std::string& host) {
  Identity id;
  id.rank = context.rank();
  id.size = context.size();
  id.local_rank = options.local_rank;
  id.local_size = options.local_size;
  if (id.size == 1) return id;
  if (id.rank != 0) {
    ControlReceive reply(context.control(0));
    send_control(context.control(0), text(host));
    const std::vector<std::byte> bytes = reply.wait();
    ByteReader in(bytes);
    id.cross_rank = static_cast<int>(in.u32());
    id.cross_size = static_cast<int>(in.u32());
    return id;
  }
  std::deque<ControlReceive> receives;
  for (int peer = 1; peer < id.size; ++peer) receives.emplace_back(context.control(peer));
  std::vector<std::string> hosts = {host};
  for (auto& r : receives) {
    const std::vector<std::byte> bytes = r.wait();
    hosts.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::map<std::string, int> index;
  for (const std::string& h : hosts) index.try_emplace(h, static_cast<int>(index.size()));
  // try_emplace numbered hosts by first appearance, i.e. by lowest rank.
  for (int peer = 1; peer < id.size; ++peer) {
    ByteWriter out;
    out.u32(static_cast<uint32_t>(index[hosts[static_cast<size_t>(peer)]]));
    out.u32(static_cast<uint32_t>(index.size()));
    send_control(context.control(peer), out.bytes());
  }
  id.cross_rank = 0;
  id.cross_size = static_cast<int>(index.size());
  return id;
}

}  // namespace threelc::engine
