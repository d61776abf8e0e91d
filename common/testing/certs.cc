#include "sinew/testing/certs.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace sinew::testing {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace

GrpcTlsOptions CertFiles(const std::string& dir, const std::string& name, const std::string& ca_dir) {
  GrpcTlsOptions tls;
  tls.cert_file = dir + "/" + name + ".pem";
  tls.key_file = dir + "/" + name + "-key.pem";
  tls.ca_file = (ca_dir.empty() ? dir : ca_dir) + "/ca.pem";
  return tls;
}

void MakeCerts(const std::string& dir, const std::vector<std::string>& names) {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  std::string command = std::string(source ? source : ".") + "/scripts/make-certs.sh " + Quote(dir);
  for (const auto& name : names) command += " " + Quote(name);
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "MakeCerts: %s failed\n", command.c_str());
    std::abort();
  }
}

void ReplaceFile(const std::string& from, const std::string& to) {
  const std::string staged = to + ".staged";
  std::filesystem::copy_file(from, staged, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(staged, to);
}

RunResult RunToEnd(const std::vector<std::string>& argv) {
  std::string command;
  for (const auto& a : argv) command += Quote(a) + " ";
  command += "2>&1";
  RunResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace sinew::testing
