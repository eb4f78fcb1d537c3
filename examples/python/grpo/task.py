"""The copy task: the policy sees "<bos>407<sep>" and must answer "407<eos>". Token ids are the
C++ demo's (rl/tasks/tokenizer.h): PAD 0, BOS 1, EOS 2, SEP 3, '0'..'9' 4..13."""

import random

PAD, BOS, EOS, SEP = 0, 1, 2, 3
VOCAB = 18


def make_examples(rng, n, digits=3):
    """n prompts of `digits` random digits; the target is the prompt itself."""
    out = []
    for _ in range(n):
        s = "".join(rng.choice("0123456789") for _ in range(digits))
        out.append((s, s))
    return out


def encode_prompt(text):
    return [BOS] + [4 + int(ch) for ch in text] + [SEP]


def decode_response(ids):
    """(the characters before the first EOS, whether an EOS came); other specials read '?'."""
    chars = []
    for i in ids:
        if i == EOS:
            return "".join(chars), True
        chars.append(str(i - 4) if 4 <= i <= 13 else "?")
    return "".join(chars), False


def reward(target, answer, terminated):
    """1.0 for the exact answer followed by EOS; else the share of positions that agree, over
    the longer of the two, halved when the response never ended."""
    if terminated and answer == target:
        return 1.0
    longer = max(len(answer), len(target))
    if longer == 0:
        return 0.0
    same = sum(a == b for a, b in zip(answer, target)) / longer
    return same if terminated else same / 2


def new_rng(seed):
    return random.Random(seed)
