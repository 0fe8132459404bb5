#include "nn/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "tests/test_util.h"

namespace linea::json {
namespace {

TEST(Json, ParsesEveryKind) {
  const Value v = parse(R"( {"a": null, "b": true, "c": false, "d": -12, "e": 2.5e-3, "f": "hi",
                            "g": [1, [], {}], "h": {"x": [true]}} )");
  ASSERT_TRUE(v.is_object());
  EXPECT_TRUE(v.at("a").is_null());
  EXPECT_TRUE(v.at("b").get<bool>());
  EXPECT_FALSE(v.at("c").get<bool>());
  EXPECT_TRUE(v.at("d").is_number_integer());
  EXPECT_EQ(v.at("d").get<int64_t>(), -12);
  EXPECT_FALSE(v.at("e").is_number_integer());
  EXPECT_DOUBLE_EQ(v.at("e").get<double>(), 2.5e-3);
  EXPECT_EQ(v.at("f").get<std::string>(), "hi");
  EXPECT_EQ(v.at("g").size(), 3u);
  EXPECT_EQ(v.at("g").at(1).size(), 0u);
  EXPECT_TRUE(v.at("g").at(2).is_object());
  EXPECT_TRUE(v.at("h").at("x").at(0).get<bool>());
}

TEST(Json, KeepsInsertionOrder) {
  const Value v = parse(R"({"zeta": 1, "alpha": 2, "mid": 3})");
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(v.dump(), R"({"zeta":1,"alpha":2,"mid":3})");

  Value built;
  built["b"] = 1;
  built["a"] = "x";
  built["b"] = 2;  // replaced in place, keeps its position
  EXPECT_EQ(built.dump(), R"({"b":2,"a":"x"})");
}

TEST(Json, LargeObjectsParseInLinearTime) {
  // A vocabulary-sized object: a key search on every insertion (ordered_json's own) would take
  // seconds here.
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i * 7) + "\":" + std::to_string(i);
  const Value v = parse(text + "}");
  ASSERT_EQ(v.size(), 100000u);
  EXPECT_EQ(get<int64_t>(v, "699993"), 99999);
  EXPECT_EQ(v.begin().key(), "0");
  EXPECT_LINEA_ERROR(parse(text + ",\"35\":1}"), "key not used before");

  Value o = Value::object();
  for (const char* key : {"a", "b", "c", "d"}) o[key] = key;
  EXPECT_EQ(o.erase("b"), 1u);
  EXPECT_EQ(o.erase("b"), 0u);
  EXPECT_EQ(dump(o), R"({"a":"a","c":"c","d":"d"})");
  EXPECT_EQ(find(o, "d")->get<std::string>(), "d");
  o["e"] = 5;
  EXPECT_EQ(find(o, "e")->get<int64_t>(), 5);
  for (auto& [key, value] : o.items()) value = key + "!";  // values (not keys) are writable in place
  EXPECT_EQ(find(o, "c")->get<std::string>(), "c!");
}

TEST(Json, IntegersStayExact) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable as a double
  const Value v = parse(
      "[9007199254740993, 9223372036854775807, -9223372036854775808, 0, -0, 9223372036854775808, "
      "18446744073709551615, 18446744073709551616, -0.0]");
  EXPECT_EQ(v.at(0).get<int64_t>(), big);
  EXPECT_EQ(v.at(1).get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(v.at(2).get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(v.at(3).is_number_integer());
  EXPECT_TRUE(v.at(4).is_number_integer());  // -0 is the integer 0, as in Python; -0.0 keeps its sign
  EXPECT_EQ(v.at(4).get<int64_t>(), 0);
  EXPECT_TRUE(v.at(5).is_number_unsigned());  // beyond int64: a uint64, still exact
  EXPECT_EQ(v.at(5).get<uint64_t>(), uint64_t{1} << 63);
  EXPECT_EQ(v.at(6).get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(v.at(7).is_number_float());  // beyond uint64: a double
  EXPECT_EQ(v.at(7).get<double>(), 18446744073709551616.0);
  EXPECT_TRUE(std::signbit(v.at(8).get<double>()));
  EXPECT_EQ(parse(dump(v)), v);
  EXPECT_EQ(dump(Value(big)), "9007199254740993");
  EXPECT_EQ(dump(Value(std::numeric_limits<uint64_t>::max())), "18446744073709551615");
  EXPECT_LINEA_ERROR(as<int64_t>(v.at(5), "seed"), "seed: expected an integer in [", "9223372036854775808");
}

TEST(Json, DoublesRoundTripExactly) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    double d;
    const uint64_t bits = rng();
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    const Value back = parse(dump(Value(d)));
    ASSERT_FALSE(back.is_number_integer()) << dump(Value(d));
    ASSERT_EQ(back.get<double>(), d) << dump(Value(d));
  }
  for (double d : {0.1, 1.0 / 3.0, 1e300, 5e-324, 2.2250738585072014e-308, -0.0, 3.0, 1e21, 123456789012345680.0}) {
    const Value back = parse(dump(Value(d)));
    EXPECT_EQ(back.get<double>(), d) << dump(Value(d));
    EXPECT_EQ(std::signbit(back.get<double>()), std::signbit(d));
    EXPECT_FALSE(back.is_number_integer()) << dump(Value(d));
  }
  // The shortest digits, laid out as Python's repr does, except that nlohmann writes an exponent
  // from 1e15 on where Python waits until 1e16.
  const std::vector<std::pair<double, std::string>> texts = {
      {0.1, "0.1"}, {3.0, "3.0"}, {-0.0, "-0.0"}, {3e-4, "0.0003"}, {-1.25e-4, "-0.000125"}, {1e-5, "1e-05"},
      {123.456, "123.456"}, {123456789012345.0, "123456789012345.0"}, {1e15, "1e+15"}, {1e16, "1e+16"},
      {-2.5e300, "-2.5e+300"}, {5e-324, "5e-324"}, {123456789012345680.0, "1.2345678901234568e+17"},
      {0.30000000000000004, "0.30000000000000004"}};
  for (const auto& [d, text] : texts) EXPECT_EQ(dump(Value(d)), text);
}

TEST(Json, NonFiniteNumbersAreNotJson) {
  // RFC 8259 has no NaN or infinities: written as null, and refused when reading.
  EXPECT_EQ(dump(Value::array({NAN, INFINITY, -INFINITY})), "[null,null,null]");
  EXPECT_LINEA_ERROR(parse("[NaN]"), "column 2", "expected a value", "got 'N'");
  EXPECT_LINEA_ERROR(parse("Infinity"), "expected a value", "got 'I'");
  EXPECT_LINEA_ERROR(parse("-Infinity"), "expected a digit", "got 'I'");
}

TEST(Json, NumberEdgeCases) {
  EXPECT_EQ(parse("1e-400").get<double>(), 0.0);  // underflow reads as zero
  EXPECT_TRUE(std::signbit(parse("-1e-400").get<double>()));
  EXPECT_EQ(parse("0.0000000000000000000000000000000000000000000000000000000000000001e-300").get<double>(), 0.0);
  EXPECT_LINEA_ERROR(parse("1e400"), "range of a double");
  EXPECT_LINEA_ERROR(parse("-123456789e999"), "range of a double");
  EXPECT_LINEA_ERROR(parse("01"), "leading zero");
  EXPECT_LINEA_ERROR(parse("1."), "digit after '.'");
  EXPECT_LINEA_ERROR(parse(".5"), "expected a value");
  EXPECT_LINEA_ERROR(parse("1e"), "exponent");
  EXPECT_LINEA_ERROR(parse("+1"), "expected a value");
  EXPECT_LINEA_ERROR(parse("-"), "expected a digit");
  EXPECT_EQ(parse("1E+2").get<double>(), 100.0);
}

TEST(Json, StringEscapesAndUnicode) {
  const Value v = parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u4e2d \ud83d\ude00")");
  EXPECT_EQ(v.get<std::string>(), "q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE4\xB8\xAD \xF0\x9F\x98\x80");
  // Raw UTF-8 passes through; control characters are escaped on output.
  const std::string raw = "caf\xC3\xA9 \xF0\x9F\x98\x80 tab\tnul" + std::string(1, '\0') + "\x1f";
  const Value s(raw);
  EXPECT_EQ(dump(s), "\"caf\xC3\xA9 \xF0\x9F\x98\x80 tab\\tnul\\u0000\\u001f\"");
  EXPECT_EQ(parse(dump(s)).get<std::string>(), raw);
}

TEST(Json, RejectsBadStrings) {
  EXPECT_LINEA_ERROR(parse("\"abc"), "closing '\"'", "column 1");
  EXPECT_LINEA_ERROR(parse("\"a\nb\""), "control characters");
  EXPECT_LINEA_ERROR(parse(R"("\x")"), "escapes");
  EXPECT_LINEA_ERROR(parse(R"("\u12G4")"), "four hex digits");
  EXPECT_LINEA_ERROR(parse(R"("\ud83d")"), "low half of a surrogate pair");
  EXPECT_LINEA_ERROR(parse(R"("\ud83d\u0041")"), "low surrogate");
  EXPECT_LINEA_ERROR(parse(R"("\ude00")"), "high surrogate before a low one");
  EXPECT_LINEA_ERROR(parse("\"\xC3\""), "valid UTF-8");          // truncated sequence
  EXPECT_LINEA_ERROR(parse("\"\xC0\xAF\""), "valid UTF-8");      // overlong '/'
  EXPECT_LINEA_ERROR(parse("\"\xED\xA0\x80\""), "valid UTF-8");  // an encoded surrogate
  EXPECT_LINEA_ERROR(parse("\"\xF4\x90\x80\x80\""), "valid UTF-8");  // above U+10FFFF
  EXPECT_LINEA_ERROR(dump(Value(std::string("\xFF"))), "not valid UTF-8", "0xFF");
}

TEST(Json, ErrorsNameLineColumnAndExpectation) {
  EXPECT_LINEA_ERROR(parse("{\n  \"a\": 1,\n  \"b\" 2\n}"), "line 3, column 7", "expected ':' after an object key",
                     "got '2'");
  EXPECT_LINEA_ERROR(parse("[1, 2"), "line 1, column 6", "',' or ']'", "the end of the input");
  EXPECT_LINEA_ERROR(parse("{\"a\": 1 \"b\": 2}"), "',' or '}'");
  EXPECT_LINEA_ERROR(parse("{\"a\": 1, \"a\": 2}"), "column 10", "key not used before");
  EXPECT_LINEA_ERROR(parse("{1: 2}"), "string key");
  EXPECT_LINEA_ERROR(parse("[1,]"), "expected a value");
  EXPECT_LINEA_ERROR(parse("tru"), "expected 'true'");
  EXPECT_LINEA_ERROR(parse("[] x"), "end of the input after the value", "got 'x'");
  EXPECT_LINEA_ERROR(parse(""), "expected a value", "the end of the input");
  EXPECT_LINEA_ERROR(parse("\x01"), "byte 0x01");
  EXPECT_LINEA_ERROR(parse("{", "run.json"), "run.json, line 1, column 2");
  EXPECT_LINEA_ERROR(parse(std::string(100000, '[')), "nesting of at most 512");
  EXPECT_NO_THROW(parse(std::string(500, '[') + std::string(500, ']')));
}

TEST(Json, TypedGettersSayWhatWasExpected) {
  const Value cfg = parse(R"({"d_model": "wide", "layers": 12, "lr": 3e-4, "big": 3000000000, "half": 1.5,
                              "name": "tiny", "tied": true, "steps": 2e3, "nothing": null})");
  EXPECT_LINEA_ERROR(get<double>(cfg, "d_model", "config"), "config key 'd_model': expected a number, got string");
  EXPECT_LINEA_ERROR(get<int64_t>(cfg, "lr"), "key 'lr': expected an integer, got 0.0003");
  EXPECT_LINEA_ERROR(get<int32_t>(cfg, "big", "config"), "config key 'big': expected an integer in [", "3000000000");
  EXPECT_LINEA_ERROR(get<uint8_t>(cfg, "big"), "[0, 255]");
  EXPECT_LINEA_ERROR(get<bool>(cfg, "layers"), "expected a bool, got number");
  EXPECT_LINEA_ERROR(get<std::string>(cfg, "tied"), "expected a string, got bool");
  EXPECT_LINEA_ERROR(get<int64_t>(cfg, "heads", "config"), "config key 'heads' is missing", "'d_model', 'layers'");
  EXPECT_LINEA_ERROR(get<int64_t>(at(cfg, "layers"), "x"), "expected an object with key 'x', got number");
  EXPECT_LINEA_ERROR(as<int64_t>(at(cfg, "half")), "expected an integer, got 1.5");
  EXPECT_LINEA_ERROR(at(at(cfg, "name"), 0), "expected an array, got string");
  EXPECT_LINEA_ERROR(at(at(cfg, "layers"), 0), "expected an array, got number");
  EXPECT_EQ(get<int>(cfg, "layers"), 12);
  EXPECT_EQ(get<int64_t>(cfg, "steps"), 2000);  // an integral double is an integer
  EXPECT_EQ(get<double>(cfg, "layers"), 12.0);
  EXPECT_EQ(get<std::string>(cfg, "name"), "tiny");
  EXPECT_TRUE(get<bool>(cfg, "tied"));
  EXPECT_EQ(get_or<double>(cfg, "dropout", 0.1), 0.1);
  EXPECT_EQ(get_or<int64_t>(cfg, "nothing", 7), 7);  // null counts as absent
  EXPECT_EQ(get_or<int64_t>(cfg, "layers", 7), 12);
  EXPECT_LINEA_ERROR(get_or<int64_t>(cfg, "name", 7), "key 'name': expected an integer, got string");
  EXPECT_EQ(get_or<std::string>(Value(), "a", "dflt"), "dflt");
  EXPECT_LINEA_ERROR(get_or<int>(Value(1), "a", 0, "config"), "config: expected an object with key 'a'");
  EXPECT_LINEA_ERROR(at(parse("[1]"), 1), "index 1 is out of range for an array of 1 elements");
}

TEST(Json, EqualityComparesNumbersByValueAndMembersInOrder) {
  EXPECT_EQ(parse(R"({"a": 1, "b": [1, 2.0]})"), parse(R"({"a": 1.0, "b": [1.0, 2]})"));
  EXPECT_FALSE(parse(R"({"a": 1, "b": 2})") == parse(R"({"b": 2, "a": 1})"));  // ordered_json: order is content
  EXPECT_FALSE(parse(R"({"a": 1})") == parse(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(parse(R"([1, 2])") == parse(R"([2, 1])"));
  EXPECT_FALSE(parse("1") == parse("\"1\""));
  EXPECT_FALSE(parse("null") == parse("false"));
}

TEST(Json, PrettyPrintingRoundTrips) {
  Value v;
  v["model"]["d_model"] = 64;
  v["model"]["heads"] = Value::array({1, 2.5, "x"});
  v["empty"] = Value::object();
  v["list"] = Value::array();
  const std::string pretty = dump(v, 2);
  EXPECT_EQ(pretty,
            "{\n  \"model\": {\n    \"d_model\": 64,\n    \"heads\": [\n      1,\n      2.5,\n      \"x\"\n    ]\n"
            "  },\n  \"empty\": {},\n  \"list\": []\n}");
  EXPECT_EQ(parse(pretty), v);
  EXPECT_EQ(parse(dump(v)), v);
  EXPECT_EQ(parse(dump(v, 0)), v);
}

TEST(Json, JsonLinesNameTheLineOfTheFile) {
  const auto records = parse_lines("{\"step\": 1, \"loss\": 2.5}\n\n  \n{\"step\": 2, \"loss\": null}\r\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(get<int64_t>(records[1], "step"), 2);
  EXPECT_TRUE(at(records[1], "loss").is_null());  // a NaN loss, as dump writes it
  EXPECT_LINEA_ERROR(parse_lines("{\"a\": 1}\n{\"a\": 2}\n{\"a\": ", "log.jsonl"), "log.jsonl, line 3, column 7");
}

// Parses text; anything but success or linea::Error (a crash, another exception) fails the test.
void expect_parse_or_error(const std::string& text) {
  try {
    const Value v = parse(text);
    EXPECT_EQ(parse(dump(v)), v);  // whatever parses must round trip
  } catch (const Error&) {
  }
}

TEST(Json, FuzzRandomBytesOnlyEverThrowLineaError) {
  std::mt19937 rng(12345);
  // Bytes drawn mostly from JSON's own alphabet, so the parser gets deep into its states.
  const std::string alphabet = "{}[]:,\"\\/ \n\t0123456789.eE+-truefalsnNIfyu\x80\xC3\xA9\xF0\xED\xFF";
  for (int i = 0; i < 20000; ++i) {
    std::string text(rng() % 40, ' ');
    for (char& c : text) c = rng() % 4 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    expect_parse_or_error(text);
  }
}

TEST(Json, FuzzTruncatedAndMutatedDocuments) {
  const std::string doc =
      R"({"model": {"d_model": 64, "layers": [1, 2.5e-3, -0.0, true, null, "\u00e9\ud83d\ude00"]},)"
      R"( "name": "caf\u00e9 \"x\"", "lr": 3e-4, "z": -1.5e+300, "e": {}, "a": []})";
  ASSERT_NO_THROW(parse(doc));
  for (size_t n = 0; n < doc.size(); ++n) EXPECT_LINEA_ERROR(parse(doc.substr(0, n)), "line 1");
  std::mt19937 rng(99);
  for (int i = 0; i < 20000; ++i) {
    std::string text = doc;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) text[rng() % text.size()] = static_cast<char>(rng() % 256);
    expect_parse_or_error(text);
  }
}

}  // namespace
}  // namespace linea::json
