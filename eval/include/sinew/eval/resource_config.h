// Resource configurations of an evaluation: the sandbox's guaranteed memory and its kill
// ceiling set separately, plus CPUs and pids, absolute or as multiples of a task's own
// figures (docs/eval.md).
//
//   --config 1x                 preset: guarantee = ceiling = the task's memory_mb, cpus = task's
//   --config g1x-c3x            preset form g<A>x-c<B>x: guarantee A×, ceiling and cpus B×
//   --config uncapped           guarantee 1×, ceiling 16 GiB, cpus = host cores
//   --config NAME=SPEC          SPEC: comma-separated guarantee=, ceiling=, cpus=, pids=;
//                               sizes as 512m / 2g / 1048576 (bytes) or multiples like 2x
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <string>

#include "sinew/eval/task.h"
#include "sinew/status.h"

namespace sinew::eval {

// An absolute figure or a multiple of the task's own figure.
struct Amount {
  double value = 1;
  bool multiple = true;  // value × the task's figure
};

struct ResourceConfig {
  std::string name;   // the name trials carry in results.json
  std::string spec;   // as given (for the record)
  Amount guarantee;   // memory guarantee (soft limit); bytes when absolute
  Amount ceiling;     // memory kill limit; bytes when absolute
  Amount cpus;        // CPU quota; cores when absolute
  uint32_t pids = 0;  // 0: the provisioner's default
};

// Parses one --config argument. Errors say what is wrong and show the accepted forms.
[[nodiscard]] Result<ResourceConfig> ParseResourceConfig(const std::string& arg);

// The concrete sandbox shape of `task` under `config`.
struct SandboxShape {
  uint64_t memory_guaranteed_bytes = 0;
  uint64_t memory_limit_bytes = 0;
  uint32_t cpu_millicores = 0;
  uint32_t pids_limit = 0;
  uint64_t workspace_bytes = 0;
  std::string image;
};
// REQUIRES: config parsed by ParseResourceConfig. A guarantee above the ceiling is
// lowered to the ceiling.
SandboxShape ResolveShape(const ResourceConfig& config, const Task& task);

// "512m", "2g", "1.5g", "1048576" → bytes; "2x" → multiple.
[[nodiscard]] Result<Amount> ParseSize(const std::string& text);

}  // namespace sinew::eval
