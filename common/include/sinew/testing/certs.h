// Test certificates made by the project's own scripts/make-certs.sh (openssl): a CA in
// `dir` and, per name, NAME.pem / NAME-key.pem signed by it, valid for the DNS name NAME,
// localhost, 127.0.0.1 and ::1. For tests only (aborts on failure).
#pragma once

#include <string>
#include <vector>

#include "sinew/grpc_tls_options.h"

namespace sinew::testing {

// Runs scripts/make-certs.sh DIR NAMES... (from $SINEW_SOURCE_DIR, or the working
// directory). Makes the CA when DIR has none; renews the NAME certificates otherwise.
void MakeCerts(const std::string& dir, const std::vector<std::string>& names);

// NAME's certificate and key in `dir` (made by MakeCerts), trusting `ca_dir`'s CA
// (default: `dir`'s own).
GrpcTlsOptions CertFiles(const std::string& dir, const std::string& name, const std::string& ca_dir = "");

// Copies `from` over `to` in one rename (as a deployment tool would), so a process
// watching `to` sees the old file or the new one, never half of it.
void ReplaceFile(const std::string& from, const std::string& to);

// Runs `argv` to its end with stdout and stderr captured together; returns the exit
// code (128+signal when killed) and the output.
struct RunResult {
  int exit_code = -1;
  std::string output;
};
RunResult RunToEnd(const std::vector<std::string>& argv);

}  // namespace sinew::testing
