// The seconds of one RL step by phase, shared by the single-process loop (RunLocalGrpo) and
// the distributed job (RunDistributedGrpo), so both report StepMetrics the same way.
//
//   StepTimer t(run_start);        // the step starts now
//   ...generate...  t.Lap(Phase::kGenerate);
//   ...score...     t.Lap(Phase::kReward);
//   t.Finish(&m);                  // m.generate_s, ..., m.step_s, m.elapsed_s, m.tokens_per_s,
//                                  // and m.start_unix_us, m.phases (wall clock, for timelines)
//
// Each Lap charges the time since the previous lap (or the step's start) to a phase; Skip
// charges it to none (time a phase measured on its own, given with Charge, already covers).
// Not thread-safe: one step, one thread.
#pragma once

#include <array>
#include <chrono>
#include <vector>

#include "rl/train/metrics.h"

namespace skyrl::rl {

class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kGenerate, kReward, kTrain, kWait, kSync };

  explicit StepTimer(Clock::time_point run_start)
      : run_start_(run_start),
        start_(Clock::now()),
        start_unix_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()),
        last_(start_) {}

  void Lap(Phase phase) {
    const Clock::time_point now = Clock::now();
    seconds_[Index(phase)] += Seconds(last_, now);
    spans_.push_back({Name(phase), UnixMicros(last_), UnixMicros(now)});
    last_ = now;
  }
  void Skip() { last_ = Clock::now(); }
  void Charge(Phase phase, double seconds) { seconds_[Index(phase)] += seconds; }

  // Fills the phases, step_s (start to now), elapsed_s (run start to now) and tokens_per_s
  // (m->response_tokens over step_s).
  void Finish(StepMetrics* m) const {
    const Clock::time_point now = Clock::now();
    m->generate_s = seconds_[Index(Phase::kGenerate)];
    m->reward_s = seconds_[Index(Phase::kReward)];
    m->train_s = seconds_[Index(Phase::kTrain)];
    m->wait_s = seconds_[Index(Phase::kWait)];
    m->sync_s = seconds_[Index(Phase::kSync)];
    m->step_s = Seconds(start_, now);
    m->elapsed_s = Seconds(run_start_, now);
    m->tokens_per_s = m->step_s > 0 ? static_cast<double>(m->response_tokens) / m->step_s : 0;
    m->start_unix_us = start_unix_us_;
    m->phases = spans_;
  }

  static const char* Name(Phase p) {
    static constexpr std::array<const char*, 5> kNames = {"generate", "reward", "train", "wait", "sync"};
    return kNames[Index(p)];
  }

 private:
  static size_t Index(Phase p) { return static_cast<size_t>(p); }
  // Wall-clock microseconds of a steady-clock instant of this step (steady for the widths).
  int64_t UnixMicros(Clock::time_point t) const {
    return start_unix_us_ + std::chrono::duration_cast<std::chrono::microseconds>(t - start_).count();
  }
  static double Seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  const Clock::time_point run_start_, start_;
  const int64_t start_unix_us_;
  Clock::time_point last_;
  std::array<double, 5> seconds_{};
  std::vector<PhaseSpan> spans_;
};

}  // namespace skyrl::rl
