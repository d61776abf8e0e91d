// Test helper for crash_test: appends to one session in a loop, forever, and prints
// "ACK <last_seq>" after each acknowledged append. The test SIGKILLs it at random moments.
// Event k (k >= 2) is an annotation whose text is "n=k", so duplicates and gaps show.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "sinew/session_store/session_store.h"

namespace {

void Say(const std::string& line) {
  std::string l = line + "\n";
  if (write(STDOUT_FILENO, l.data(), l.size()) < 0) _exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DB sync|async\n", argv[0]);
    return 2;
  }
  sinew::store::StoreOptions options;
  options.durability = std::strcmp(argv[2], "async") == 0 ? sinew::store::Durability::kAsync
                                                           : sinew::store::Durability::kSync;
  auto store = sinew::store::OpenSessionStore(argv[1], options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  sinew::v1::ListSessionsRequest list;
  list.set_tenant("crash");
  auto sessions = (*store)->ListSessions(list);
  if (!sessions.ok()) return 1;
  std::string id;
  if (sessions->sessions_size() > 0) {
    id = sessions->sessions(sessions->sessions_size() - 1).id();
  } else {
    sinew::v1::CreateSessionRequest req;
    req.set_tenant("crash");
    auto created = (*store)->CreateSession(req);
    if (!created.ok()) return 1;
    id = created->id();
  }
  Say("SESSION " + id);
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  while (true) {
    auto meta = (*store)->GetSession(id);
    if (!meta.ok()) return 1;
    uint64_t next = meta->next_seq();
    sinew::v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(next);
    int batch = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < batch; ++i) {
      auto* note = req.add_events()->mutable_annotation();
      note->set_text("n=" + std::to_string(next + static_cast<uint64_t>(i)));
    }
    auto r = (*store)->Append(req);
    if (!r.ok()) {
      std::fprintf(stderr, "append: %s\n", r.status().ToString().c_str());
      return 1;
    }
    Say("ACK " + std::to_string(r->last_seq()));
  }
}
