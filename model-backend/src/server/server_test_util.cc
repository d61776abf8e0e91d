#include "server_test_util.h"

#include <boost/json.hpp>
#include "sinew/http/client.h"
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sinew::model::testing {
namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

}  // namespace

std::string StoriesPath() {
  return EnvOr("SINEW_SOURCE_DIR", ".") + "/../shared/models/stories260K.gguf";
}

std::string Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int index = 0; index < length; ++index) {
    char pair[3];
    std::snprintf(pair, sizeof(pair), "%02x", digest[index]);
    hex += pair;
  }
  return hex;
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& extra_args,
                                                    std::string* error) {
  std::string binary = EnvOr("SINEW_BIN_DIR", "build/bin") + "/sinew-model";
  std::vector<std::string> args = {binary,        "--model", StoriesPath(), "--port", "0",
                                   "--grpc-port", "0",       "--threads",   "1"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *error = "pipe failed";
    return nullptr;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  auto process = std::unique_ptr<ServerProcess>(new ServerProcess());
  process->pid_ = pid;
  std::string output;
  while (process->http_port_ == 0 || process->grpc_port_ == 0) {
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (poll(&fd, 1, 120000) <= 0) break;
    char buffer[512];
    ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
      size_t colon = line.rfind(':');
      if (colon == std::string::npos) continue;
      int port = std::atoi(line.c_str() + colon + 1);
      if (line.starts_with("http listening on ")) process->http_port_ = static_cast<uint16_t>(port);
      if (line.starts_with("grpc listening on ")) process->grpc_port_ = static_cast<uint16_t>(port);
    }
  }
  close(pipe_fds[0]);
  if (process->http_port_ == 0 || process->grpc_port_ == 0) {
    *error = "sinew-model did not start; its output: " + output;
    return nullptr;
  }
  return process;
}

int RunServerToExit(const std::vector<std::string>& args, std::string* output) {
  std::string binary = EnvOr("SINEW_BIN_DIR", "build/bin") + "/sinew-model";
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  for (;;) {
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (poll(&fd, 1, 120000) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    char buffer[512];
    ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    output->append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

bool ServerProcess::Alive() {
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

HttpResult HttpCall(uint16_t port, const std::string& method, const std::string& path,
                    const std::string& body, const std::string& content_type) {
  HttpResult result;
  sinew::http::ClientRequest request;
  request.method = method;
  request.url = "http://127.0.0.1:" + std::to_string(port) + path;
  request.timeout_ms = 300000;
  if (method == "POST") {
    request.body = body;
    if (!content_type.empty()) request.headers.push_back("Content-Type: " + content_type);
  }
  auto response = sinew::http::Fetch(request, [&](std::string_view piece) {
    result.body.append(piece);
    ++result.body_callbacks;
    return true;
  });
  if (!response.ok()) {
    result.error = response.status().message();
    return result;
  }
  result.status = response->status;
  result.content_type = std::string(response->Header("content-type"));
  for (const auto& [name, value] : response->headers) result.headers += name + ": " + value + "\r\n";
  return result;
}

std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    if (event.starts_with("data: ")) events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

StreamedChat CollectChatStream(const std::string& sse_body) {
  namespace json = boost::json;
  StreamedChat out;
  for (const std::string& data : SseData(sse_body)) {
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    boost::system::error_code ec;
    const json::value event = json::parse(data, ec);
    if (ec || !event.is_object()) {
      out.error += "unparsable event: " + data + "; ";
      continue;
    }
    const json::array& choices = event.at("choices").as_array();
    if (choices.empty()) continue;  // the usage chunk
    const json::object& choice = choices[0].as_object();
    if (!choice.at("finish_reason").is_null()) out.finish_reason = choice.at("finish_reason").as_string();
    const json::object& delta = choice.at("delta").as_object();
    if (const auto* c = delta.if_contains("content"); c && c->is_string()) out.content += c->as_string();
    if (const auto* r = delta.if_contains("reasoning_content")) out.reasoning += r->as_string();
    const auto* calls = delta.if_contains("tool_calls");
    if (calls == nullptr) continue;
    for (const json::value& call : calls->as_array()) {
      const size_t index = static_cast<size_t>(call.at("index").to_number<int64_t>());
      const json::object& fn = call.at("function").as_object();
      if (call.as_object().contains("id")) {
        if (index != out.calls.size()) out.error += "call announced out of order; ";
        if (!fn.contains("name")) out.error += "first delta without a name; ";
        out.calls.push_back({std::string(call.at("id").as_string()),
                             std::string(call.at("type").as_string()),
                             fn.contains("name") ? std::string(fn.at("name").as_string()) : "", "", 0});
      } else if (index >= out.calls.size()) {
        out.error += "arguments before the call's first delta; ";
        continue;
      }
      if (const auto* a = fn.if_contains("arguments")) {
        out.calls[index].arguments += a->as_string();
        if (!a->as_string().empty()) ++out.calls[index].argument_deltas;
      }
    }
  }
  return out;
}

}  // namespace sinew::model::testing
