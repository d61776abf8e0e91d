// Byte-level BPE encoding: pre-tokenize into words, map each word's bytes to printable
// code points, then repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) and emit each final symbol's token.
#include <queue>

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
  int rank = 0;
  std::string text;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

int TokenizerImpl::MergeRank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).push_back('\n');
  key.append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void TokenizerImpl::EncodeBpe(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view word : PreTokenize(pre_, text)) {
    EncodeBpeWord(unicode::ByteLevelEncode(word), out);
  }
}

void TokenizerImpl::EncodeBpeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    int32_t whole = Find(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<Symbol> symbols;
  for (const unicode::CodePoint& cp : unicode::DecodeUtf8(word)) {
    Symbol symbol;
    symbol.offset = cp.offset;
    symbol.length = cp.length;
    symbol.prev = static_cast<int>(symbols.size()) - 1;
    symbol.next = static_cast<int>(symbols.size()) + 1;
    symbols.push_back(symbol);
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto text_of = [&](const Symbol& symbol) { return word.substr(symbol.offset, symbol.length); };
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    int rank = MergeRank(text_of(symbols[left]), text_of(symbols[right]));
    if (rank < 0) return;
    Bigram bigram{left, right, rank, std::string(text_of(symbols[left]))};
    bigram.text.append(text_of(symbols[right]));
    queue.push(std::move(bigram));
  };
  for (size_t index = 1; index < symbols.size(); ++index) {
    try_add(static_cast<int>(index) - 1, static_cast<int>(index));
  }
  while (!queue.empty()) {
    Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.text.size() ||
        word.substr(left.offset, left.length + right.length) != bigram.text) {
      continue;  // stale
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }
  for (int index = 0; index >= 0; index = symbols[index].next) {
    std::string_view piece = text_of(symbols[index]);
    int32_t id = Find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (a vocabulary without every byte): fall back per code point.
    for (const unicode::CodePoint& cp : unicode::DecodeUtf8(piece)) {
      int32_t part = Find(piece.substr(cp.offset, cp.length));
      if (part >= 0) {
        out.push_back(part);
      } else if (vocab_.unk_id >= 0) {
        out.push_back(vocab_.unk_id);
      }
    }
  }
}

}  // namespace sinew::model
