#include "sinew/trace.h"

#include <algorithm>
#include <random>

namespace sinew {
namespace {

constexpr char kHex[] = "0123456789abcdef";

template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& bytes) {
  std::string out;
  out.reserve(2 * N);
  for (uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

int LowerHexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Reads 2*N lowercase hex digits into `out`; false on any other character.
template <size_t N>
bool FromHex(std::string_view hex, std::array<uint8_t, N>* out) {
  if (hex.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = LowerHexDigit(hex[2 * i]);
    const int lo = LowerHexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::array<uint8_t, N> RandomNonZero() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::array<uint8_t, N> out{};
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t r = rng();
      for (size_t j = 0; j < 8 && i + j < N; ++j) out[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
  } while (AllZero(out));
  return out;
}

LogFields& Current() {
  thread_local LogFields fields;
  return fields;
}

}  // namespace

std::string TraceParent::TraceIdHex() const { return ToHex(trace_id); }
std::string TraceParent::SpanIdHex() const { return ToHex(span_id); }

std::optional<TraceParent> ParseTraceparent(std::string_view value) {
  // version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55 characters.
  constexpr size_t kLen = 55;
  if (value.size() < kLen) return std::nullopt;
  std::array<uint8_t, 1> version{};
  if (!FromHex(value.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  if (version[0] == 0x00 && value.size() != kLen) return std::nullopt;
  if (value.size() > kLen && value[kLen] != '-') return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  TraceParent tp;
  std::array<uint8_t, 1> flags{};
  if (!FromHex(value.substr(3, 32), &tp.trace_id) || !FromHex(value.substr(36, 16), &tp.span_id) ||
      !FromHex(value.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if (AllZero(tp.trace_id) || AllZero(tp.span_id)) return std::nullopt;
  tp.flags = flags[0];
  return tp;
}

std::string FormatTraceparent(const TraceParent& tp) {
  std::string out = "00-" + tp.TraceIdHex() + "-" + tp.SpanIdHex() + "-";
  out.push_back(kHex[tp.flags >> 4]);
  out.push_back(kHex[tp.flags & 0xf]);
  return out;
}

std::string NewTraceIdHex() { return ToHex(RandomNonZero<16>()); }
std::string NewSpanIdHex() { return ToHex(RandomNonZero<8>()); }

std::string TraceIdForSession(std::string_view session_id) {
  std::array<uint8_t, 16> id{};
  if (FromHex(session_id, &id) && !AllZero(id)) return std::string(session_id);
  // FNV-1a, twice with different offsets: 128 bits that stay the same in every process.
  uint64_t a = 0xcbf29ce484222325ULL;
  uint64_t b = 0x84222325cbf29ce4ULL;
  for (char c : session_id) {
    a = (a ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
    b = (b ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  }
  for (size_t i = 0; i < 8; ++i) {
    id[i] = static_cast<uint8_t>(a >> (8 * i));
    id[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  if (AllZero(id)) id[15] = 1;
  return ToHex(id);
}

const LogFields& CurrentLogFields() { return Current(); }

ScopedLogContext::ScopedLogContext(LogFields fields) : saved_(std::move(Current())) {
  Current() = std::move(fields);
}

ScopedLogContext::~ScopedLogContext() { Current() = std::move(saved_); }

void SetLogSeq(uint64_t seq) { Current().seq = seq; }

void ReplaceLogFields(LogFields fields) { Current() = std::move(fields); }

std::string OutgoingTraceparent() {
  const LogFields& f = Current();
  if (f.trace_id.size() != 32) return "";
  return "00-" + f.trace_id + "-" + NewSpanIdHex() + "-01";
}

LogFields FieldsForIncoming(std::string_view traceparent) {
  LogFields fields;
  if (auto tp = ParseTraceparent(traceparent)) {
    fields.trace_id = tp->TraceIdHex();
    fields.extra.emplace_back("parent_span_id", tp->SpanIdHex());
  } else {
    fields.trace_id = NewTraceIdHex();
  }
  fields.span_id = NewSpanIdHex();
  return fields;
}

}  // namespace sinew
