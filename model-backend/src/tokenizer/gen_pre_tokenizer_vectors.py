#!/usr/bin/env python3
"""Generates testdata/pre_tokenizer_vectors.jsonl: the expected pre-tokenizer splits of
each family's regex, computed with the third-party `regex` module (which supports \\p{..}),
so that the hand-written matchers in pre_tokenizer.cc are checked against a real regex
engine. Needs `regex` only to regenerate; the output is checked in.

Usage: python3 gen_pre_tokenizer_vectors.py ../../../../shared/models/vocab/*.inp \\
         > testdata/pre_tokenizer_vectors.jsonl

Semantics follow the GGUF engines: a family is a sequence of regexes; each regex splits
every current piece into its matches and the gaps between them. Non-ASCII whitespace is
seen as \\v by the regexes (as the engines do), and `$` means the end of the piece.
"""
import json
import sys

import regex

CONTRACTIONS_CI = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
FAMILIES = {
    "gpt2": [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"],
    "llama3": [CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    "deepseek-llm": [r"[\r\n]", r"\s?\p{LC}+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+\Z",
                     r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"],
}
WHITESPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
                                       0x205F, 0x3000} | set(range(0x2000, 0x200B))

EXTRA = [
    "I'M here, YOU'RE there; they'LL see'S 'd",
    "1 12 123 1234 12345 1234567 ١٢٣ ½ Ⅻ",
    "a.\n\nb!!\r\n\r\n  c\t\td   \n",
    "안녕하세요 세계 ࠀ 你好，世界。！",
    "e\u0301 cafe\u0301 naïve ÀÉÎ ǅ ß ﬁ",
    "مرحبا بالعالم ١٢",
    "x\u3000y\u2003z\u00a0w  \u3000",
    "emoji 🦙🚀 ok😀! $100 #tag @me <html> {json: [1,2]}",
    "tabs\tand\u000bvertical\u000cfeeds",
    "    code():\n        return x  # comment\n",
]


def split(text, patterns):
    mapped = "".join("\x0b" if ord(c) > 0x7F and ord(c) in WHITESPACE else c for c in text)
    pieces = [(0, len(text))] if text else []
    for pattern in patterns:
        compiled = regex.compile(pattern)
        out = []
        for start, end in pieces:
            gap = start
            for match in compiled.finditer(mapped[start:end]):
                begin, stop = start + match.start(), start + match.end()
                if begin > gap:
                    out.append((gap, begin))
                out.append((begin, stop))
                gap = stop
            if end > gap:
                out.append((gap, end))
        pieces = out
    return [text[start:end] for start, end in pieces]


def main():
    texts = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as handle:
            content = handle.read()
        texts += content.split("\n__ggml_vocab_test__\n")[:-1]
    texts += EXTRA
    seen = set()
    for text in texts:
        if text in seen:
            continue
        seen.add(text)
        for family, patterns in FAMILIES.items():
            words = split(text, patterns)
            assert "".join(words) == text
            sys.stdout.write(json.dumps({"family": family, "text": text, "words": words},
                                        ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
