#include "shard_status_print.h"

#include <boost/json.hpp>

#include <cstdio>
#include <ctime>

namespace sinew::store {
namespace {

std::string UtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "at an unknown time";
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[48];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

std::string Row(const std::string& shard, const std::string& role, const std::string& member,
                const std::string& term, const std::string& sequence, const std::string& lag,
                const std::string& in_sync) {
  char line[512];
  std::snprintf(line, sizeof(line), "%-12s %-9s %-32s %-8s %-12s %-10s %s\n", shard.c_str(), role.c_str(),
                member.c_str(), term.c_str(), sequence.c_str(), lag.c_str(), in_sync.c_str());
  return line;
}

// The shard's last line: its mode, and its last failover (or its one election).
std::string Summary(const ShardState& s) {
  std::string line = s.id + ": ";
  if (s.primary.empty()) {
    line += "no primary now (an election is under way; the last term was " +
            std::to_string(s.last_term) + ")";
  } else {
    line += (s.mode.empty() ? std::string("replicated") : s.mode + " replication");
  }
  if (s.elections.size() >= 2) {
    const Election& last = s.elections[0];
    const Election& before = s.elections[1];
    line += "; last failover " + UtcTime(last.at_unix_ms) + ": term " + std::to_string(last.term) +
            ", " + last.member + " took over from " + before.member + " (term " +
            std::to_string(before.term) + ")";
  } else if (s.elections.size() == 1) {
    line += "; no failover: " + s.elections[0].member + " elected at term " +
            std::to_string(s.elections[0].term) + " " + UtcTime(s.elections[0].at_unix_ms);
  }
  if (!s.error.empty()) line += "; " + s.error;
  return line + "\n";
}

boost::json::object ElectionJson(const Election& e) {
  return {{"term", e.term}, {"member", e.member}, {"at_unix_ms", e.at_unix_ms}};
}

}  // namespace

std::string ShardStatesTable(const std::vector<ShardState>& shards) {
  std::string out = Row("SHARD", "ROLE", "MEMBER", "TERM", "SEQUENCE", "LAG", "IN SYNC");
  for (const auto& s : shards) {
    if (!s.replicated) {
      out += Row(s.id, "single", s.address, "-", "-", "-", "-");
      continue;
    }
    const std::string term = s.term != 0 ? std::to_string(s.term) : "-";
    const bool answered = s.error.empty() && !s.primary.empty();
    if (!s.primary.empty()) {
      out += Row(s.id, "primary", s.primary, term,
                 answered ? std::to_string(s.latest_sequence) : "?", "-", "-");
    }
    for (const auto& f : s.followers) {
      out += Row(s.id, "follower", f.member, term, std::to_string(f.synced_sequence),
                 std::to_string(f.lag), f.in_sync ? "yes" : "no");
    }
  }
  for (const auto& s : shards) {
    if (s.replicated) out += Summary(s);
  }
  return out;
}

std::string ShardStatesJson(const std::vector<ShardState>& shards) {
  boost::json::array list;
  for (const auto& s : shards) {
    boost::json::array followers;
    for (const auto& f : s.followers) {
      followers.push_back(
          {{"member", f.member}, {"synced_sequence", f.synced_sequence}, {"lag", f.lag}, {"in_sync", f.in_sync}});
    }
    boost::json::array elections;
    for (const auto& e : s.elections) elections.push_back(ElectionJson(e));
    boost::json::value last_failover = nullptr;
    if (s.elections.size() >= 2) {
      auto o = ElectionJson(s.elections[0]);
      o["previous_term"] = s.elections[1].term;
      o["previous_member"] = s.elections[1].member;
      last_failover = std::move(o);
    }
    list.push_back({{"id", s.id},
                    {"address", s.address},
                    {"replicated", s.replicated},
                    {"primary", s.primary},
                    {"term", s.term},
                    {"last_term", s.last_term},
                    {"mode", s.mode},
                    {"latest_sequence", s.latest_sequence},
                    {"followers", std::move(followers)},
                    {"last_failover", std::move(last_failover)},
                    {"elections", std::move(elections)},
                    {"error", s.error}});
  }
  return boost::json::serialize(boost::json::object{{"shards", std::move(list)}});
}

}  // namespace sinew::store
