#include "sandboxd/start_line.h"

#include <algorithm>

namespace sinew::sandbox {

StartLine::Ticket StartLine::JoinOwner(const std::string& owner) {
  const Ticket t = ++last_ticket_;
  auto& waiting = by_owner_[owner];
  if (waiting.empty()) rotation_.push_back(owner);
  waiting.push_back(t);
  owner_of_.emplace(t, owner);
  return t;
}

StartLine::Ticket StartLine::JoinRefill() {
  const Ticket t = ++last_ticket_;
  refills_.push_back(t);
  return t;
}

std::optional<StartLine::Ticket> StartLine::Next() const {
  if (!rotation_.empty()) return by_owner_.at(rotation_.front()).front();
  if (!refills_.empty()) return refills_.front();
  return std::nullopt;
}

void StartLine::Serve(Ticket t) {
  if (rotation_.empty()) {
    refills_.pop_front();
    return;
  }
  const std::string owner = rotation_.front();
  rotation_.pop_front();
  auto& waiting = by_owner_.at(owner);
  waiting.pop_front();
  owner_of_.erase(t);
  if (waiting.empty()) {
    by_owner_.erase(owner);
  } else {
    rotation_.push_back(owner);
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
  auto& waiting = by_owner_.at(owner);
  waiting.erase(std::find(waiting.begin(), waiting.end(), t));
  if (waiting.empty()) {
    rotation_.erase(rotation_.begin() + static_cast<std::ptrdiff_t>(RotationIndex(owner)));
    by_owner_.erase(owner);
  }
}

size_t StartLine::Ahead(Ticket t) const {
  size_t owners_waiting = 0;
  for (const auto& [owner, waiting] : by_owner_) owners_waiting += waiting.size();
  auto it = owner_of_.find(t);
  if (it == owner_of_.end()) {
    auto r = std::find(refills_.begin(), refills_.end(), t);
    return owners_waiting + static_cast<size_t>(r - refills_.begin());
  }
  // Round k of the rotation serves the k-th start of each owner still waiting, in
  // rotation order: before `t` (round `own`) come the owner's own earlier starts and, of
  // every other owner, up to `own` starts, one more when it comes first in the rotation.
  const auto& mine = by_owner_.at(it->second);
  const size_t own = static_cast<size_t>(std::find(mine.begin(), mine.end(), t) - mine.begin());
  const size_t my_turn = RotationIndex(it->second);
  size_t ahead = own;
  for (size_t i = 0; i < rotation_.size(); ++i) {
    if (i == my_turn) continue;
    const size_t theirs = by_owner_.at(rotation_[i]).size();
    ahead += std::min(theirs, own + (i < my_turn ? 1 : 0));
  }
  return ahead;
}

std::map<std::string, uint32_t> StartLine::WaitingByOwner() const {
  std::map<std::string, uint32_t> out;
  for (const auto& [owner, waiting] : by_owner_) out.emplace(owner, static_cast<uint32_t>(waiting.size()));
  return out;
}

size_t StartLine::RotationIndex(const std::string& owner) const {
  return static_cast<size_t>(std::find(rotation_.begin(), rotation_.end(), owner) - rotation_.begin());
}

}  // namespace sinew::sandbox
