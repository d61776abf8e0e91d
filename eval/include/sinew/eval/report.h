// Results of a job: results.json (schema in docs/eval.md), the summary table printed by
// `sinew eval report`, and a self-contained report.html (inline SVG and CSS, no network).
//
// Thread-safety: pure functions of their inputs.
#pragma once

#include <string>
#include <vector>

#include <boost/json.hpp>

#include "sinew/eval/job.h"
#include "sinew/status.h"

namespace sinew::eval {

struct ReportInput {
  JobSpec spec;
  std::vector<std::string> tasks;     // in suite order
  std::vector<std::string> configs;   // configuration names, in --config order
  std::vector<TrialRecord> attempts;  // every attempt, retries and interrupted ones included
};

// results.json: {"job", "trials" (every attempt, with "final": true on the attempt that
// decides its trial), "summary" (keyed by configuration), "comparisons"}.
boost::json::object BuildResults(const ReportInput& in);
// The summary table (plain text, fixed-width columns) and the comparisons.
std::string SummaryTable(const boost::json::object& results);
// The HTML report of `results`.
std::string RenderHtml(const boost::json::object& results);

// Reads the job in `dir`, writes DIR/results.json and DIR/report.html, and returns the
// summary table.
[[nodiscard]] Result<std::string> WriteReport(const std::string& dir);

}  // namespace sinew::eval
