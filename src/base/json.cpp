#include "base/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tpt::json {

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::Bool;
  v.bool_ = b;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.type_ = Type::Number;
  v.number_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::String;
  v.string_ = std::move(s);
  return v;
}
Value Value::array() {
  Value v;
  v.type_ = Type::Array;
  return v;
}
Value Value::object() {
  Value v;
  v.type_ = Type::Object;
  return v;
}

namespace {
[[noreturn]] void type_error(const char *want) {
  throw std::runtime_error(std::string("json: value is not ") + want);
}
}  // namespace

double Value::as_number() const {
  if (type_ != Type::Number) type_error("a number");
  return number_;
}
bool Value::as_bool() const {
  if (type_ != Type::Bool) type_error("a boolean");
  return bool_;
}
const std::string &Value::as_string() const {
  if (type_ != Type::String) type_error("a string");
  return string_;
}
const std::vector<Value> &Value::items() const {
  if (type_ != Type::Array) type_error("an array");
  return items_;
}
std::vector<Value> &Value::items() {
  if (type_ != Type::Array) type_error("an array");
  return items_;
}
const std::vector<std::pair<std::string, Value>> &Value::members() const {
  if (type_ != Type::Object) type_error("an object");
  return members_;
}
const Value *Value::find(const std::string &key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto &m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}
void Value::set(const std::string &key, Value v) {
  if (type_ != Type::Object) type_error("an object");
  for (auto &m : members_) {
    if (m.first == key) {
      m.second = std::move(v);
      return;
    }
  }
  members_.emplace_back(key, std::move(v));
}
void Value::push(Value v) {
  if (type_ != Type::Array) type_error("an array");
  items_.push_back(std::move(v));
}

// ------------------------------------------------------------------ parser
namespace {

class Parser {
 public:
  explicit Parser(const std::string &t) : s_(t) {}

  Value document() {
    Value v = value(0);
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  const std::string &s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string &what) {
    throw std::runtime_error("json: " + what + " at byte " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  void literal(const char *word) {
    for (const char *p = word; *p; ++p, ++i_)
      if (i_ >= s_.size() || s_[i_] != *p) fail(std::string("bad literal, expected ") + word);
  }

  Value value(int depth) {
    if (depth > 512) fail("nesting too deep");
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    char c = s_[i_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value::string(str());
    if (c == 't') return literal("true"), Value::boolean(true);
    if (c == 'f') return literal("false"), Value::boolean(false);
    if (c == 'n') return literal("null"), Value::null();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value object(int depth) {
    ++i_;
    Value v = Value::object();
    if (eat('}')) return v;
    do {
      ws();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
      std::string key = str();
      expect(':');
      v.set(key, value(depth + 1));
    } while (eat(','));
    expect('}');
    return v;
  }

  Value array(int depth) {
    ++i_;
    Value v = Value::array();
    if (eat(']')) return v;
    do {
      v.push(value(depth + 1));
    } while (eat(','));
    expect(']');
    return v;
  }

  static void utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  std::string str() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail("lone surrogate");
            i_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("lone surrogate");
          }
          utf8(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  Value number() {
    size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d) fail("expected a digit");
    };
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else {
      digits();
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    std::string text = s_.substr(start, i_ - start);
    return Value::number(std::strtod(text.c_str(), nullptr));
  }
};

void write_string(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void write_number(std::string &out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
  } else {
    // the shortest of 15, 16, 17 significant digits that reads back exactly
    for (int digits = 15; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, d);
      if (std::strtod(buf, nullptr) == d) break;
    }
  }
  out += buf;
}

void write_value(std::string &out, const Value &v, bool pretty, int depth) {
  switch (v.type()) {
    case Value::Type::Null: out += "null"; break;
    case Value::Type::Bool: out += v.as_bool() ? "true" : "false"; break;
    case Value::Type::Number: write_number(out, v.as_number()); break;
    case Value::Type::String: write_string(out, v.as_string()); break;
    case Value::Type::Array: {
      out += '[';
      bool first = true;
      for (const Value &item : v.items()) {
        if (!first) out += ',';
        if (pretty && depth == 0) out += "\n  ";
        write_value(out, item, pretty, depth + 1);
        first = false;
      }
      if (pretty && depth == 0 && !v.items().empty()) out += '\n';
      out += ']';
      break;
    }
    case Value::Type::Object: {
      out += '{';
      bool first = true;
      for (const auto &m : v.members()) {
        if (!first) out += pretty ? ", " : ",";
        write_string(out, m.first);
        out += pretty ? ": " : ":";
        write_value(out, m.second, pretty, depth + 1);
        first = false;
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

Value parse(const std::string &text) { return Parser(text).document(); }

std::string write(const Value &v, bool pretty) {
  std::string out;
  write_value(out, v, pretty, 0);
  if (pretty) out += '\n';
  return out;
}

}  // namespace tpt::json
