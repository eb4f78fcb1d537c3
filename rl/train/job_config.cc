#include "rl/train/job_config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rl/tasks/tokenizer.h"

namespace skyrl::rl {
namespace {

// Reads one YAML map, remembering the first error. yaml-cpp throws; every call catches here.
class Reader {
 public:
  Reader(YAML::Node node, std::string prefix, absl::Status* err)
      : node_(node), prefix_(std::move(prefix)), err_(err) {}

  // Every key present must be one of `known`.
  void OnlyKeys(std::initializer_list<const char*> known) {
    if (!err_->ok() || !node_ || node_.IsNull()) return;
    if (!node_.IsMap()) {
      Fail(prefix_.empty() ? "the document" : prefix_.substr(0, prefix_.size() - 1), "must be a map");
      return;
    }
    std::set<std::string> k(known.begin(), known.end());
    for (const auto& kv : node_) {
      std::string key;
      try {
        key = kv.first.as<std::string>();
      } catch (const YAML::Exception&) {
        Fail(prefix_ + "?", "keys must be strings");
        return;
      }
      if (!k.count(key)) {
        Fail(prefix_ + key, absl::StrCat("unknown key (known here: ", absl::StrJoin(known, ", "), ")"));
        return;
      }
    }
  }

  Reader Sub(const char* key) {
    YAML::Node n = Get(key);
    if (!n.IsNull() && !n.IsMap() && err_->ok()) Fail(prefix_ + key, "must be a map");
    return Reader(n.IsMap() ? n : YAML::Node(), prefix_ + key + ".", err_);
  }

  template <typename T>
  void Read(const char* key, T* out, std::function<bool(const T&)> ok = nullptr, const char* want = "") {
    YAML::Node n = Get(key);
    if (n.IsNull() || !err_->ok()) return;
    T v;
    try {
      if (!n.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "not a scalar");
      v = n.as<T>();
    } catch (const YAML::Exception&) {
      Fail(prefix_ + key, absl::StrCat("must be ", TypeName<T>(), ", got ", Dump(n)));
      return;
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) {
        Fail(prefix_ + key, absl::StrCat("must be a finite number, got ", Dump(n)));
        return;
      }
    }
    if (ok && !ok(v)) {
      Fail(prefix_ + key, absl::StrCat("must be ", want, ", got ", Dump(n)));
      return;
    }
    *out = v;
  }

  void Fail(const std::string& key, absl::string_view what) {
    if (err_->ok()) *err_ = absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
  }

 private:
  // A Null node stands for an absent key (and an explicit `key: null`, which means the same).
  YAML::Node Get(const char* key) {
    if (!node_ || !node_.IsMap()) return YAML::Node();
    try {
      YAML::Node n = node_[key];
      return n.IsDefined() && !n.IsNull() ? n : YAML::Node();
    } catch (const YAML::Exception&) {
      return YAML::Node();
    }
  }
  static std::string Dump(const YAML::Node& n) {
    YAML::Emitter e;
    e << YAML::Flow << n;
    return absl::StrCat("'", e.c_str(), "'");
  }
  template <typename T>
  static const char* TypeName() {
    if constexpr (std::is_same_v<T, bool>) return "true or false";
    if constexpr (std::is_integral_v<T>) return "an integer";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "a string";
  }

  YAML::Node node_;
  std::string prefix_;
  absl::Status* err_;
};

template <typename T>
std::function<bool(const T&)> AtLeast(T lo) {
  return [lo](const T& v) { return v >= lo; };
}
template <typename T>
std::function<bool(const T&)> InRange(T lo, T hi) {
  return [lo, hi](const T& v) { return v >= lo && v <= hi; };
}

}  // namespace

absl::StatusOr<JobConfig> ParseJobConfig(absl::string_view yaml, absl::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  JobConfig c;
  c.trainer.model.vocab = Tokenizer::kVocab;
  absl::Status err;
  Reader top(root, "", &err);
  if (!root || root.IsNull()) return absl::InvalidArgumentError(absl::StrCat(source, ": empty config"));
  top.OnlyKeys({"trainer", "generator", "environment"});

  Reader tr = top.Sub("trainer");
  tr.OnlyKeys({"tp_size", "dp_size", "placement", "async", "steps", "train_batch_size", "seed", "num_threads",
               "output_dir", "ckpt_interval", "model", "algorithm"});
  JobConfig::Trainer& t = c.trainer;
  tr.Read<int>("tp_size", &t.tp_size, AtLeast(1), ">= 1");
  tr.Read<int>("dp_size", &t.dp_size, AtLeast(1), ">= 1");
  tr.Read<int>("steps", &t.steps, AtLeast(1), ">= 1");
  tr.Read<int>("train_batch_size", &t.train_batch_size, AtLeast(1), ">= 1");
  tr.Read<int64_t>("seed", &t.seed, AtLeast<int64_t>(0), ">= 0");
  tr.Read<int>("num_threads", &t.num_threads, InRange(1, 256), "in [1, 256]");
  tr.Read<std::string>(
      "output_dir", &t.output_dir, [](const std::string& s) { return !s.empty(); }, "non-empty");
  tr.Read<int>("ckpt_interval", &t.ckpt_interval, AtLeast(-1), ">= -1");
  Reader pl = tr.Sub("placement");
  pl.OnlyKeys({"colocate_all"});
  pl.Read<bool>("colocate_all", &t.colocate_all);
  Reader as = tr.Sub("async");
  as.OnlyKeys({"enabled", "max_staleness"});
  as.Read<bool>("enabled", &t.async_enabled);
  as.Read<int>("max_staleness", &t.max_staleness, AtLeast(0), ">= 0");
  Reader mo = tr.Sub("model");
  mo.OnlyKeys({"layers", "d_model", "heads", "max_len", "mlp_hidden", "init_std"});
  mo.Read<int>("layers", &t.model.layers, AtLeast(1), ">= 1");
  mo.Read<int>("d_model", &t.model.d_model, AtLeast(1), ">= 1");
  mo.Read<int>("heads", &t.model.heads, AtLeast(1), ">= 1");
  mo.Read<int>("max_len", &t.model.max_len, AtLeast(2), ">= 2");
  mo.Read<int>("mlp_hidden", &t.model.mlp_hidden, AtLeast(0), ">= 0 (0 = 4 * d_model)");
  mo.Read<double>(
      "init_std", &t.model.init_std, [](const double& v) { return v > 0; }, "> 0");
  Reader al = tr.Sub("algorithm");
  al.OnlyKeys({"advantage_estimator", "group_size", "eps_clip_low", "eps_clip_high", "kl_coef",
               "advantage_eps", "loss_reduction", "lr", "weight_decay", "max_grad_norm", "update_epochs",
               "mini_batches"});
  JobConfig::Algorithm& a = t.algorithm;
  al.Read<std::string>(
      "advantage_estimator", &a.advantage_estimator, [](const std::string& s) { return s == "grpo"; },
      "grpo");
  al.Read<int>("group_size", &a.group_size, AtLeast(2), ">= 2");
  al.Read<double>(
      "eps_clip_low", &a.eps_clip_low, [](const double& v) { return v >= 0 && v < 1; }, "in [0, 1)");
  al.Read<double>("eps_clip_high", &a.eps_clip_high, AtLeast(0.0), ">= 0");
  al.Read<double>("kl_coef", &a.kl_coef, AtLeast(0.0), ">= 0");
  al.Read<double>(
      "advantage_eps", &a.advantage_eps, [](const double& v) { return v > 0; }, "> 0");
  al.Read<std::string>(
      "loss_reduction", &a.loss_reduction,
      [](const std::string& s) { return s == "token_mean" || s == "sequence_mean"; },
      "token_mean or sequence_mean");
  al.Read<double>(
      "lr", &a.lr, [](const double& v) { return v > 0; }, "> 0");
  al.Read<double>("weight_decay", &a.weight_decay, AtLeast(0.0), ">= 0");
  al.Read<double>("max_grad_norm", &a.max_grad_norm, AtLeast(0.0), ">= 0 (0 disables clipping)");
  al.Read<int>("update_epochs", &a.update_epochs, AtLeast(1), ">= 1");
  al.Read<int>("mini_batches", &a.mini_batches, AtLeast(1), ">= 1");

  Reader ge = top.Sub("generator");
  ge.OnlyKeys({"num_engines", "tensor_parallel_size", "sampling_params"});
  JobConfig::Generator& g = c.generator;
  ge.Read<int>("num_engines", &g.num_engines, AtLeast(1), ">= 1");
  ge.Read<int>("tensor_parallel_size", &g.tensor_parallel_size, AtLeast(1), ">= 1");
  Reader sp = ge.Sub("sampling_params");
  sp.OnlyKeys({"temperature", "top_p", "max_generate_length"});
  sp.Read<double>("temperature", &g.temperature, AtLeast(0.0), ">= 0 (0 = greedy)");
  sp.Read<double>(
      "top_p", &g.top_p, [](const double& v) { return v > 0 && v <= 1; }, "in (0, 1]");
  sp.Read<int>("max_generate_length", &g.max_generate_length, AtLeast(1), ">= 1");

  Reader en = top.Sub("environment");
  en.OnlyKeys({"task", "min_digits", "max_digits", "target_reward"});
  JobConfig::Environment& e = c.environment;
  en.Read<std::string>("task", &e.task);
  en.Read<int>("min_digits", &e.options.min_digits, InRange(1, 12), "in [1, 12]");
  en.Read<int>("max_digits", &e.options.max_digits, InRange(1, 12), "in [1, 12]");
  en.Read<double>("target_reward", &e.target_reward, InRange(0.0, 1.0), "in [0, 1]");
  if (!err.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", err.message()));

  // Cross-field checks.
  auto fail = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", msg));
  };
  if (e.task.empty())
    return fail(absl::StrCat("environment.task: required; one of ", absl::StrJoin(TaskNames(), ", ")));
  if (auto s = FindTask(e.task); !s.ok())
    return fail(absl::StrCat("environment.task: ", s.status().message()));
  if (e.options.max_digits < e.options.min_digits) {
    return fail(absl::StrCat("environment.max_digits: ", e.options.max_digits, " is below min_digits ",
                             e.options.min_digits));
  }
  if (auto s = ValidateTensorParallel(t.model, t.tp_size); !s.ok()) {
    return fail(absl::StrCat("trainer.", s.message()));
  }
  if (auto s = ValidateTensorParallel(t.model, g.tensor_parallel_size, "generator.tensor_parallel_size");
      !s.ok()) {
    return fail(s.message());
  }
  if (t.train_batch_size * a.group_size < a.mini_batches) {
    return fail(absl::StrCat("trainer.algorithm.mini_batches: ", a.mini_batches, " exceeds the ",
                             t.train_batch_size * a.group_size, " samples of a step"));
  }
  return c;
}

absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobConfig(ss.str(), path);
}

absl::Status ApplyRunOverrides(JobConfig& config, int steps, const std::string& output_dir) {
  if (steps > 0) config.trainer.steps = steps;
  if (!output_dir.empty()) config.trainer.output_dir = output_dir;
  std::error_code ec;
  std::filesystem::create_directories(config.trainer.output_dir, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.output_dir ", config.trainer.output_dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace skyrl::rl
