// StartLine: the order in which container starts waiting in sinew-sandboxd get a start
// slot (--max-concurrent-starts). Waiting starts are grouped by owner (the tenant of the
// provision, fork or resume; "" is an owner too) and the owners are served round robin,
// each owner's starts in the order they joined: one owner's burst delays another
// owner's start by at most one start per other owner waiting. Warm-pool refills have no
// owner and a class of their own, served only when no owner's start waits.
//
// A waiter joins, takes its turn when Next() names its ticket (Serve), or gives up
// (Leave). Nothing here waits or starts anything.
//
// Thread-safety: not thread-safe; its user guards it with its own mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace sinew::sandbox {

class StartLine {
 public:
  using Ticket = uint64_t;

  // Joins the line behind `owner`'s own waiting starts. An owner with none joins the
  // rotation last.
  Ticket JoinOwner(const std::string& owner);
  // Joins the refill class, behind the other waiting refills.
  Ticket JoinRefill();

  // The ticket whose turn it is; nullopt when the line is empty.
  [[nodiscard]] std::optional<Ticket> Next() const;
  // Removes Next() from the line: its start takes a slot. Its owner, when it still has
  // starts waiting, goes to the back of the rotation. REQUIRES: t == Next().
  void Serve(Ticket t);
  // Removes a waiting ticket that is not served (its start gave up). No-op when `t` is
  // not waiting.
  void Leave(Ticket t);

  // How many waiting starts would be served before `t` if no one joined or left.
  [[nodiscard]] size_t Ahead(Ticket t) const;
  // Waiting starts per owner; owners with none are absent.
  [[nodiscard]] std::map<std::string, uint32_t> WaitingByOwner() const;
  [[nodiscard]] size_t waiting_refills() const { return refills_.size(); }
  [[nodiscard]] bool empty() const { return rotation_.empty() && refills_.empty(); }

 private:
  // REQUIRES: `owner` waits. Its index in rotation_.
  size_t RotationIndex(const std::string& owner) const;

  Ticket last_ticket_ = 0;
  std::map<std::string, std::deque<Ticket>> by_owner_;  // owners with waiting starts
  std::deque<std::string> rotation_;                    // the same owners, next turn first
  std::map<Ticket, std::string> owner_of_;              // waiting owners' tickets
  std::deque<Ticket> refills_;
};

}  // namespace sinew::sandbox
