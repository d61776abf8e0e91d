#include "sinew/eval/job.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sinew/json_fields.h"

namespace sinew::eval {
namespace json = boost::json;
using json_fields::IntField;
using json_fields::NumberField;
using json_fields::StringField;

namespace {

Result<TrialKey> KeyFrom(const json::object& o) {
  TrialKey k;
  k.task = StringField(o, "task");
  k.config = StringField(o, "config");
  k.trial = static_cast<uint32_t>(IntField(o, "trial"));
  if (k.task.empty() || k.config.empty() || k.trial == 0) {
    return Status::Corruption("journal line without task, config or trial");
  }
  return k;
}

}  // namespace

json::object KeyJson(const TrialKey& k, uint32_t attempt) {
  return {{"task", k.task}, {"config", k.config}, {"trial", k.trial}, {"attempt", attempt}};
}

json::object JobSpec::ToJson() const {
  json::array cfgs;
  for (const auto& c : configs) cfgs.emplace_back(c);
  return {{"suite", suite},
          {"task_glob", task_glob},
          {"agent", agent},
          {"model", model},
          {"trials", trials},
          {"configs", cfgs},
          {"concurrency", concurrency},
          {"max_attempts", max_attempts},
          {"server", server},
          {"sandboxd", sandboxd},
          {"sandboxd_tls", {{"cert_file", sandboxd_tls.cert_file},
                            {"key_file", sandboxd_tls.key_file},
                            {"ca_file", sandboxd_tls.ca_file},
                            {"server_name", sandboxd_tls.server_name_override}}},
          {"created_unix_ms", created_unix_ms}};
}

Result<JobSpec> JobSpec::FromJson(const json::value& v) {
  if (!v.is_object()) return Status::Corruption("job.json is not a JSON object");
  const auto& o = v.as_object();
  JobSpec s;
  s.suite = StringField(o, "suite");
  s.task_glob = StringField(o, "task_glob");
  s.agent = StringField(o, "agent");
  s.model = StringField(o, "model");
  s.trials = static_cast<uint32_t>(IntField(o, "trials"));
  s.concurrency = static_cast<uint32_t>(IntField(o, "concurrency"));
  s.max_attempts = static_cast<uint32_t>(IntField(o, "max_attempts"));
  s.server = StringField(o, "server");
  s.sandboxd = StringField(o, "sandboxd");
  if (const json::object* t = json_fields::ObjectField(o, "sandboxd_tls")) {
    s.sandboxd_tls.cert_file = StringField(*t, "cert_file");
    s.sandboxd_tls.key_file = StringField(*t, "key_file");
    s.sandboxd_tls.ca_file = StringField(*t, "ca_file");
    s.sandboxd_tls.server_name_override = StringField(*t, "server_name");
  }
  s.created_unix_ms = IntField(o, "created_unix_ms");
  if (const json::array* c = json_fields::ArrayField(o, "configs")) {
    for (const auto& x : *c) {
      if (x.is_string()) s.configs.emplace_back(x.as_string());
    }
  }
  if (s.suite.empty() || s.agent.empty() || s.trials == 0 || s.configs.empty()) {
    return Status::Corruption("job.json lacks suite, agent, trials or configs");
  }
  if (s.concurrency == 0) s.concurrency = 1;
  if (s.max_attempts == 0) s.max_attempts = 1;
  return s;
}

json::object TrialRecord::ToJson() const {
  json::object o = KeyJson(key, attempt);
  o["outcome"] = outcome;
  o["cause"] = cause;
  o["session_id"] = session_id.empty() ? json::value(nullptr) : json::value(session_id);
  o["sandbox_id"] = sandbox_id;
  o["reward"] = reward ? json::value(*reward) : json::value(nullptr);
  o["interrupted"] = interrupted;
  o["started_unix_ms"] = started_unix_ms;
  o["setup_ms"] = setup_ms;
  o["agent_ms"] = agent_ms;
  o["verifier_ms"] = verifier_ms;
  o["total_ms"] = total_ms;
  o["overhead_ms"] = overhead_ms();
  o["tokens_in"] = tokens_in;
  o["tokens_out"] = tokens_out;
  o["tool_calls"] = tool_calls;
  o["memory_peak_bytes"] = memory_peak_bytes;
  o["cpu_seconds"] = cpu_seconds;
  boost::system::error_code ec;
  json::value shape_v = shape.empty() ? json::value(nullptr) : json::parse(shape, ec);
  o["resources"] = ec ? json::value(nullptr) : shape_v;
  return o;
}

Result<TrialRecord> TrialRecord::FromJson(const json::object& o) {
  TrialRecord r;
  SINEW_ASSIGN_OR_RETURN(r.key, KeyFrom(o));
  r.attempt = static_cast<uint32_t>(IntField(o, "attempt"));
  r.outcome = StringField(o, "outcome");
  r.cause = StringField(o, "cause");
  r.session_id = StringField(o, "session_id");
  r.sandbox_id = StringField(o, "sandbox_id");
  if (json_fields::Has(o, "reward")) r.reward = NumberField(o, "reward");
  r.interrupted = json_fields::BoolField(o, "interrupted");
  r.started_unix_ms = IntField(o, "started_unix_ms");
  r.setup_ms = IntField(o, "setup_ms");
  r.agent_ms = IntField(o, "agent_ms");
  r.verifier_ms = IntField(o, "verifier_ms");
  r.total_ms = IntField(o, "total_ms");
  r.tokens_in = IntField(o, "tokens_in");
  r.tokens_out = IntField(o, "tokens_out");
  r.tool_calls = IntField(o, "tool_calls");
  r.memory_peak_bytes = static_cast<uint64_t>(IntField(o, "memory_peak_bytes"));
  r.cpu_seconds = NumberField(o, "cpu_seconds");
  if (const json::object* s = json_fields::ObjectField(o, "resources"))
    r.shape = json::serialize(*s);
  if (r.attempt == 0 || r.outcome.empty())
    return Status::Corruption("journal end line without attempt or outcome");
  return r;
}

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& dir) {
  std::unique_ptr<Journal> j(new Journal());
  const std::string path = dir + "/trials.jsonl";
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) continue;  // a torn last line
      j->Apply(v.as_object());
    }
  }
  j->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (j->fd_ < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  // A torn last line gets a newline of its own so that the next line starts clean.
  off_t size = ::lseek(j->fd_, 0, SEEK_END);
  if (size > 0) {
    int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    char last = '\n';
    if (rfd >= 0) {
      if (::pread(rfd, &last, 1, size - 1) != 1) last = '\n';
      ::close(rfd);
    }
    if (last != '\n' && ::write(j->fd_, "\n", 1) != 1) {
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    }
  }
  return j;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

Status Journal::Append(const json::object& line) {
  std::string text = json::serialize(line) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(std::string("cannot append to the journal: ") + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0)
    return Status::IOError(std::string("fdatasync: ") + std::strerror(errno));
  Apply(line);
  return Status::Ok();
}

void Journal::Apply(const json::object& line) {
  const std::string type = StringField(line, "type");
  auto key = KeyFrom(line);
  if (!key.ok()) return;
  const uint32_t attempt = static_cast<uint32_t>(IntField(line, "attempt"));
  auto id = std::make_pair(*key, attempt);
  if (type == "start") {
    Open_& o = open_[id];
    o.key = *key;
    o.attempt = attempt;
    o.started_unix_ms = IntField(line, "unix_ms");
  } else if (type == "sandbox") {
    if (auto it = open_.find(id); it != open_.end())
      it->second.sandbox_id = StringField(line, "sandbox_id");
  } else if (type == "session") {
    if (auto it = open_.find(id); it != open_.end())
      it->second.session_id = StringField(line, "session_id");
  } else if (type == "end") {
    auto r = TrialRecord::FromJson(line);
    if (!r.ok()) return;
    open_.erase(id);
    ended_.push_back(std::move(*r));
  }
}

std::vector<TrialRecord> Journal::Ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

std::vector<Journal::Open_> Journal::Unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Open_> out;
  for (const auto& [id, o] : open_) out.push_back(o);
  return out;
}

}  // namespace sinew::eval
