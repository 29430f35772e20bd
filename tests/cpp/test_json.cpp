// The JSON reader/writer behind stats.json, checked against hand-written
// documents (what Python's json module reads and writes for the same data).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "base/json.hpp"

namespace {

using tpt::json::Value;

TEST(Json, ParsesEveryKind) {
  Value v = tpt::json::parse(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "x\"y\\n\u00e9\ud83d\ude00"}} )");
  ASSERT_TRUE(v.is_object());
  const auto &a = v.find("a")->items();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].as_number(), 1);
  EXPECT_EQ(a[1].as_number(), -2500);
  EXPECT_TRUE(a[2].as_bool());
  EXPECT_FALSE(a[3].as_bool());
  EXPECT_TRUE(a[4].is_null());
  EXPECT_EQ(v.find("b")->find("c")->as_string(), "x\"y\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, RejectsWhatIsNotJson) {
  for (const char *bad : {"", "[1,]", "{\"a\":1,}", "[1 2]", "NaN", "[Infinity]", "{'a':1}", "[01]", "[1.]",
                          "\"\\x\"", "\"unterminated", "[1] x", "\"\\ud800\"", "{\"a\" 1}", "tru", "\"a\tb\""}) {
    EXPECT_THROW(tpt::json::parse(bad), std::runtime_error) << bad;
  }
  std::string deep(1000, '[');
  EXPECT_THROW(tpt::json::parse(deep), std::runtime_error);
}

TEST(Json, WritesStatsLayoutAndNullForNonFinite) {
  Value list = Value::array();
  Value e = Value::object();
  e.set("loss", Value::number(0.1));
  e.set("nan", Value::number(std::numeric_limits<double>::quiet_NaN()));
  e.set("inf", Value::number(-std::numeric_limits<double>::infinity()));
  e.set("epoch_num", Value::number(3));
  e.set("name", Value::string("a\"b\n\x01"));
  list.push(e);
  list.push(Value::object());
  EXPECT_EQ(tpt::json::write(list),
            "[\n  {\"loss\": 0.1, \"nan\": null, \"inf\": null, \"epoch_num\": 3, \"name\": \"a\\\"b\\n\\u0001\"},\n  {}\n]\n");
  EXPECT_EQ(tpt::json::write(Value::array()), "[]\n");
}

TEST(Json, NumbersRoundTripExactlyInShortestForm) {
  for (double d : {0.1, 1.0 / 3.0, 3.141592653589793, 1e-300, 123456789012345678.0, -0.0, 2.5, 1e21}) {
    std::string text = tpt::json::write(Value::number(d), false);
    EXPECT_EQ(tpt::json::parse(text).as_number(), d) << text;
  }
  EXPECT_EQ(tpt::json::write(Value::number(0.1), false), "0.1");
  EXPECT_EQ(tpt::json::write(Value::number(42), false), "42");
}

TEST(Json, SetReplacesAndKeepsOrder) {
  Value o = Value::object();
  o.set("b", Value::number(1));
  o.set("a", Value::number(2));
  o.set("b", Value::number(3));
  ASSERT_EQ(o.members().size(), 2u);
  EXPECT_EQ(o.members()[0].first, "b");
  EXPECT_EQ(o.members()[0].second.as_number(), 3);
  EXPECT_THROW(o.items(), std::runtime_error);
}

}  // namespace
