#include "rl/train/metrics.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skyrl::rl {
namespace {

std::string Line(const StepMetrics& m) {
  return absl::StrFormat(
      "step %4d  reward %.3f  exact %.2f  kl %.4f  loss %+.4f  grad %.3f  tok/s %7.0f  gen %.2fs  train "
      "%.2fs  "
      "sync %.2fs  elapsed %.1fs",
      m.step, m.mean_reward, m.exact_fraction, m.kl, m.loss, m.grad_norm, m.tokens_per_s, m.generate_s,
      m.train_s, m.sync_s, m.elapsed_s);
}

}  // namespace

std::string FormatStep(const StepMetrics& m) {
  std::string extra;
  if (m.staleness > 0) absl::StrAppendFormat(&extra, "  stale %d", m.staleness);
  if (m.dropped_samples > 0) absl::StrAppendFormat(&extra, "  dropped %d", m.dropped_samples);
  return extra.empty() ? Line(m) : Line(m) + extra;
}

std::string StepJson(const StepMetrics& m) {
  nlohmann::json j = {{"step", m.step},
                      {"mean_reward", m.mean_reward},
                      {"exact_fraction", m.exact_fraction},
                      {"loss", m.loss},
                      {"policy_loss", m.policy_loss},
                      {"kl", m.kl},
                      {"clip_fraction", m.clip_fraction},
                      {"grad_norm", m.grad_norm},
                      {"response_tokens", m.response_tokens},
                      {"tokens_per_s", m.tokens_per_s},
                      {"generate_s", m.generate_s},
                      {"reward_s", m.reward_s},
                      {"reference_s", m.reference_s},
                      {"train_s", m.train_s},
                      {"sync_s", m.sync_s},
                      {"sync_bytes", m.sync_bytes},
                      {"wait_s", m.wait_s},
                      {"staleness", m.staleness},
                      {"dropped_samples", m.dropped_samples},
                      {"step_s", m.step_s},
                      {"elapsed_s", m.elapsed_s},
                      {"start_unix_us", m.start_unix_us}};
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseSpan& p : m.phases)
    phases.push_back(
        {{"phase", p.phase}, {"start_unix_us", p.start_unix_us}, {"end_unix_us", p.end_unix_us}});
  j["phases"] = std::move(phases);
  return j.dump();
}

std::string MetricsJsonl(const std::vector<StepMetrics>& history) {
  std::string out;
  for (const StepMetrics& m : history) absl::StrAppend(&out, StepJson(m), "\n");
  return out;
}

std::string RewardCurveSvg(const std::vector<StepMetrics>& history, double target, const std::string& title) {
  constexpr double kW = 640, kH = 360, kL = 50, kR = 20, kT = 30, kB = 40;
  const double pw = kW - kL - kR, ph = kH - kT - kB;
  const int n = std::max<int>(1, history.empty() ? 1 : history.back().step);
  auto x = [&](double step) { return kL + pw * (n == 1 ? 0.5 : (step - 1) / (n - 1)); };
  auto y = [&](double v) { return kT + ph * (1 - std::clamp(v, 0.0, 1.0)); };
  std::string escaped;
  for (char c : title) {
    if (c == '<')
      escaped += "&lt;";
    else if (c == '>')
      escaped += "&gt;";
    else if (c == '&')
      escaped += "&amp;";
    else
      escaped += c;
  }
  std::string s = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"18\" font-size=\"14\">%s</text>\n",
      kW, kH, kL, escaped);
  for (double v : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                          kL, y(v), kL + pw, y(v), kL - 6, y(v) + 4, v);
  }
  absl::StrAppendFormat(
      &s,
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" "
      "stroke-dasharray=\"6 4\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"#c33\">target %.2f</text>\n",
      kL, y(target), kL + pw, y(target), kL + 4, y(target) - 4, target);
  absl::StrAppendFormat(&s,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step (1..%d)</text>\n"
                        "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" "
                        "text-anchor=\"middle\">reward</text>\n",
                        kL + pw / 2, kH - 10, n, kT + ph / 2, kT + ph / 2);
  auto polyline = [&](auto value, const char* color, const char* name, double legend_y) {
    std::string pts;
    for (const StepMetrics& m : history) absl::StrAppendFormat(&pts, "%.1f,%.1f ", x(m.step), y(value(m)));
    absl::StrAppendFormat(&s,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n"
                          "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n",
                          color, pts, kL + pw - 150, legend_y, color, name);
  };
  polyline([](const StepMetrics& m) { return m.mean_reward; }, "#1f77b4", "mean reward", kT + ph - 24);
  polyline([](const StepMetrics& m) { return m.exact_fraction; }, "#2ca02c", "exact-match share",
           kT + ph - 8);
  s += "</svg>\n";
  return s;
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace skyrl::rl
