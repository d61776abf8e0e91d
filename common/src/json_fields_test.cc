#include "sinew/json_fields.h"

#include <gtest/gtest.h>

namespace sinew::json_fields {
namespace {

namespace json = boost::json;

json::object Parse(std::string_view text) { return json::parse(text).as_object(); }

// The message of a failed read, or "ok".
std::string Message(const Status& status) {
  if (status.ok()) return "ok";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  return status.message();
}

TEST(JsonFieldsTest, PathsAndNumbersAsPeopleWriteThem) {
  EXPECT_EQ(FieldPath("", "model"), "model");
  EXPECT_EQ(FieldPath("config.models.m", "kind"), "config.models.m.kind");
  EXPECT_EQ(FieldPath(IndexPath("tools", 2) + ".function", "name"), "tools[2].function.name");
  EXPECT_EQ(FormatNumber(2), "2");
  EXPECT_EQ(FormatNumber(0), "0");  // not "0E0"
  EXPECT_EQ(FormatNumber(0.5), "0.5");
  EXPECT_EQ(FormatNumber(-2), "-2");
  EXPECT_EQ(FormatNumber(0.01), "0.01");
  EXPECT_EQ(FormatNumber(1e20), "1e+20");
}

TEST(JsonFieldsTest, ParseObjectNamesWhatItParsed) {
  EXPECT_TRUE(ParseObject(R"({"a":1})", "body").ok());
  EXPECT_EQ(Message(ParseObject("{", "body").status()).rfind("body is not valid JSON: ", 0), 0u);
  EXPECT_EQ(Message(ParseObject("[1]", "config").status()), "config must be a JSON object");
}

TEST(JsonFieldsTest, StringAndBoolPresentAbsentNullWrongType) {
  const json::object o = Parse(R"({"s":"x","b":true,"n":null,"i":5})");
  std::string s = "default";
  EXPECT_TRUE(ReadString(o, "s", "body", &s).ok());
  EXPECT_EQ(s, "x");
  s = "default";
  EXPECT_TRUE(ReadString(o, "absent", "body", &s).ok());
  EXPECT_TRUE(ReadString(o, "n", "body", &s).ok());  // null is "not given"
  EXPECT_EQ(s, "default");
  EXPECT_EQ(Message(ReadString(o, "i", "body", &s)), "body.i must be a string");
  EXPECT_EQ(s, "default");  // unchanged on error
  bool b = false;
  EXPECT_TRUE(ReadBool(o, "b", "", &b).ok());
  EXPECT_TRUE(b);
  EXPECT_EQ(Message(ReadBool(o, "s", "", &b)), "s must be a boolean");
  EXPECT_EQ(Message(ReadBool(o, "i", "x", &b)), "x.i must be a boolean");
}

TEST(JsonFieldsTest, RequireAndHas) {
  const json::object o = Parse(R"({"a":1,"n":null})");
  EXPECT_TRUE(Has(o, "a"));
  EXPECT_FALSE(Has(o, "n"));
  EXPECT_FALSE(Has(o, "z"));
  EXPECT_TRUE(Require(o, "a", "body").ok());
  EXPECT_EQ(Message(Require(o, "n", "body")), "body.n is required");
  EXPECT_EQ(Message(Require(o, "z", "")), "z is required");
}

TEST(JsonFieldsTest, UintRefusesNegativesFractionsAndValuesPastMax) {
  const json::object o = Parse(
      R"({"zero":0,"big":18446744073709551615,"neg":-1,"frac":1.5,"whole":2.0,"str":"5","max":4294967295,
          "over":4294967296})");
  uint64_t u = 7;
  EXPECT_TRUE(ReadUint(o, "zero", "c", 10, &u).ok());
  EXPECT_EQ(u, 0u);
  EXPECT_TRUE(ReadUint(o, "big", "c", UINT64_MAX, &u).ok());
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_EQ(Message(ReadUint(o, "big", "c", UINT64_MAX / 2, &u)),
            "c.big must be at most 9223372036854775807");
  EXPECT_EQ(Message(ReadUint(o, "neg", "c", 10, &u)), "c.neg must be a non-negative integer");
  EXPECT_EQ(Message(ReadUint(o, "frac", "c", 10, &u)), "c.frac must be a non-negative integer");
  EXPECT_EQ(Message(ReadUint(o, "whole", "c", 10, &u)), "c.whole must be a non-negative integer");
  EXPECT_EQ(Message(ReadUint(o, "str", "c", 10, &u)), "c.str must be a non-negative integer");
  EXPECT_EQ(u, UINT64_MAX);
  uint32_t u32 = 9;
  EXPECT_TRUE(ReadUint32(o, "absent", "c", &u32).ok());
  EXPECT_EQ(u32, 9u);
  EXPECT_TRUE(ReadUint32(o, "max", "c", &u32).ok());
  EXPECT_EQ(u32, UINT32_MAX);
  EXPECT_EQ(Message(ReadUint32(o, "over", "c", &u32)), "c.over must be at most 4294967295");
}

TEST(JsonFieldsTest, IntRangeEdgesAndDoublesPastTheRange) {
  const json::object o = Parse(R"({"min":-9223372036854775808,"max":9223372036854775807,
      "two63":9223372036854775808,"e20":1e20,"neg_e20":-1e20,"e3":1e3,"frac":2.5,"s":"1","b":true})");
  int64_t i = 0;
  EXPECT_TRUE(ReadInt(o, "min", "", INT64_MIN, INT64_MAX, &i).ok());
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_TRUE(ReadInt(o, "max", "", INT64_MIN, INT64_MAX, &i).ok());
  EXPECT_EQ(i, INT64_MAX);
  const std::string full = " must be between -9223372036854775808 and 9223372036854775807";
  EXPECT_EQ(Message(ReadInt(o, "two63", "", INT64_MIN, INT64_MAX, &i)), "two63" + full);
  EXPECT_EQ(Message(ReadInt(o, "e20", "", INT64_MIN, INT64_MAX, &i)), "e20" + full);
  EXPECT_EQ(Message(ReadInt(o, "neg_e20", "", INT64_MIN, INT64_MAX, &i)), "neg_e20" + full);
  EXPECT_EQ(i, INT64_MAX);
  EXPECT_TRUE(ReadInt(o, "e3", "", 0, 1000, &i).ok());  // a whole number written with an exponent
  EXPECT_EQ(i, 1000);
  EXPECT_EQ(Message(ReadInt(o, "e3", "", 0, 999, &i)), "e3 must be between 0 and 999");
  EXPECT_EQ(Message(ReadInt(o, "max", "in", 1, 5, &i)), "in.max must be between 1 and 5");
  EXPECT_EQ(Message(ReadInt(o, "min", "in", 1, 5, &i)), "in.min must be between 1 and 5");
  EXPECT_EQ(Message(ReadInt(o, "frac", "in", 1, 5, &i)), "in.frac must be an integer");
  EXPECT_EQ(Message(ReadInt(o, "s", "in", 1, 5, &i)), "in.s must be an integer");
  EXPECT_EQ(Message(ReadInt(o, "b", "in", 1, 5, &i)), "in.b must be an integer");
  EXPECT_EQ(i, 1000);
}

TEST(JsonFieldsTest, NumberRangeIsPrintedAsPeopleWriteIt) {
  const json::object o =
      Parse(R"({"t":0.7,"zero":0,"hot":3,"big":18446744073709551615,"s":"warm"})");
  double d = -1;
  EXPECT_TRUE(ReadNumber(o, "t", "", 0.0, 2.0, &d).ok());
  EXPECT_DOUBLE_EQ(d, 0.7);
  EXPECT_TRUE(ReadNumber(o, "zero", "", 0.0, 2.0, &d).ok());
  EXPECT_EQ(d, 0.0);
  EXPECT_EQ(Message(ReadNumber(o, "hot", "", 0.0, 2.0, &d)), "hot must be between 0 and 2");
  EXPECT_EQ(Message(ReadNumber(o, "big", "", -2.0, 0.5, &d)), "big must be between -2 and 0.5");
  EXPECT_EQ(Message(ReadNumber(o, "s", "p", 0.01, 10.0, &d)), "p.s must be a number");
  EXPECT_EQ(d, 0.0);
}

TEST(JsonFieldsTest, ObjectsAndArraysPointIntoTheirParent) {
  const json::object o = Parse(R"({"o":{"k":1},"a":[1,2],"n":null,"s":"x"})");
  const json::object* inner = nullptr;
  const json::array* list = nullptr;
  EXPECT_TRUE(ReadObject(o, "o", "config", &inner).ok());
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner, &o.at("o").as_object());
  EXPECT_TRUE(ReadArray(o, "a", "config", &list).ok());
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->size(), 2u);
  EXPECT_TRUE(ReadObject(o, "n", "config", &inner).ok());
  EXPECT_EQ(inner, nullptr);
  EXPECT_TRUE(ReadArray(o, "absent", "config", &list).ok());
  EXPECT_EQ(list, nullptr);
  EXPECT_EQ(Message(ReadObject(o, "a", "config", &inner)), "config.a must be an object");
  EXPECT_EQ(Message(ReadArray(o, "s", "config", &list)), "config.s must be an array");
}

TEST(JsonFieldsTest, NestedPathsNameTheWholeWay) {
  const json::object o = Parse(R"({"tools":[{"function":{"name":"f"}},{"function":{"name":7}}]})");
  const json::array* tools = nullptr;
  ASSERT_TRUE(ReadArray(o, "tools", "", &tools).ok());
  std::string name;
  for (size_t index = 0; index < tools->size(); ++index) {
    const std::string where = IndexPath("tools", index);
    const json::object* fn = nullptr;
    ASSERT_TRUE(ReadObject((*tools)[index].as_object(), "function", where, &fn).ok());
    Status read = ReadString(*fn, "name", FieldPath(where, "function"), &name);
    EXPECT_EQ(Message(read), index == 0 ? "ok" : "tools[1].function.name must be a string");
  }
  EXPECT_EQ(name, "f");
}

TEST(JsonFieldsTest, UnknownKeysAreNamedWithWhatIsAllowed) {
  const json::object o = Parse(R"({"at_seq":1,"model":"m"})");
  EXPECT_TRUE(RejectUnknownKeys(o, "at_seq,model,message", "body").ok());
  EXPECT_TRUE(RejectUnknownKeys(json::object(), "", "body").ok());
  EXPECT_EQ(Message(RejectUnknownKeys(o, "at_seq,message", "body")),
            "body has an unknown field 'model'; allowed: at_seq,message");
  EXPECT_EQ(Message(RejectUnknownKeys(o, "at_seq", "")), "unknown field 'model'; allowed: at_seq");
  // A prefix or a part of a name is not the name.
  EXPECT_FALSE(RejectUnknownKeys(Parse(R"({"mod":1})"), "model", "body").ok());
  EXPECT_FALSE(RejectUnknownKeys(Parse(R"({"at":1})"), "at_seq", "body").ok());
  EXPECT_FALSE(RejectUnknownKeys(Parse(R"({"":1})"), "a,b", "body").ok());
}

TEST(JsonFieldsTest, LenientReadersFallBackToZeroAndEmpty) {
  const json::object o =
      Parse(R"({"s":"x","u":12,"neg":-3,"str":"42","bad":"4x","minus":"-5","d":2.5,
      "e20":1e20,"big":18446744073709551615,"t":true,"o":{},"a":[]})");
  EXPECT_EQ(StringField(o, "s"), "x");
  EXPECT_EQ(StringField(o, "u"), "");
  EXPECT_EQ(StringField(o, "absent"), "");
  EXPECT_EQ(UintField(o, "u"), 12u);
  EXPECT_EQ(UintField(o, "neg"), 0u);
  EXPECT_EQ(UintField(o, "str"), 42u);  // proto3 JSON writes 64-bit integers as strings
  EXPECT_EQ(UintField(o, "bad"), 0u);
  EXPECT_EQ(UintField(o, "minus"), 0u);
  EXPECT_EQ(UintField(o, "d"), 0u);
  EXPECT_EQ(UintField(o, "big"), UINT64_MAX);
  EXPECT_EQ(IntField(o, "neg"), -3);
  EXPECT_EQ(IntField(o, "d"), 2);
  EXPECT_EQ(IntField(o, "e20"), 0);  // past int64: no undefined conversion
  EXPECT_EQ(IntField(o, "big"), 0);
  EXPECT_EQ(IntField(o, "s"), 0);
  EXPECT_DOUBLE_EQ(NumberField(o, "d"), 2.5);
  EXPECT_DOUBLE_EQ(NumberField(o, "neg"), -3.0);
  EXPECT_DOUBLE_EQ(NumberField(o, "s"), 0.0);
  EXPECT_TRUE(BoolField(o, "t"));
  EXPECT_FALSE(BoolField(o, "u"));
  EXPECT_NE(ObjectField(o, "o"), nullptr);
  EXPECT_EQ(ObjectField(o, "a"), nullptr);
  EXPECT_NE(ArrayField(o, "a"), nullptr);
  EXPECT_EQ(ArrayField(o, "absent"), nullptr);
}

}  // namespace
}  // namespace sinew::json_fields
