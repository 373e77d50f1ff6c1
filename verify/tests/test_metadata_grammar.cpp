// The metadata grammar of docs/conformance.md: every row of tests/data/fixture_metadata.json (the
// table python/tests/test_fixtures.py reads too) through the parser both runners share, and the
// message a fixture gets for text outside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "verify/fixture.hpp"

namespace dsv4cpu::verify {
namespace {

nlohmann::json table() {
  std::ifstream in(DSV4CPU_METADATA_TABLE);
  EXPECT_TRUE(in) << DSV4CPU_METADATA_TABLE;
  return nlohmann::json::parse(in)["rows"];
}

template <class T, class U>
U bits_of(T v) {
  U u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// The row's verdict on `v`: absent when the row is invalid, else the value or bit pattern.
template <class T, class Bits>
void expect_real(const nlohmann::json& row, const std::optional<T>& v, const std::string& where) {
  ASSERT_EQ(v.has_value(), row.value("valid", true)) << where;
  if (!v) return;
  if (row.value("nan", false)) {
    EXPECT_TRUE(std::isnan(*v)) << where;
    return;
  }
  const uint64_t bits = bits_of<T, Bits>(*v);
  EXPECT_EQ(bits, std::stoull(row["bits"].get<std::string>(), nullptr, 16)) << where;
}

TEST(MetadataGrammar, EveryRowOfTheSharedTable) {
  size_t rows = 0;
  for (const nlohmann::json& row : table()) {
    const std::string kind = row["kind"], text = row["text"];
    const bool valid = row.value("valid", true);
    const std::string where = kind + " '" + text + "' (" + std::to_string(text.size()) + " bytes)";
    if (kind == "integer") {
      const std::optional<int64_t> v = parse_integer(text);
      ASSERT_EQ(v.has_value(), valid) << where;
      if (v) {
        EXPECT_EQ(*v, row["value"].get<int64_t>()) << where;
      }
    } else if (kind == "boolean") {
      const std::optional<bool> v = parse_boolean(text);
      ASSERT_EQ(v.has_value(), valid) << where;
      if (v) {
        EXPECT_EQ(*v, row["value"].get<bool>()) << where;
      }
    } else if (kind == "real") {
      expect_real<double, uint64_t>(row, parse_real(text), where);
    } else if (kind == "real32") {
      expect_real<float, uint32_t>(row, parse_real32(text), where);
    } else {
      ADD_FAILURE() << "unknown kind " << where;
    }
    ++rows;
  }
  EXPECT_GT(rows, 50u);
}

// A fixture's scalar outside the grammar is a FixtureError naming the key and the text, as the
// Python runner reports it (it calls these very functions through the extension).
TEST(MetadataGrammar, CaseReportsTheKeyAndTheText) {
  SafetensorsFile f;
  f.metadata = {{"nul", std::string("16\0", 3)}, {"plus", "+16"}, {"big", "1e999"}};
  Case c(f);
  const auto message = [&](auto read) {
    try {
      read();
    } catch (const FixtureError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { c.integer("nul"); }), "scalar nul = '16\\x00' is not a 64-bit integer");
  EXPECT_EQ(message([&] { c.integer("plus"); }), "scalar plus = '+16' is not a 64-bit integer");
  EXPECT_EQ(message([&] { c.real("big"); }), "scalar big = '1e999' is not a number");
  EXPECT_EQ(message([&] { c.real32("plus"); }), "scalar plus = '+16' is not a number within fp32");
}

}  // namespace
}  // namespace dsv4cpu::verify
