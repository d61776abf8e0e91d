#include "sandboxd/start_line.h"

#include <algorithm>

namespace sinew::sandbox {

StartLine::Ticket StartLine::JoinOwner(const std::string& owner) {
  const Ticket t = ++last_ticket_;
  auto [it, first] = by_owner_.try_emplace(owner);
  if (first) {
    uint64_t served = 0;
    if (auto last = last_served_.find(owner); last != last_served_.end()) {
      served = last->second;
      served_order_.erase(served);
      last_served_.erase(last);
    }
    it->second.turn = Turn(served, t);
    turns_.emplace(it->second.turn, owner);
  }
  it->second.tickets.push_back(t);
  owner_of_.emplace(t, owner);
  return t;
}

StartLine::Ticket StartLine::JoinRefill() {
  const Ticket t = ++last_ticket_;
  refills_.push_back(t);
  return t;
}

std::optional<StartLine::Ticket> StartLine::Next() const {
  if (!turns_.empty()) return by_owner_.at(turns_.begin()->second).tickets.front();
  if (!refills_.empty()) return refills_.front();
  return std::nullopt;
}

void StartLine::Serve(Ticket t) {
  if (turns_.empty()) {
    refills_.pop_front();
    return;
  }
  const std::string owner = turns_.begin()->second;
  turns_.erase(turns_.begin());
  owner_of_.erase(t);
  auto it = by_owner_.find(owner);
  it->second.tickets.pop_front();
  ++serves_;
  if (it->second.tickets.empty()) {
    by_owner_.erase(it);
    Remember(owner, serves_);
  } else {
    it->second.turn = Turn(serves_, t);
    turns_.emplace(it->second.turn, owner);
  }
}

void StartLine::Leave(Ticket t) {
  auto it = owner_of_.find(t);
  if (it == owner_of_.end()) {
    auto r = std::find(refills_.begin(), refills_.end(), t);
    if (r != refills_.end()) refills_.erase(r);
    return;
  }
  const std::string owner = std::move(it->second);
  owner_of_.erase(it);
  auto w = by_owner_.find(owner);
  auto& tickets = w->second.tickets;
  tickets.erase(std::find(tickets.begin(), tickets.end(), t));
  if (tickets.empty()) {
    turns_.erase({w->second.turn, owner});
    // Its last serve, if any, still counts when it comes back.
    if (w->second.turn.first != 0) Remember(owner, w->second.turn.first);
    by_owner_.erase(w);
  }
}

void StartLine::Remember(const std::string& owner, uint64_t served) {
  last_served_[owner] = served;
  served_order_[served] = owner;
  while (served_order_.size() > remembered_owners_) {
    last_served_.erase(served_order_.begin()->second);
    served_order_.erase(served_order_.begin());
  }
}

size_t StartLine::Ahead(Ticket t) const {
  size_t owners_waiting = 0;
  for (const auto& [owner, waiting] : by_owner_) owners_waiting += waiting.tickets.size();
  auto it = owner_of_.find(t);
  if (it == owner_of_.end()) {
    auto r = std::find(refills_.begin(), refills_.end(), t);
    return owners_waiting + static_cast<size_t>(r - refills_.begin());
  }
  // While no one joins or leaves, the owners are served in rounds, each round in the
  // order of turns_: before `t` (in round `own`) come its owner's earlier starts and, of
  // every other owner, up to `own` starts, one more when it comes first in the turns.
  const Waiting& mine = by_owner_.at(it->second);
  const size_t own = static_cast<size_t>(std::find(mine.tickets.begin(), mine.tickets.end(), t) -
                                         mine.tickets.begin());
  size_t ahead = own;
  bool before_mine = true;
  for (const auto& [turn, owner] : turns_) {
    if (owner == it->second) {
      before_mine = false;
      continue;
    }
    ahead += std::min(by_owner_.at(owner).tickets.size(), own + (before_mine ? 1 : 0));
  }
  return ahead;
}

std::map<std::string, uint32_t> StartLine::WaitingByOwner() const {
  std::map<std::string, uint32_t> out;
  for (const auto& [owner, waiting] : by_owner_)
    out.emplace(owner, static_cast<uint32_t>(waiting.tickets.size()));
  return out;
}

}  // namespace sinew::sandbox
