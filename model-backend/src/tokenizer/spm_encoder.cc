// SentencePiece-style encoding: start from UTF-8 characters, repeatedly merge the
// adjacent pair whose concatenation is the highest-scoring token (ties: leftmost), then
// emit each symbol as its token, its merge history, or byte-fallback tokens.
#include <cstdio>
#include <queue>
#include <unordered_map>

#include "sinew/model/unicode.h"
#include "tokenizer_impl.h"

namespace sinew::model {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t offset = 0;
  size_t length = 0;  // 0: merged into its left neighbour
};

struct Bigram {
  int left = 0;
  int right = 0;
  float score = 0;
  size_t length = 0;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

int32_t TokenizerImpl::ByteToken(uint8_t byte) const {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", byte);
  int32_t id = Find(name);
  if (id >= 0) return id;
  id = Find(std::string(1, static_cast<char>(byte)));
  return id >= 0 ? id : vocab_.unk_id;
}

void TokenizerImpl::EncodeSpm(std::string_view raw, std::vector<int32_t>& out) const {
  const std::string text = EscapeSpaces(raw);
  std::vector<Symbol> symbols;
  for (const unicode::CodePoint& cp : unicode::DecodeUtf8(text)) {
    Symbol symbol;
    symbol.offset = cp.offset;
    symbol.length = cp.length;
    symbol.prev = static_cast<int>(symbols.size()) - 1;
    symbol.next = static_cast<int>(symbols.size()) + 1;
    symbols.push_back(symbol);
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string joined =
        text.substr(symbols[left].offset, symbols[left].length + symbols[right].length);
    int32_t id = Find(joined);
    if (id < 0) return;
    queue.push({left, right, ScoreOf(id), joined.size()});
    rev_merge[joined] = {left, right};
  };
  for (size_t index = 1; index < symbols.size(); ++index) {
    try_add(static_cast<int>(index) - 1, static_cast<int>(index));
  }
  while (!queue.empty()) {
    Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;  // stale: one side was merged since
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  // Emit: a whole token, else the two halves it was merged from, else bytes.
  std::vector<std::pair<size_t, size_t>> stack;  // (offset, length)
  for (int index = 0; index >= 0; index = symbols[index].next) {
    stack.push_back({symbols[index].offset, symbols[index].length});
    while (!stack.empty()) {
      auto [offset, length] = stack.back();
      stack.pop_back();
      std::string piece = text.substr(offset, length);
      int32_t id = Find(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      auto merged = rev_merge.find(piece);
      if (merged != rev_merge.end()) {
        const Symbol& first = symbols[merged->second.first];
        const Symbol& second = symbols[merged->second.second];
        size_t first_length = second.offset - first.offset;
        stack.push_back({second.offset, length - first_length});  // popped after the first
        stack.push_back({offset, first_length});
        continue;
      }
      for (char byte : piece) {
        int32_t byte_id = ByteToken(static_cast<uint8_t>(byte));
        if (byte_id >= 0) out.push_back(byte_id);
      }
    }
  }
}

}  // namespace sinew::model
