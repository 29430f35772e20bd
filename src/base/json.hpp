// A small JSON value with a strict parser and a writer: enough for stats.json
// and, later, checkpoint metadata. Numbers are doubles; object keys keep their
// order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tpt::json {

class Value {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Value() = default;
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value number(double d);
  static Value string(std::string s);
  static Value array();
  static Value object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  double as_number() const;
  bool as_bool() const;
  const std::string &as_string() const;
  const std::vector<Value> &items() const;
  std::vector<Value> &items();
  const std::vector<std::pair<std::string, Value>> &members() const;

  // Object access: find returns nullptr when absent; set replaces or appends.
  const Value *find(const std::string &key) const;
  void set(const std::string &key, Value v);
  void push(Value v);

 private:
  Type type_ = Type::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Strict RFC 8259 parsing; throws std::runtime_error with the byte offset.
Value parse(const std::string &text);

// Compact-ish output: arrays of objects one per line (stats.json is read by
// people too). Non-finite numbers are written as null.
std::string write(const Value &v, bool pretty = true);

}  // namespace tpt::json
