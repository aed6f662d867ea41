"""A deterministic stand-in for vLLM's `benchmarks/sonnet.txt`, served by the loopback mirror.

`sonnet_bytes()` returns about 22 KB of pseudo-Shakespearean verse: 36 sonnets of 14 lines (504
lines), no blank lines and no trailing newline, like the upstream file. The text is built from fixed
word lists with a small self-contained PRNG (SplitMix64), so the bytes are identical on every Python
version and platform; `SONNET_SHA256` is their hash (a test checks it). A simulated profile points
`[dataset] url` at `{sim_hub}/datasets/sonnet.txt` and `sha256` at this constant.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

SEED = 0x5EC_DEC_1609  # 1609: the year the sonnets were printed
SONNETS = 36
LINES_PER_SONNET = 14

# sha256 of sonnet_bytes(); a test recomputes it.
SONNET_SHA256 = "013ce4b005864c331a7f221fbf6f0b6b204aabb5001d432a35af757fe1b6bf7a"
SONNET_SIZE = 22821  # bytes

_MASK = (1 << 64) - 1


class _SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n

    def choice(self, seq: tuple[str, ...]) -> str:
        return seq[self.below(len(seq))]


_WORDS: dict[str, tuple[str, ...]] = {
    "adj": ("fairest", "sweet", "golden", "sable", "tender", "proud", "summer's", "wasted", "gentle",
            "barren", "bright", "lovely", "tattered", "false", "true", "eternal", "swift", "weary",
            "silent", "precious", "crooked", "fading", "hungry", "heavy", "lusty", "gracious"),
    "noun": ("beauty", "rose", "time", "love", "youth", "heart", "eye", "glass", "spring", "brow",
             "field", "face", "grave", "verse", "night", "day", "sun", "moon", "star", "tongue",
             "breath", "winter", "memory", "treasure", "shadow", "season", "canker", "praise",
             "muse", "pen", "crown", "sorrow", "light", "world", "heir", "bud", "fire", "soul"),
    "nouns": ("beauties", "roses", "hours", "tears", "eyes", "days", "nights", "fields", "lines",
              "buds", "flowers", "stars", "thoughts", "graces", "sorrows", "minutes", "kings"),
    "verb": ("doth hold", "doth bear", "shall see", "must feed", "dost keep", "would spend",
             "shall fade", "doth mock", "can stay", "dost lend", "shall live", "doth show",
             "may find", "dost steal", "shall grow", "doth burn", "can tell", "must die"),
    "verbi": ("decease", "decay", "remain", "survive", "abide", "return", "renew", "increase",
              "depart", "endure", "complain", "repose", "awake", "be gone"),
    "adv": ("Then", "Thus", "Yet", "So", "Now", "Since", "When", "If", "And", "But", "Nor", "Or"),
    "pron": ("thou", "I", "he", "she", "we", "they"),
    "poss": ("thy", "my", "his", "her", "their", "our"),
    "prep": ("within", "upon", "against", "beneath", "beyond", "from", "unto", "through", "with"),
    "name": ("Time", "Love", "Nature", "Death", "Fortune", "Beauty", "Summer", "Winter"),
}

_TEMPLATES: tuple[str, ...] = (
    "{adv} {poss} {adj} {noun} {verb} {prep} {poss} {noun}",
    "{adv} {pron} {verb} the {adj} {noun} of {name}",
    "{name} {verb} {poss} {nouns} {prep} the {noun}",
    "And {poss} {adj} {nouns} {verb} {poss} {noun}",
    "Which {prep} {poss} {noun} {verb} {poss} {noun}",
    "That {poss} {adj} {noun} might never {verbi}",
    "{adv} {poss} {noun}'s {adj} {noun} shall {verbi}",
    "{adv} in the {adj} {noun} of {poss} {adj} {nouns}",
    "O {name}, how {poss} {adj} {nouns} {verbi}",
    "Nor {verb} the {noun} where {poss} {nouns} {verbi}",
    "{adv} {pron} {verb} {poss} {noun} {prep} {noun}",
    "Look in {poss} {noun} and tell the {noun} {pron} {verb}",
    "How {adj} the {noun} when {poss} {nouns} {verbi}",
    "{adv} every {noun} {verb} the {noun} of {name}",
)

_ENDINGS = (",", ",", ",", ";", ",", ",", ",", ":", ",", ",", ",", ".", ",", ".")


def _line(rng: _SplitMix64) -> str:
    template = rng.choice(_TEMPLATES)
    out: list[str] = []
    i = 0
    while i < len(template):
        if template[i] == "{":
            j = template.index("}", i)
            out.append(rng.choice(_WORDS[template[i + 1:j]]))
            i = j + 1
        else:
            out.append(template[i])
            i += 1
    text = "".join(out)
    return text[0].upper() + text[1:]


@lru_cache(maxsize=1)
def sonnet_text() -> str:
    rng = _SplitMix64(SEED)
    lines: list[str] = []
    for _ in range(SONNETS):
        for n in range(LINES_PER_SONNET):
            line = _line(rng) + _ENDINGS[n]
            if n == 0:
                first, _, rest = line.partition(" ")
                line = first.upper() + " " + rest
            if n >= LINES_PER_SONNET - 2:
                line = "  " + line  # the closing couplet is indented, as in the printed sonnets
            lines.append(line)
    return "\n".join(lines)


def sonnet_bytes() -> bytes:
    return sonnet_text().encode("utf-8")


def sonnet_sha256() -> str:
    return hashlib.sha256(sonnet_bytes()).hexdigest()


__all__ = ["SONNET_SHA256", "SONNET_SIZE", "sonnet_bytes", "sonnet_sha256", "sonnet_text"]
