#include "rl/train/local_trainer.h"

#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rl/algo/checkpoint.h"
#include "rl/algo/grpo.h"
#include "rl/algo/sampler.h"
#include "rl/collective/in_process_collective.h"
#include "rl/policy/policy.h"
#include "rl/policy/torch_status.h"
#include "rl/roles/generator_engine.h"
#include "rl/roles/trainer_shard.h"
#include "rl/tasks/tokenizer.h"
#include "rl/train/grpo_step.h"
#include "rl/train/step_timer.h"

namespace skyrl::rl {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

absl::StatusOr<RunSummary> RunRank(const JobConfig& config, const PolicyConfig& mc,
                                   const SamplingParams& sampling, const GrpoParams& grpo,
                                   const OptimParams& optim, Collective* comm,
                                   const std::function<void(const StepMetrics&)>& on_step,
                                   int stop_after_target, bool write_checkpoint);

}  // namespace

bool RecordStep(RunSummary& sum, const StepMetrics& m, int step, double target, int stop_after,
                int& at_target_run) {
  if (step == 1) sum.baseline_reward = m.mean_reward;
  if (m.mean_reward < target) {
    at_target_run = 0;
    return false;
  }
  if (sum.first_step_at_target < 0) {
    sum.first_step_at_target = step;
    sum.seconds_to_target = m.elapsed_s;
  }
  return stop_after > 0 && ++at_target_run >= stop_after;
}

void FinishSummary(RunSummary& sum) {
  sum.steps = static_cast<int>(sum.history.size());
  sum.total_s = sum.history.empty() ? 0 : sum.history.back().elapsed_s;
  const int tail = std::min<int>(5, sum.steps);
  for (int i = sum.steps - tail; i < sum.steps; ++i) sum.final_reward += sum.history[i].mean_reward / tail;
}

absl::StatusOr<RunSummary> RunLocalGrpo(const JobConfig& config,
                                        const std::function<void(const StepMetrics&)>& on_step,
                                        int stop_after_target, bool write_checkpoint) {
  const JobConfig::Trainer& tc = config.trainer;
  const JobConfig::Algorithm& ac = tc.algorithm;
  if (tc.tp_size < 1 || tc.tp_size > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.tp_size: the local run takes 1 to 8 (threads as ranks), got ", tc.tp_size));
  }
  auto task = FindTask(config.environment.task);
  if (!task.ok())
    return absl::InvalidArgumentError(absl::StrCat("environment.task: ", task.status().message()));
  if (auto s = ValidateTaskOptions(config.environment.options); !s.ok()) return s;
  SamplingParams sampling{config.generator.temperature, config.generator.top_p,
                          config.generator.max_generate_length};
  if (auto s = ValidateSamplingParams(sampling); !s.ok()) return s;
  GrpoParams grpo{
      ac.group_size,
      ac.eps_clip_low,
      ac.eps_clip_high,
      ac.kl_coef,
      ac.advantage_eps,
      ac.loss_reduction == "sequence_mean" ? LossReduction::kSequenceMean : LossReduction::kTokenMean};
  OptimParams optim;
  optim.lr = ac.lr;
  optim.weight_decay = ac.weight_decay;
  optim.max_grad_norm = ac.max_grad_norm;
  optim.update_epochs = ac.update_epochs;
  optim.mini_batches = ac.mini_batches;

  PolicyConfig mc = tc.model;
  mc.vocab = Tokenizer::kVocab;
  if (tc.async_enabled && tc.tp_size > 1) {
    return absl::InvalidArgumentError(
        "trainer.async.enabled: the local run overlaps generation with training only at trainer.tp_size 1 "
        "(its engine shares the trainer's ranks)");
  }
  if (auto s = ValidateTensorParallel(mc, tc.tp_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("trainer.", s.message()));
  }
  torch::set_num_threads(tc.num_threads);

  if (tc.tp_size == 1) {
    auto comm = MakeSingleRankCollective();
    return RunRank(config, mc, sampling, grpo, optim, comm.get(), on_step, stop_after_target,
                   write_checkpoint);
  }
  // Threads as ranks: every rank runs the same loop on its shard; the logits, and so the
  // samples, rewards and metrics, are the same on every rank, so rank 0 reports.
  auto group = MakeInProcessGroup(tc.tp_size);
  std::vector<absl::StatusOr<RunSummary>> results(tc.tp_size, absl::UnknownError("rank did not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < tc.tp_size; ++r) {
    threads.emplace_back([&, r] {
      results[r] = RunRank(config, mc, sampling, grpo, optim, group[r].get(), r == 0 ? on_step : nullptr,
                           stop_after_target, write_checkpoint);
    });
  }
  for (auto& t : threads) t.join();
  // The first rank that failed for its own reason (not because a peer broke the group).
  for (const auto& res : results) {
    if (!res.ok() && res.status().code() != absl::StatusCode::kAborted &&
        res.status().code() != absl::StatusCode::kDeadlineExceeded) {
      return res.status();
    }
  }
  for (const auto& res : results) {
    if (!res.ok()) return res.status();
  }
  return results[0];
}

namespace {

absl::StatusOr<RunSummary> RunRank(const JobConfig& config, const PolicyConfig& mc,
                                   const SamplingParams& sampling, const GrpoParams& grpo,
                                   const OptimParams& optim, Collective* comm,
                                   const std::function<void(const StepMetrics&)>& on_step,
                                   int stop_after_target, bool write_checkpoint) {
  const JobConfig::Trainer& tc = config.trainer;
  const JobConfig::Algorithm& ac = tc.algorithm;
  auto task = FindTask(config.environment.task);
  if (!task.ok()) return task.status();
  TrainerShardOptions topts{mc, grpo, optim, sampling.temperature, static_cast<uint64_t>(tc.seed)};
  auto trainer = TrainerShard::Create(topts, comm);
  if (!trainer.ok()) return trainer.status();
  // The engine shares the trainer's TP group here (colocated, same ranks); the distributed job
  // gives engines their own groups and moves the weights with weight sync instead of a copy.
  auto engine = GeneratorEngine::Create(mc, comm);
  if (!engine.ok()) return engine.status();
  if (auto s = (*engine)->LoadWeights((*trainer)->version(), (*trainer)->ExportShard()); !s.ok()) return s;

  std::mt19937_64 rng(PromptRngSeed(static_cast<uint64_t>(tc.seed)));
  // What the generator hands the trainer for one step.
  struct Produced {
    PromptSet prompts;
    GeneratorEngine::Result generated;
    double generate_s = 0;
  };
  // Prompts are drawn on the calling thread, so the prompt sequence is the same in both modes.
  auto produce = [&](int step, PromptSet prompts) -> absl::StatusOr<Produced> {
    const auto g0 = std::chrono::steady_clock::now();
    absl::StatusOr<GeneratorEngine::Result> generated = absl::UnknownError("not generated");
    if (config.generator.num_engines <= 1) {
      generated = (*engine)->Generate(prompts.batch, sampling, Tokenizer::kEos, Tokenizer::kPad,
                                      SamplerSeed(static_cast<uint64_t>(tc.seed), step));
    } else {
      // The distributed job's split (grpo_step.h): whole groups per engine, one seed each;
      // here one engine runs the slices in turn, so the two runs compute the same samples.
      std::vector<Rollout> parts;
      int64_t version = -1;
      const auto slices = SplitPrompts(prompts, ac.group_size, config.generator.num_engines);
      for (size_t e = 0; e < slices.size(); ++e) {
        auto part =
            (*engine)->Generate(slices[e].batch, sampling, Tokenizer::kEos, Tokenizer::kPad,
                                EngineSeed(static_cast<uint64_t>(tc.seed), step, static_cast<int>(e)));
        if (!part.ok()) return part.status();
        version = part->version;
        parts.push_back(std::move(part->rollout));
      }
      auto joined = ConcatRollouts(parts, Tokenizer::kPad);
      if (!joined.ok()) return joined.status();
      generated = GeneratorEngine::Result{std::move(*joined), version};
    }
    if (!generated.ok()) return generated.status();
    return Produced{std::move(prompts), std::move(*generated), Seconds(g0, std::chrono::steady_clock::now())};
  };
  auto prompts_for = [&]() {
    return MakePrompts(**task, config.environment.options, tc.train_batch_size, ac.group_size, rng);
  };
  // Async (one step ahead): while the trainer trains step k, the engine generates step k + 1
  // with the weights it has, which are one version behind; the weights for step k + 2 are
  // synced when both are done. Samples more than max_staleness versions old are dropped.
  const bool async = tc.async_enabled;
  std::future<absl::StatusOr<Produced>> ahead;

  RunSummary sum;
  int at_target_run = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= tc.steps; ++step) {
    StepTimer timer(start);
    absl::StatusOr<Produced> produced = absl::UnknownError("not produced");
    if (async && step > 1) {
      produced = ahead.get();
    } else {
      auto prompts = prompts_for();
      if (!prompts.ok()) return prompts.status();
      produced = produce(step, std::move(*prompts));
    }
    if (!produced.ok()) return produced.status();
    if (async && step < tc.steps) {
      auto prompts = prompts_for();
      if (!prompts.ok()) return prompts.status();
      ahead = std::async(std::launch::async, produce, step + 1, std::move(*prompts));
    }
    const Rollout* rollout = &produced->generated.rollout;
    // The generation's own seconds (in async mode it ran while the previous step trained).
    timer.Charge(StepTimer::Phase::kGenerate, produced->generate_s);
    timer.Skip();

    auto scored = ScoreRollout(**task, produced->prompts.examples, *rollout);
    if (!scored.ok()) return scored.status();
    timer.Lap(StepTimer::Phase::kReward);

    StepMetrics m;
    m.step = step;
    m.mean_reward = scored->mean_reward;
    m.exact_fraction = scored->exact_fraction;
    m.response_tokens = scored->response_tokens;
    m.staleness = (*trainer)->version() - produced->generated.version;
    if (m.staleness > tc.max_staleness) {
      // Too old to learn from: counted, not trained on. (With the one-step pipeline this
      // happens only when max_staleness is 0.)
      m.dropped_samples = static_cast<int64_t>(scored->rewards.size());
    } else {
      auto ref = (*trainer)->ReferenceLogprobs(*rollout);
      if (!ref.ok()) return ref.status();
      auto prep = MakeTrainBatch(*rollout, *scored, *ref, grpo);
      if (!prep.ok()) return prep.status();
      // Off-policy samples: the engine's log-probs are the behaviour policy's (exactly so only
      // without top-p truncation).
      if (m.staleness > 0 && sampling.top_p >= 1) prep->old_logprobs = rollout->logprobs;
      auto stats = (*trainer)->Update(*prep);
      if (!stats.ok()) return stats.status();
      m.loss = stats->loss;
      m.policy_loss = stats->policy_loss;
      m.kl = stats->kl;
      m.clip_fraction = stats->clip_fraction;
      m.grad_norm = stats->grad_norm;
    }
    timer.Lap(StepTimer::Phase::kTrain);
    if (async && step < tc.steps) {
      // The engine is busy with step + 1 until this returns; the new weights go in after.
      ahead.wait();
    }
    timer.Lap(StepTimer::Phase::kWait);
    if ((*trainer)->version() > (*engine)->version()) {  // not after a dropped step
      if (auto s = (*engine)->LoadWeights((*trainer)->version(), (*trainer)->ExportShard()); !s.ok())
        return s;
    }
    timer.Lap(StepTimer::Phase::kSync);
    timer.Finish(&m);
    sum.history.push_back(m);
    sum.dropped_samples += m.dropped_samples;
    if (on_step) on_step(m);
    if (write_checkpoint && tc.ckpt_interval > 0 && step % tc.ckpt_interval == 0) {
      std::error_code ec;
      std::filesystem::create_directories(tc.output_dir, ec);
      if (auto s = (*trainer)->Save(tc.output_dir); !s.ok()) return s;
    }

    if (RecordStep(sum, m, step, config.environment.target_reward, stop_after_target, at_target_run)) break;
  }
  FinishSummary(sum);

  if (write_checkpoint && tc.ckpt_interval >= 0) {
    std::error_code ec;
    std::filesystem::create_directories(tc.output_dir, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("trainer.output_dir ", tc.output_dir, ": ", ec.message()));
    if (auto s = (*trainer)->Save(tc.output_dir); !s.ok()) return s;
  }
  return sum;
}

}  // namespace
}  // namespace skyrl::rl
