// A character tokenizer for the toy tasks: digits, a few operators and the special tokens.
// Ids are fixed (they are part of a checkpoint's meaning): PAD 0, BOS 1, EOS 2, SEP 3,
// '0'..'9' 4..13, '+' 14, '-' 15, '*' 16, '=' 17. Stateless; safe for concurrent use.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::rl {

class Tokenizer {
 public:
  static constexpr int kPad = 0;
  static constexpr int kBos = 1;
  static constexpr int kEos = 2;
  static constexpr int kSep = 3;
  static constexpr int kVocab = 18;

  // Characters only (no specials). InvalidArgument names the character and its position.
  static absl::StatusOr<std::vector<int>> Encode(absl::string_view text);
  // BOS text SEP: what the policy sees before it answers.
  static absl::StatusOr<std::vector<int>> EncodePrompt(absl::string_view text);
  // Readable form; specials print as <pad> <bos> <eos> <sep>, unknown ids as <id?>.
  static std::string Decode(const std::vector<int>& ids);

  // The answer in a sampled response: the characters before the first EOS (specials other
  // than EOS make the answer wrong: they decode as '?'). `terminated` says whether an EOS
  // was seen.
  struct Answer {
    std::string text;
    bool terminated = false;
  };
  static Answer DecodeResponse(const std::vector<int>& ids);
};

}  // namespace skyrl::rl
