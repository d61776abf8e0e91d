#include "sinew/model/unicode.h"

#include <algorithm>
#include <array>
#include <boost/locale/conversion.hpp>
#include <boost/locale/generator.hpp>
#include <locale>

namespace sinew::model::unicode {
namespace {

struct Run {
  uint32_t first;
  uint8_t flags;
};

constexpr Run kRuns[] = {
#include "unicode_table.inc"
};

constexpr char32_t kReplacement = 0xFFFD;

// Table of the GPT-2 byte-level mapping, built once.
struct ByteMap {
  std::array<char32_t, 256> to_printable{};
  ByteMap() {
    int next = 0;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
                       (byte >= 0xAE && byte <= 0xFF);
      to_printable[byte] =
          printable ? static_cast<char32_t>(byte) : static_cast<char32_t>(256 + next++);
    }
  }
};

const ByteMap& GetByteMap() {
  static const ByteMap map;
  return map;
}

}  // namespace

CodePointFlags FlagsOf(char32_t cp) {
  CodePointFlags result;
  if (cp > 0x10FFFF) return result;
  auto it = std::upper_bound(std::begin(kRuns), std::end(kRuns), static_cast<uint32_t>(cp),
                             [](uint32_t value, const Run& run) { return value < run.first; });
  const Run& run = *(it - 1);
  result.group = static_cast<CategoryGroup>(run.flags & 0x07);
  result.cased_letter = (run.flags & 0x08) != 0;
  result.whitespace = (run.flags & 0x10) != 0;
  return result;
}

std::vector<CodePoint> DecodeUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    auto lead = static_cast<uint8_t>(text[pos]);
    uint32_t length = 0;
    char32_t value = 0;
    char32_t min_value = 0;
    if (lead < 0x80) {
      length = 1;
      value = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      value = lead & 0x1F;
      min_value = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      value = lead & 0x0F;
      min_value = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      value = lead & 0x07;
      min_value = 0x10000;
    }
    bool valid = length > 0 && pos + length <= text.size();
    for (uint32_t index = 1; valid && index < length; ++index) {
      auto cont = static_cast<uint8_t>(text[pos + index]);
      if ((cont & 0xC0) != 0x80) {
        valid = false;
      } else {
        value = (value << 6) | (cont & 0x3F);
      }
    }
    if (valid && (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))) {
      valid = false;
    }
    if (!valid) {
      out.push_back({kReplacement, static_cast<uint32_t>(pos), 1});
      pos += 1;
      continue;
    }
    out.push_back({value, static_cast<uint32_t>(pos), length});
    pos += length;
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  size_t size = bytes.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    auto byte = static_cast<uint8_t>(bytes[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    size_t need = 0;
    if ((byte & 0xE0) == 0xC0) {
      need = 2;
    } else if ((byte & 0xF0) == 0xE0) {
      need = 3;
    } else if ((byte & 0xF8) == 0xF0) {
      need = 4;
    }
    if (need > back) return size - back;  // incomplete sequence at the end
    return size;
  }
  return size;
}

char32_t ByteToPrintable(uint8_t byte) { return GetByteMap().to_printable[byte]; }

int PrintableToByte(char32_t cp) {
  if (cp < 0x100) {
    bool printable =
        (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF);
    return printable ? static_cast<int>(cp) : -1;
  }
  const auto& table = GetByteMap().to_printable;
  for (int byte = 0; byte < 256; ++byte) {
    if (table[byte] == cp) return byte;
  }
  return -1;
}

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char byte : bytes) AppendUtf8(ByteToPrintable(static_cast<uint8_t>(byte)), out);
  return out;
}

namespace {

// A locale of Boost.Locale's ICU backend; normalization does not depend on the language.
const std::locale& NormalizationLocale() {
  static const std::locale locale = [] {
    boost::locale::generator generator;
    return generator("en_US.UTF-8");
  }();
  return locale;
}

void AppendNormalized(std::string_view run, std::string& out) {
  if (run.empty()) return;
  if (std::all_of(run.begin(), run.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    out.append(run);
    return;
  }
  out += boost::locale::normalize(run.data(), run.data() + run.size(), boost::locale::norm_nfc,
                                  NormalizationLocale());
}

}  // namespace

std::string NormalizeNfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0;
  for (const CodePoint& cp : DecodeUtf8(text)) {
    const bool invalid = cp.value == kReplacement && cp.length == 1 &&
                         static_cast<unsigned char>(text[cp.offset]) >= 0x80;
    if (!invalid) continue;
    AppendNormalized(text.substr(run_start, cp.offset - run_start), out);
    out += text[cp.offset];
    run_start = cp.offset + 1;
  }
  AppendNormalized(text.substr(run_start), out);
  return out;
}

}  // namespace sinew::model::unicode
