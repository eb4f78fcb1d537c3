#include "rl/tasks/tokenizer.h"

#include "absl/strings/str_cat.h"

namespace skyrl::rl {
namespace {

constexpr absl::string_view kChars = "0123456789+-*=";
constexpr int kFirstChar = 4;

int IdOf(char c) {
  auto pos = kChars.find(c);
  return pos == absl::string_view::npos ? -1 : kFirstChar + static_cast<int>(pos);
}

}  // namespace

absl::StatusOr<std::vector<int>> Tokenizer::Encode(absl::string_view text) {
  std::vector<int> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int id = IdOf(text[i]);
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: character '", text.substr(i, 1),
                                                     "' at position ", i, " of \"", text,
                                                     "\" is not in the vocabulary (digits and + - * =)"));
    }
    out.push_back(id);
  }
  return out;
}

absl::StatusOr<std::vector<int>> Tokenizer::EncodePrompt(absl::string_view text) {
  auto body = Encode(text);
  if (!body.ok()) return body.status();
  std::vector<int> out{kBos};
  out.insert(out.end(), body->begin(), body->end());
  out.push_back(kSep);
  return out;
}

std::string Tokenizer::Decode(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    switch (id) {
      case kPad:
        out += "<pad>";
        break;
      case kBos:
        out += "<bos>";
        break;
      case kEos:
        out += "<eos>";
        break;
      case kSep:
        out += "<sep>";
        break;
      default:
        if (id >= kFirstChar && id < kVocab) {
          out += kChars[id - kFirstChar];
        } else {
          absl::StrAppend(&out, "<", id, "?>");
        }
    }
  }
  return out;
}

Tokenizer::Answer Tokenizer::DecodeResponse(const std::vector<int>& ids) {
  Answer a;
  for (int id : ids) {
    if (id == kEos) {
      a.terminated = true;
      break;
    }
    a.text += (id >= kFirstChar && id < kVocab) ? kChars[id - kFirstChar] : '?';
  }
  return a;
}

}  // namespace skyrl::rl
