#include "sinew/eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sinew/eval/resource_config.h"
#include "sinew/eval/runner.h"
#include "sinew/eval/stats.h"
#include "sinew/json_fields.h"

namespace sinew::eval {
namespace json = boost::json;
using json_fields::NumberField;
using json_fields::StringField;

namespace {

const std::vector<std::string>& OutcomeNames() {
  static const std::vector<std::string> kNames = {kPassed,          kFailed,     kAgentTimeout,
                                                  kVerifierTimeout, kAgentError, kInfraError};
  return kNames;
}

double Num(const json::value& v) {
  if (v.is_double()) return v.as_double();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  return 0;
}

json::object Dist(const std::vector<double>& xs) {
  return {{"mean", Mean(xs)}, {"p50", Quantile(xs, 0.5)}, {"p95", Quantile(xs, 0.95)}};
}
json::array Pair(Interval i) { return {i.low, i.high}; }

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

const char* Colour(const std::string& outcome) {
  if (outcome == kPassed) return "#2e9e44";
  if (outcome == kFailed) return "#d0473a";
  if (outcome == kAgentTimeout) return "#e8a23a";
  if (outcome == kVerifierTimeout) return "#c27c0e";
  if (outcome == kAgentError) return "#8e5cc2";
  return "#555c66";  // infra_error
}

}  // namespace

json::object BuildResults(const ReportInput& in) {
  // The final attempt of each trial decides it.
  std::map<TrialKey, const TrialRecord*> final_of;
  for (const auto& r : in.attempts) {
    auto& f = final_of[r.key];
    if (!f || r.attempt > f->attempt) f = &r;
  }
  json::array trials;
  for (const auto& r : in.attempts) {
    json::object o = r.ToJson();
    o["final"] = final_of[r.key] == &r;
    trials.push_back(std::move(o));
  }

  json::object summary;
  for (const auto& config : in.configs) {
    std::vector<const TrialRecord*> finals;
    for (const auto& [k, r] : final_of) {
      if (k.config == config) finals.push_back(r);
    }
    uint64_t n = finals.size(), passed = 0, infra = 0, attempts = 0;
    json::object by_outcome;
    for (const auto& name : OutcomeNames()) by_outcome[name] = 0;
    std::vector<double> setup, agent, verifier, total, overhead, tin, tout, mem, cpu;
    std::map<std::string, std::pair<uint64_t, uint64_t>> per_task;  // task -> (n, passed)
    for (const auto* r : finals) {
      passed += r->passed();
      infra += r->infra();
      by_outcome[r->outcome] = by_outcome[r->outcome].as_int64() + 1;
      auto& pt = per_task[r->key.task];
      ++pt.first;
      pt.second += r->passed();
    }
    for (const auto& r : in.attempts) {
      if (r.key.config != config) continue;
      ++attempts;
      if (r.interrupted) continue;
      setup.push_back(static_cast<double>(r.setup_ms) / 1000);
      agent.push_back(static_cast<double>(r.agent_ms) / 1000);
      verifier.push_back(static_cast<double>(r.verifier_ms) / 1000);
      total.push_back(static_cast<double>(r.total_ms) / 1000);
      overhead.push_back(static_cast<double>(r.overhead_ms()) / 1000);
      tin.push_back(static_cast<double>(r.tokens_in));
      tout.push_back(static_cast<double>(r.tokens_out));
      mem.push_back(static_cast<double>(r.memory_peak_bytes) / (1 << 20));
      cpu.push_back(r.cpu_seconds);
    }
    // pass@k over tasks that ran at least k trials.
    json::object pass_at_k;
    uint64_t max_k = 0;
    for (const auto& [t, np] : per_task) max_k = std::max(max_k, np.first);
    for (uint64_t k = 1; k <= max_k; ++k) {
      double sum = 0;
      uint64_t count = 0;
      for (const auto& [t, np] : per_task) {
        if (np.first < k) continue;
        sum += PassAtK(np.first, np.second, k);
        ++count;
      }
      if (count) pass_at_k[std::to_string(k)] = sum / static_cast<double>(count);
    }
    const uint64_t scored = n - infra;
    json::object s{
        {"n", n},
        {"passed", passed},
        {"pass_rate", n ? static_cast<double>(passed) / static_cast<double>(n) : 0.0},
        {"wilson_95", Pair(Wilson95(passed, n))},
        {"pass_rate_excluding_infra",
         scored ? static_cast<double>(passed) / static_cast<double>(scored) : 0.0},
        {"wilson_95_excluding_infra", Pair(Wilson95(passed, scored))},
        {"infra_errors", infra},
        {"infra_error_rate", n ? static_cast<double>(infra) / static_cast<double>(n) : 0.0},
        {"infra_wilson_95", Pair(Wilson95(infra, n))},
        {"outcomes", by_outcome},
        {"attempts", attempts},
        {"pass_at_k", pass_at_k},
        {"seconds", json::object{{"setup", Dist(setup)},
                                 {"agent", Dist(agent)},
                                 {"verifier", Dist(verifier)},
                                 {"total", Dist(total)},
                                 {"overhead", Dist(overhead)}}},
        {"tokens", json::object{{"in", Dist(tin)}, {"out", Dist(tout)}}},
        {"memory_peak_mb", Dist(mem)},
        {"cpu_seconds", Dist(cpu)},
    };
    summary[config] = std::move(s);
  }

  json::array comparisons;
  for (size_t i = 0; i < in.configs.size(); ++i) {
    for (size_t j = i + 1; j < in.configs.size(); ++j) {
      std::vector<std::pair<bool, bool>> pairs;
      for (const auto& [k, r] : final_of) {
        if (k.config != in.configs[i]) continue;
        TrialKey other{k.task, in.configs[j], k.trial};
        auto it = final_of.find(other);
        if (it == final_of.end()) continue;
        pairs.emplace_back(r->passed(), it->second->passed());
      }
      PairedComparison c = ComparePaired(pairs);
      BootstrapResult boot = PairedBootstrap(pairs);
      comparisons.push_back(json::object{{"a", in.configs[i]},
                                         {"b", in.configs[j]},
                                         {"pairs", c.pairs},
                                         {"only_a_passed", c.only_a},
                                         {"only_b_passed", c.only_b},
                                         {"difference", c.difference},
                                         {"difference_95", Pair(c.interval_95)},
                                         {"mcnemar_exact_p", c.p_value},
                                         {"bootstrap_95", Pair(boot.interval_95)},
                                         {"bootstrap_p", boot.p_value},
                                         {"bootstrap_resamples", boot.resamples},
                                         {"bootstrap_seed", boot.seed}});
    }
  }
  json::array tasks, configs;
  for (const auto& t : in.tasks) tasks.emplace_back(t);
  for (const auto& c : in.configs) configs.emplace_back(c);
  return {{"schema", "sinew.eval.results/1"},
          {"job", in.spec.ToJson()},
          {"tasks", tasks},
          {"configs", configs},
          {"trials", trials},
          {"summary", summary},
          {"comparisons", comparisons}};
}

std::string SummaryTable(const json::object& results) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-16s %5s %6s  %-22s %6s  %-22s %8s %8s %9s\n", "config", "n",
                "passed", "pass rate [95% CI]", "infra", "infra rate [95% CI]", "p50 s", "p95 s",
                "tokens");
  out << line;
  for (const auto& c : results.at("configs").as_array()) {
    const std::string name(c.as_string());
    const auto& s = results.at("summary").as_object().at(name).as_object();
    const auto& w = s.at("wilson_95").as_array();
    const auto& iw = s.at("infra_wilson_95").as_array();
    const auto& total = s.at("seconds").as_object().at("total").as_object();
    const auto& tokens = s.at("tokens").as_object();
    double tok = NumberField(tokens.at("in").as_object(), "mean") +
                 NumberField(tokens.at("out").as_object(), "mean");
    std::string rate = Fmt("%.1f%%", 100 * NumberField(s, "pass_rate")) + " [" +
                       Fmt("%.1f", 100 * Num(w[0])) + ", " + Fmt("%.1f", 100 * Num(w[1])) + "]";
    std::string irate = Fmt("%.1f%%", 100 * NumberField(s, "infra_error_rate")) + " [" +
                        Fmt("%.1f", 100 * Num(iw[0])) + ", " + Fmt("%.1f", 100 * Num(iw[1])) + "]";
    std::snprintf(line, sizeof line, "%-16s %5.0f %6.0f  %-22s %6.0f  %-22s %8.2f %8.2f %9.0f\n",
                  name.c_str(), NumberField(s, "n"), NumberField(s, "passed"), rate.c_str(),
                  NumberField(s, "infra_errors"), irate.c_str(), NumberField(total, "p50"),
                  NumberField(total, "p95"), tok);
    out << line;
    std::string pk;
    for (const auto& [k, v] : s.at("pass_at_k").as_object()) {
      pk += " pass@" + std::string(k) + "=" + Fmt("%.3f", Num(v));
    }
    if (!pk.empty()) out << "  " << name << ":" << pk << "\n";
  }
  for (const auto& cv : results.at("comparisons").as_array()) {
    const auto& c = cv.as_object();
    const auto& iv = c.at("difference_95").as_array();
    out << StringField(c, "b") << " vs " << StringField(c, "a") << ": "
        << Fmt("%+.1f", 100 * NumberField(c, "difference")) << " points ["
        << Fmt("%+.1f", 100 * Num(iv[0])) << ", " << Fmt("%+.1f", 100 * Num(iv[1])) << "] over "
        << Fmt("%.0f", NumberField(c, "pairs")) << " pairs (only " << StringField(c, "a") << ": "
        << Fmt("%.0f", NumberField(c, "only_a_passed")) << ", only " << StringField(c, "b") << ": "
        << Fmt("%.0f", NumberField(c, "only_b_passed"))
        << "), exact McNemar p = " << Fmt("%.4g", NumberField(c, "mcnemar_exact_p"))
        << (NumberField(c, "mcnemar_exact_p") < 0.05 ? " (a real difference at 5%)"
                                                     : " (could be noise)")
        << "\n";
    if (const json::array* bv = json_fields::ArrayField(c, "bootstrap_95")) {
      const auto& bi = *bv;
      out << "  paired bootstrap (" << Fmt("%.0f", NumberField(c, "bootstrap_resamples"))
          << " resamples, seed " << Fmt("%.0f", NumberField(c, "bootstrap_seed")) << "): ["
          << Fmt("%+.1f", 100 * Num(bi[0])) << ", " << Fmt("%+.1f", 100 * Num(bi[1]))
          << "] points, p = " << Fmt("%.4g", NumberField(c, "bootstrap_p")) << "\n";
    }
  }
  return out.str();
}

namespace {

// A bar chart of rates in [0, 1] with 95% error bars, as inline SVG.
std::string RateChart(const json::object& results, const char* rate_key, const char* ci_key,
                      const char* colour) {
  const auto& configs = results.at("configs").as_array();
  const int bar = 56, gap = 28, left = 44, top = 12, height = 180;
  const int width = left + static_cast<int>(configs.size()) * (bar + gap) + gap;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height + 50
    << "' role='img'>";
  for (int pct = 0; pct <= 100; pct += 25) {
    int y = top + height - height * pct / 100;
    o << "<line x1='" << left << "' x2='" << width << "' y1='" << y << "' y2='" << y
      << "' stroke='#ddd'/><text x='" << left - 6 << "' y='" << y + 4
      << "' text-anchor='end' font-size='11'>" << pct << "%</text>";
  }
  int x = left + gap;
  for (const auto& c : configs) {
    const std::string name(c.as_string());
    const auto& s = results.at("summary").as_object().at(name).as_object();
    double rate = NumberField(s, rate_key);
    const auto& ci = s.at(ci_key).as_array();
    int h = static_cast<int>(std::lround(rate * height));
    int ylo = top + height - static_cast<int>(std::lround(Num(ci[0]) * height));
    int yhi = top + height - static_cast<int>(std::lround(Num(ci[1]) * height));
    int cx = x + bar / 2;
    o << "<rect x='" << x << "' y='" << top + height - h << "' width='" << bar << "' height='" << h
      << "' fill='" << colour << "'><title>" << Esc(name) << ": " << Fmt("%.1f%%", rate * 100)
      << " [" << Fmt("%.1f", Num(ci[0]) * 100) << ", " << Fmt("%.1f", Num(ci[1]) * 100)
      << "]</title></rect>";
    o << "<line x1='" << cx << "' x2='" << cx << "' y1='" << ylo << "' y2='" << yhi
      << "' stroke='#111' stroke-width='1.5'/>";
    for (int y : {ylo, yhi}) {
      o << "<line x1='" << cx - 8 << "' x2='" << cx + 8 << "' y1='" << y << "' y2='" << y
        << "' stroke='#111' stroke-width='1.5'/>";
    }
    o << "<text x='" << cx << "' y='" << top + height + 16
      << "' text-anchor='middle' font-size='12'>" << Esc(name) << "</text><text x='" << cx
      << "' y='" << top + height + 32 << "' text-anchor='middle' font-size='11'>"
      << Fmt("%.1f%%", rate * 100) << "</text>";
    x += bar + gap;
  }
  o << "</svg>";
  return o.str();
}

// Dots of one per-attempt figure per configuration, with the median marked.
std::string StripChart(const json::object& results, const char* field, double scale,
                       const char* unit) {
  const auto& configs = results.at("configs").as_array();
  std::map<std::string, std::vector<double>> values;
  double max_v = 0;
  for (const auto& tv : results.at("trials").as_array()) {
    const auto& t = tv.as_object();
    if (t.at("interrupted").as_bool()) continue;
    double v = NumberField(t, field) * scale;
    values[StringField(t, "config")].push_back(v);
    max_v = std::max(max_v, v);
  }
  if (max_v <= 0) max_v = 1;
  const int row = 34, left = 120, width = 620, top = 10;
  const int height = top + static_cast<int>(configs.size()) * row + 30;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + width + 20 << "' height='"
    << height << "' role='img'>";
  int y = top + row / 2;
  for (const auto& c : configs) {
    const std::string name(c.as_string());
    o << "<text x='" << left - 8 << "' y='" << y + 4 << "' text-anchor='end' font-size='12'>"
      << Esc(name) << "</text><line x1='" << left << "' x2='" << left + width << "' y1='" << y
      << "' y2='" << y << "' stroke='#eee'/>";
    for (double v : values[name]) {
      o << "<circle cx='" << left + static_cast<int>(v / max_v * width) << "' cy='" << y
        << "' r='4' fill='#3a6fd0' fill-opacity='0.5'/>";
    }
    double med = Quantile(values[name], 0.5);
    int mx = left + static_cast<int>(med / max_v * width);
    o << "<line x1='" << mx << "' x2='" << mx << "' y1='" << y - 10 << "' y2='" << y + 10
      << "' stroke='#111' stroke-width='2'><title>median " << Fmt("%.2f", med) << " " << unit
      << "</title></line>";
    y += row;
  }
  o << "<text x='" << left << "' y='" << height - 6 << "' font-size='11'>0</text><text x='"
    << left + width << "' y='" << height - 6 << "' text-anchor='end' font-size='11'>"
    << Fmt("%.2f", max_v) << " " << unit << "</text></svg>";
  return o.str();
}

}  // namespace

std::string RenderHtml(const json::object& results) {
  std::ostringstream o;
  const auto& job = results.at("job").as_object();
  o << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>sinew eval report</title>"
       "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
       "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:4px "
       "8px;"
       "font-size:13px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
       ".cell span{display:inline-block;margin:1px;padding:1px 4px;border-radius:3px;color:#fff;"
       "font-size:11px;font-family:monospace}.legend span{display:inline-block;padding:2px 6px;"
       "margin-right:6px;color:#fff;border-radius:3px;font-size:12px}h2{margin-top:28px}"
       "pre{background:#f7f7f7;padding:8px}</style></head><body>";
  o << "<h1>Evaluation report</h1><p>suite <code>" << Esc(StringField(job, "suite"))
    << "</code>, agent <b>" << Esc(StringField(job, "agent")) << "</b>"
    << (StringField(job, "model").empty() ? "" : " (model " + Esc(StringField(job, "model")) + ")")
    << ", " << NumberField(job, "trials") << " trial(s) per task and configuration.</p>";
  o << "<h2>Summary</h2><pre id='summary'>" << Esc(SummaryTable(results)) << "</pre>";
  o << "<h2>Pass rate per configuration (95% Wilson intervals)</h2>"
    << RateChart(results, "pass_rate", "wilson_95", "#2e9e44");
  o << "<h2>Infrastructure error rate per configuration</h2>"
    << RateChart(results, "infra_error_rate", "infra_wilson_95", "#555c66");
  o << "<h2>Tasks × configurations</h2><p class='legend'>";
  for (const auto& name : OutcomeNames()) {
    o << "<span style='background:" << Colour(name) << "'>" << name << "</span>";
  }
  o << "</p><table id='grid'><tr><th>task</th>";
  for (const auto& c : results.at("configs").as_array())
    o << "<th>" << Esc(std::string(c.as_string())) << "</th>";
  o << "</tr>";
  for (const auto& tv : results.at("tasks").as_array()) {
    const std::string task(tv.as_string());
    o << "<tr><td>" << Esc(task) << "</td>";
    for (const auto& cv : results.at("configs").as_array()) {
      o << "<td class='cell'>";
      for (const auto& rv : results.at("trials").as_array()) {
        const auto& r = rv.as_object();
        if (StringField(r, "task") != task ||
            StringField(r, "config") != std::string(cv.as_string()))
          continue;
        std::string who = StringField(r, "session_id").empty() ? StringField(r, "sandbox_id")
                                                               : StringField(r, "session_id");
        o << "<span style='background:" << Colour(StringField(r, "outcome"))
          << (r.at("final").as_bool() ? "" : ";opacity:0.55") << "' title='"
          << Esc(StringField(r, "outcome") +
                 (StringField(r, "cause").empty() ? "" : ": " + StringField(r, "cause")))
          << "'>#" << NumberField(r, "trial") << "." << NumberField(r, "attempt") << " " << Esc(who)
          << "</span>";
      }
      o << "</td>";
    }
    o << "</tr>";
  }
  o << "</table>";
  o << "<h2>Time per attempt</h2>" << StripChart(results, "total_ms", 0.001, "s");
  o << "<h2>Tokens per attempt (in + out)</h2>" << StripChart(results, "tokens_in", 1, "tokens in");
  o << StripChart(results, "tokens_out", 1, "tokens out");
  o << "<h2>Peak sandbox memory per attempt</h2>"
    << StripChart(results, "memory_peak_bytes", 1.0 / (1 << 20), "MiB");
  o << "</body></html>\n";
  return o.str();
}

Result<std::string> WriteReport(const std::string& dir) {
  SINEW_ASSIGN_OR_RETURN(JobSpec spec, LoadJob(dir));
  SINEW_ASSIGN_OR_RETURN(auto journal, Journal::Open(dir));
  ReportInput in;
  in.spec = spec;
  in.attempts = journal->Ended();
  auto plan = PlanJob(spec);
  if (plan.ok()) {
    for (const auto& t : plan->tasks) in.tasks.push_back(t.name);
    for (const auto& c : plan->configs) in.configs.push_back(c.name);
  } else {
    std::set<std::string> seen_t, seen_c;
    for (const auto& r : in.attempts) {
      if (seen_t.insert(r.key.task).second) in.tasks.push_back(r.key.task);
      if (seen_c.insert(r.key.config).second) in.configs.push_back(r.key.config);
    }
  }
  json::object results = BuildResults(in);
  for (const auto& [name, content] :
       {std::pair<std::string, std::string>{"results.json", json::serialize(results) + "\n"},
        {"report.html", RenderHtml(results)}}) {
    std::ofstream out(dir + "/" + name + ".tmp", std::ios::binary);
    out << content;
    out.close();
    if (!out || std::rename((dir + "/" + name + ".tmp").c_str(), (dir + "/" + name).c_str()) != 0) {
      return Status::IOError("cannot write " + dir + "/" + name);
    }
  }
  std::string unfinished;
  if (auto open = journal->Unfinished(); !open.empty()) {
    unfinished = std::to_string(open.size()) +
                 " attempt(s) still open (running, or a killed runner: "
                 "`sinew eval resume " +
                 dir + "`)\n";
  }
  return SummaryTable(results) + unfinished;
}

}  // namespace sinew::eval
