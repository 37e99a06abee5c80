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
  id.host_of_rank.assign(static_cast<size_t>(id.size), 0);
  if (id.size == 1) return id;
  if (id.rank != 0) {
    ControlReceive reply(context.control(0));
    send_control(context.control(0), text(host));
    const std::vector<std::byte> bytes = reply.wait();
    try {
      ByteReader in(bytes);
      id.cross_rank = static_cast<int>(in.u32());
      id.cross_size = static_cast<int>(in.u32());
      for (int& h : id.host_of_rank) {
        h = static_cast<int>(in.u32());
        if (h >= id.cross_size) throw NegotiationError("host index out of range");
      }
      if (!in.at_end()) throw NegotiationError("trailing bytes");
    } catch (const NegotiationError& e) {
      throw NegotiationError(std::string("init message from rank 0 (host indices): ") + e.what(),
                             0);
    }
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
  for (int r = 0; r < id.size; ++r) {
    id.host_of_rank[static_cast<size_t>(r)] = index[hosts[static_cast<size_t>(r)]];
  }
  for (int peer = 1; peer < id.size; ++peer) {
    ByteWriter out;
    out.u32(static_cast<uint32_t>(id.host_of_rank[static_cast<size_t>(peer)]));
    out.u32(static_cast<uint32_t>(index.size()));
    for (int h : id.host_of_rank) out.u32(static_cast<uint32_t>(h));
    send_control(context.control(peer), out.bytes());
  }
  id.cross_rank = 0;
  id.cross_size = static_cast<int>(index.size());
  return id;
}

namespace {

// Each host's ranks, in rank order.
std::vector<std::vector<int>> ranks_of_hosts(const Identity& identity) {
  std::vector<std::vector<int>> ranks_of_host(static_cast<size_t>(identity.cross_size));
  for (int r = 0; r < identity.size; ++r) {
    ranks_of_host[static_cast<size_t>(identity.host_of_rank[static_cast<size_t>(r)])].push_back(r);
  }
  return ranks_of_host;
}

}  // namespace

bool same_ranks_per_host(const Identity& identity) {
  const auto ranks_of_host = ranks_of_hosts(identity);
  for (const auto& ranks : ranks_of_host) {
    if (ranks.size() != ranks_of_host[0].size()) return false;
  }
  return true;
}

std::optional<HostGroups> host_groups(const Identity& identity, std::string& why_not) {
  const auto ranks_of_host = ranks_of_hosts(identity);
  const size_t per_host = ranks_of_host[0].size();
  for (size_t h = 1; h < ranks_of_host.size(); ++h) {
    if (ranks_of_host[h].size() != per_host) {
      why_not = "hosts run different numbers of ranks (host 0: " + std::to_string(per_host) +
                ", host " + std::to_string(h) + ": " + std::to_string(ranks_of_host[h].size()) +
                ")";
      return std::nullopt;
    }
  }
  if (per_host < 2) {
    why_not = "every host runs one rank";
    return std::nullopt;
  }
  HostGroups groups;
  groups.cross_index = identity.host_of_rank[static_cast<size_t>(identity.rank)];
  groups.local = ranks_of_host[static_cast<size_t>(groups.cross_index)];
  for (size_t i = 0; i < groups.local.size(); ++i) {
    if (groups.local[i] == identity.rank) groups.local_index = static_cast<int>(i);
  }
  for (const std::vector<int>& ranks : ranks_of_host) {
    groups.cross.push_back(ranks[static_cast<size_t>(groups.local_index)]);
  }
  return groups;
}

}  // namespace threelc::engine
