#include "rl/algo/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "rl/policy/torch_status.h"

namespace skyrl::rl {
namespace {

// Archive keys cannot hold '.', which every parameter name has.
std::string Key(const std::string& name) { return absl::StrReplaceAll(name, {{".", "__"}}); }

std::vector<std::pair<std::string, int64_t>> Facts(const Policy& p) {
  const PolicyConfig& c = p.config();
  return {{"tp_size", p.comm()->WorldSize()},
          {"rank", p.comm()->Rank()},
          {"vocab", c.vocab},
          {"layers", c.layers},
          {"d_model", c.d_model},
          {"heads", c.heads},
          {"max_len", c.max_len},
          {"mlp_hidden", c.MlpHidden()}};
}

}  // namespace

std::string ShardCheckpointPath(const std::string& dir, int rank, int tp) {
  return absl::StrCat(dir, "/rank-", rank, "-of-", tp, ".pt");
}

absl::Status SaveShardCheckpoint(const std::string& path, const Policy& policy,
                                 torch::optim::Optimizer* optimizer, int64_t step) {
  const std::string tmp = path + ".tmp";
  absl::Status s = RunTorch(absl::StrCat("checkpoint ", path), [&]() -> absl::Status {
    torch::serialize::OutputArchive archive;
    for (const auto& [name, value] : Facts(policy)) archive.write("meta__" + name, c10::IValue(value));
    archive.write("meta__step", c10::IValue(step));
    torch::serialize::OutputArchive params;
    for (const auto& [name, t] : policy.parameters()) params.write(Key(name), t.detach());
    archive.write("params", params);
    if (optimizer != nullptr) {
      torch::serialize::OutputArchive opt;
      optimizer->save(opt);
      archive.write("optimizer", opt);
    }
    archive.save_to(tmp);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("checkpoint ", path, ": rename from ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LoadShardCheckpoint(const std::string& path, Policy& policy,
                                            torch::optim::Optimizer* optimizer) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, ": no such file"));
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": unreadable: ", FirstLine(e.what())));
  }
  return RunTorch(absl::StrCat("checkpoint ", path), [&]() -> absl::StatusOr<int64_t> {
    for (const auto& [name, want] : Facts(policy)) {
      c10::IValue v;
      if (!archive.try_read("meta__" + name, v) || !v.isInt()) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": field ", name, " missing"));
      }
      if (v.toInt() != want) {
        return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, ": field ", name, " is ",
                                                          v.toInt(), " in the file but ", want, " here"));
      }
    }
    c10::IValue step;
    if (!archive.try_read("meta__step", step) || !step.isInt()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": field step missing"));
    }
    torch::serialize::InputArchive params;
    if (!archive.try_read("params", params))
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": no params"));
    NamedTensors shard;
    for (const auto& [name, t] : policy.parameters()) {
      torch::Tensor v;
      if (!params.try_read(Key(name), v)) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": parameter ", name, " missing"));
      }
      shard.emplace_back(name, v);
    }
    if (auto s = policy.LoadShard(shard); !s.ok()) return s;
    if (optimizer != nullptr) {
      torch::serialize::InputArchive opt;
      if (!archive.try_read("optimizer", opt)) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": no optimizer state"));
      }
      optimizer->load(opt);
    }
    return step.toInt();
  });
}

absl::StatusOr<std::string> EncodeTensors(const NamedTensors& tensors) {
  return RunTorch("EncodeTensors", [&]() -> absl::StatusOr<std::string> {
    torch::serialize::OutputArchive archive;
    c10::List<std::string> names;
    for (size_t i = 0; i < tensors.size(); ++i) {
      names.push_back(tensors[i].first);
      // Index keys: names may hold characters archive keys cannot.
      archive.write(absl::StrCat("t", i), tensors[i].second.detach().contiguous());
    }
    archive.write("names", c10::IValue(names));
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  });
}

absl::StatusOr<NamedTensors> DecodeTensors(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  try {
    std::istringstream in(bytes);
    archive.load_from(in);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("DecodeTensors: not a tensor archive: ", FirstLine(e.what())));
  }
  return RunTorch("DecodeTensors", [&]() -> absl::StatusOr<NamedTensors> {
    c10::IValue names;
    if (!archive.try_read("names", names) || !names.isList()) {
      return absl::DataLossError("DecodeTensors: no names in the archive");
    }
    NamedTensors out;
    const auto list = names.toListRef();
    for (size_t i = 0; i < list.size(); ++i) {
      torch::Tensor t;
      if (!list[i].isString() || !archive.try_read(absl::StrCat("t", i), t)) {
        return absl::DataLossError(absl::StrCat("DecodeTensors: tensor ", i, " missing"));
      }
      out.emplace_back(list[i].toStringRef(), t);
    }
    return out;
  });
}

}  // namespace skyrl::rl
