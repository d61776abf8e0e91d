// StartLine: the order in which container starts waiting in sinew-sandboxd get a start
// slot (--max-concurrent-starts). Waiting starts are grouped by owner (the tenant of the
// provision, fork or resume; "" is an owner too), each owner's starts in the order they
// joined, and the owners take turns: next is the owner served least recently (never
// served first, ties in the order they joined; of owners with no start waiting, only
// the `remembered_owners` served last are remembered, the others count as never
// served). So a waiting owner is served again only after every other waiting owner had
// a turn, and one owner's burst delays another owner's start by at most one start of
// the burst (beyond those already under way). Warm-pool refills have no owner and a
// class of their own, served only when no owner's start waits.
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
#include <set>
#include <string>
#include <utility>

namespace sinew::sandbox {

class StartLine {
 public:
  using Ticket = uint64_t;

  explicit StartLine(size_t remembered_owners = 1024) : remembered_owners_(remembered_owners) {}

  // Joins the line behind `owner`'s own waiting starts.
  Ticket JoinOwner(const std::string& owner);
  // Joins the refill class, behind the other waiting refills.
  Ticket JoinRefill();

  // The ticket whose turn it is; nullopt when the line is empty.
  [[nodiscard]] std::optional<Ticket> Next() const;
  // Removes Next() from the line: its start takes a slot, and its owner's next turn
  // comes after every other waiting owner's. REQUIRES: t == Next().
  void Serve(Ticket t);
  // Removes a waiting ticket that is not served (its start gave up). No-op when `t` is
  // not waiting.
  void Leave(Ticket t);

  // How many waiting starts would be served before `t` if no one joined or left.
  [[nodiscard]] size_t Ahead(Ticket t) const;
  // Waiting starts per owner; owners with none are absent.
  [[nodiscard]] std::map<std::string, uint32_t> WaitingByOwner() const;
  [[nodiscard]] size_t waiting_refills() const { return refills_.size(); }
  [[nodiscard]] bool empty() const { return turns_.empty() && refills_.empty(); }

 private:
  // An owner's place in the turns: its last serve (0: none remembered), then when it
  // joined.
  using Turn = std::pair<uint64_t, Ticket>;
  struct Waiting {
    std::deque<Ticket> tickets;
    Turn turn;
  };
  // Remembers the last serve of an owner with no start waiting, forgetting the oldest
  // beyond remembered_owners_.
  void Remember(const std::string& owner, uint64_t served);

  const size_t remembered_owners_;
  Ticket last_ticket_ = 0;
  uint64_t serves_ = 0;                           // owners' starts served so far
  std::map<std::string, Waiting> by_owner_;       // owners with waiting starts
  std::set<std::pair<Turn, std::string>> turns_;  // the same owners, next first
  std::map<Ticket, std::string> owner_of_;        // waiting owners' tickets
  std::map<std::string, uint64_t> last_served_;   // owners without waiting starts
  std::map<uint64_t, std::string> served_order_;  // the same, by their last serve
  std::deque<Ticket> refills_;
};

}  // namespace sinew::sandbox
