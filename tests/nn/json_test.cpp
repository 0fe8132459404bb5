#include "nn/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
  EXPECT_TRUE(v.at("b").as_bool());
  EXPECT_FALSE(v.at("c").as_bool());
  EXPECT_TRUE(v.at("d").is_integer());
  EXPECT_EQ(v.at("d").as_int64(), -12);
  EXPECT_FALSE(v.at("e").is_integer());
  EXPECT_DOUBLE_EQ(v.at("e").as_double(), 2.5e-3);
  EXPECT_EQ(v.at("f").as_string(), "hi");
  EXPECT_EQ(v.at("g").size(), 3u);
  EXPECT_EQ(v.at("g").at(1).size(), 0u);
  EXPECT_TRUE(v.at("g").at(2).is_object());
  EXPECT_TRUE(v.at("h").at("x").at(0).as_bool());
}

TEST(Json, KeepsInsertionOrder) {
  const Value v = parse(R"({"zeta": 1, "alpha": 2, "mid": 3})");
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.as_object()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(v.dump(), R"({"zeta":1,"alpha":2,"mid":3})");

  Value built;
  built["b"] = 1;
  built["a"] = "x";
  built["b"] = 2;  // replaced in place, keeps its position
  EXPECT_EQ(built.dump(), R"({"b":2,"a":"x"})");
}

TEST(Json, LargeObjectsAreIndexed) {
  // A vocabulary-sized object: quadratic key lookups would take seconds here.
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i * 7) + "\":" + std::to_string(i);
  const Value v = parse(text + "}");
  ASSERT_EQ(v.size(), 100000u);
  EXPECT_EQ(v.get<int64_t>("699993"), 99999);
  EXPECT_EQ(v.as_object().begin()->first, "0");
  EXPECT_LINEA_ERROR(parse(text + ",\"35\":1}"), "key not used before");

  Object o;
  for (const char* key : {"a", "b", "c", "d"}) o.set(key, key);
  EXPECT_TRUE(o.erase("b"));
  EXPECT_FALSE(o.erase("b"));
  EXPECT_EQ(Value(o).dump(), R"({"a":"a","c":"c","d":"d"})");
  EXPECT_EQ(o.find("d")->as_string(), "d");  // positions re-indexed after the erase
  o["e"] = 5;
  EXPECT_EQ(o.find("e")->as_int64(), 5);
  for (auto& [key, value] : o) value = Value(key + "!");  // values (not keys) are writable in place
  EXPECT_EQ(o.find("c")->as_string(), "c!");
}

TEST(Json, IntegersStayExact) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable as a double
  const Value v = parse("[9007199254740993, 9223372036854775807, -9223372036854775808, 0, -0, 9223372036854775808]");
  EXPECT_EQ(v.at(0).as_int64(), big);
  EXPECT_EQ(v.at(1).as_int64(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(v.at(2).as_int64(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(v.at(3).is_integer());
  EXPECT_FALSE(v.at(4).is_integer());  // -0 has no int64 form
  EXPECT_TRUE(std::signbit(v.at(4).as_double()));
  EXPECT_FALSE(v.at(5).is_integer());  // beyond int64: a double
  EXPECT_EQ(v.at(5).as_double(), 9223372036854775808.0);
  EXPECT_EQ(parse(v.dump()), v);
  EXPECT_EQ(Value(big).dump(), "9007199254740993");
  EXPECT_LINEA_ERROR(Value(std::numeric_limits<uint64_t>::max()), "does not fit in int64");
}

TEST(Json, DoublesRoundTripExactly) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    double d;
    const uint64_t bits = rng();
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    const Value back = parse(Value(d).dump());
    ASSERT_FALSE(back.is_integer()) << Value(d).dump();
    ASSERT_EQ(back.as_double(), d) << Value(d).dump();
  }
  for (double d : {0.1, 1.0 / 3.0, 1e300, 5e-324, 2.2250738585072014e-308, -0.0, 3.0, 1e21, 123456789012345680.0}) {
    const Value back = parse(Value(d).dump());
    EXPECT_EQ(back.as_double(), d) << Value(d).dump();
    EXPECT_EQ(std::signbit(back.as_double()), std::signbit(d));
    EXPECT_FALSE(back.is_integer()) << Value(d).dump();
  }
  // The shortest digits, laid out as Python's repr does.
  const std::vector<std::pair<double, std::string>> texts = {
      {0.1, "0.1"}, {3.0, "3.0"}, {-0.0, "-0.0"}, {3e-4, "0.0003"}, {-1.25e-4, "-0.000125"}, {1e-5, "1e-05"},
      {123.456, "123.456"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {-2.5e300, "-2.5e+300"},
      {5e-324, "5e-324"}, {123456789012345680.0, "1.2345678901234568e+17"}, {0.30000000000000004, "0.30000000000000004"}};
  for (const auto& [d, text] : texts) EXPECT_EQ(Value(d).dump(), text);
}

TEST(Json, NonFiniteNumbersAsInPython) {
  const Value v = parse("[NaN, Infinity, -Infinity]");
  EXPECT_TRUE(std::isnan(v.at(0).as_double()));
  EXPECT_EQ(v.at(1).as_double(), INFINITY);
  EXPECT_EQ(v.at(2).as_double(), -INFINITY);
  EXPECT_EQ(v.dump(), "[NaN,Infinity,-Infinity]");
  EXPECT_EQ(parse(v.dump()), v);  // NaN equals NaN structurally
}

TEST(Json, NumberEdgeCases) {
  EXPECT_EQ(parse("1e-400").as_double(), 0.0);  // underflow reads as zero
  EXPECT_TRUE(std::signbit(parse("-1e-400").as_double()));
  EXPECT_EQ(parse("0.0000000000000000000000000000000000000000000000000000000000000001e-300").as_double(), 0.0);
  EXPECT_LINEA_ERROR(parse("1e400"), "range of a double");
  EXPECT_LINEA_ERROR(parse("-123456789e999"), "range of a double");
  EXPECT_LINEA_ERROR(parse("01"), "leading zero");
  EXPECT_LINEA_ERROR(parse("1."), "digit after '.'");
  EXPECT_LINEA_ERROR(parse(".5"), "expected a value");
  EXPECT_LINEA_ERROR(parse("1e"), "exponent");
  EXPECT_LINEA_ERROR(parse("+1"), "expected a value");
  EXPECT_LINEA_ERROR(parse("-"), "expected a digit");
  EXPECT_EQ(parse("1E+2").as_double(), 100.0);
}

TEST(Json, StringEscapesAndUnicode) {
  const Value v = parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u4e2d \ud83d\ude00")");
  EXPECT_EQ(v.as_string(), "q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE4\xB8\xAD \xF0\x9F\x98\x80");
  // Raw UTF-8 passes through; control characters are escaped on output.
  const std::string raw = "caf\xC3\xA9 \xF0\x9F\x98\x80 tab\tnul" + std::string(1, '\0') + "\x1f";
  const Value s(raw);
  EXPECT_EQ(s.dump(), "\"caf\xC3\xA9 \xF0\x9F\x98\x80 tab\\tnul\\u0000\\u001f\"");
  EXPECT_EQ(parse(s.dump()).as_string(), raw);
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
  EXPECT_LINEA_ERROR(Value(std::string("\xFF")).dump(), "not valid UTF-8", "0xff");
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
  EXPECT_LINEA_ERROR(cfg.get<double>("d_model", "config"), "config key 'd_model': expected a number, got string");
  EXPECT_LINEA_ERROR(cfg.get<int64_t>("lr"), "key 'lr': expected an integer, got 0.0003");
  EXPECT_LINEA_ERROR(cfg.get<int32_t>("big", "config"), "config key 'big': expected an integer in [", "3000000000");
  EXPECT_LINEA_ERROR(cfg.get<uint8_t>("big"), "[0, 255]");
  EXPECT_LINEA_ERROR(cfg.get<bool>("layers"), "expected a bool, got number");
  EXPECT_LINEA_ERROR(cfg.get<std::string>("tied"), "expected a string, got bool");
  EXPECT_LINEA_ERROR(cfg.get<int64_t>("heads", "config"), "config key 'heads' is missing", "'d_model', 'layers'");
  EXPECT_LINEA_ERROR(cfg.at("layers").get<int64_t>("x"), "expected an object with key 'x', got number");
  EXPECT_LINEA_ERROR(cfg.at("half").as_int64(), "expected an integer, got 1.5");
  EXPECT_LINEA_ERROR(cfg.at("name").as_array(), "expected an array, got string");
  EXPECT_LINEA_ERROR(cfg.at("layers").at(0), "expected an array, got number");
  EXPECT_EQ(cfg.get<int>("layers"), 12);
  EXPECT_EQ(cfg.get<int64_t>("steps"), 2000);  // an integral double is an integer
  EXPECT_EQ(cfg.get<double>("layers"), 12.0);
  EXPECT_EQ(cfg.get<std::string>("name"), "tiny");
  EXPECT_TRUE(cfg.get<bool>("tied"));
  EXPECT_EQ(cfg.get_or<double>("dropout", 0.1), 0.1);
  EXPECT_EQ(cfg.get_or<int64_t>("nothing", 7), 7);  // null counts as absent
  EXPECT_EQ(cfg.get_or<int64_t>("layers", 7), 12);
  EXPECT_LINEA_ERROR(cfg.get_or<int64_t>("name", 7), "key 'name': expected an integer, got string");
  EXPECT_EQ(Value().get_or<std::string>("a", "dflt"), "dflt");
  EXPECT_LINEA_ERROR(Value(1).get_or<int>("a", 0, "config"), "config: expected an object with key 'a'");
  EXPECT_LINEA_ERROR(parse("[1]").at(1), "index 1 is out of range for an array of 1 elements");
}

TEST(Json, EqualityIgnoresMemberOrderAndNumberKind) {
  EXPECT_EQ(parse(R"({"a": 1, "b": [1, 2.0]})"), parse(R"({"b": [1.0, 2], "a": 1.0})"));
  EXPECT_FALSE(parse(R"({"a": 1})") == parse(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(parse(R"([1, 2])") == parse(R"([2, 1])"));
  EXPECT_FALSE(parse("1") == parse("\"1\""));
  EXPECT_FALSE(parse("null") == parse("false"));
}

TEST(Json, PrettyPrintingRoundTrips) {
  Value v;
  v["model"]["d_model"] = 64;
  v["model"]["heads"] = Array{Value(1), Value(2.5), Value("x")};
  v["empty"] = Object();
  v["list"] = Array();
  const std::string pretty = v.dump(2);
  EXPECT_EQ(pretty,
            "{\n  \"model\": {\n    \"d_model\": 64,\n    \"heads\": [\n      1,\n      2.5,\n      \"x\"\n    ]\n"
            "  },\n  \"empty\": {},\n  \"list\": []\n}");
  EXPECT_EQ(parse(pretty), v);
  EXPECT_EQ(parse(v.dump()), v);
  EXPECT_EQ(parse(v.dump(0)), v);
}

TEST(Json, JsonLinesNameTheLineOfTheFile) {
  const auto records = parse_lines("{\"step\": 1, \"loss\": 2.5}\n\n  \n{\"step\": 2, \"loss\": NaN}\r\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].get<int64_t>("step"), 2);
  EXPECT_TRUE(std::isnan(records[1].get<double>("loss")));
  EXPECT_LINEA_ERROR(parse_lines("{\"a\": 1}\n{\"a\": 2}\n{\"a\": ", "log.jsonl"), "log.jsonl, line 3, column 7");
}

TEST(Json, FilesRoundTrip) {
  const std::string path = (std::filesystem::temp_directory_path() / "linea_json_test.json").string();
  Value v;
  v["name"] = "run";
  v["seed"] = uint64_t{42};
  write_file(path, v);
  EXPECT_EQ(read_file(path), v);
  std::remove(path.c_str());
  EXPECT_LINEA_ERROR(read_file(path), "cannot open", "linea_json_test.json");
}

// Parses text; anything but success or linea::Error (a crash, another exception) fails the test.
void expect_parse_or_error(const std::string& text) {
  try {
    const Value v = parse(text);
    EXPECT_EQ(parse(v.dump()), v);  // whatever parses must round trip
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
      R"( "name": "caf\u00e9 \"x\"", "lr": NaN, "z": -Infinity, "e": {}, "a": []})";
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
