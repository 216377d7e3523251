// CSV and JSON tables: quoting, exact doubles, atomic writes.
#include <gtest/gtest.h>

#if TESSERA_IO_HAS_JSON
#include <nlohmann/json.hpp>
#endif

#include <filesystem>

#include "io_test_util.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/table_writer.h"

namespace tessera::io {
namespace {

Table sample() {
  Table t;
  t.columns = {"label", "name", "volume_ml"};
  t.add_row({std::int64_t{1}, std::string("liver"), 1534.25});
  t.add_row({std::int64_t{2}, std::string("says \"hi\", twice"), 0.1});
  return t;
}

TEST(Tables, CsvQuotesAndRoundTripsDoubles) {
  const std::string csv = to_csv(sample());
  EXPECT_EQ(csv,
            "label,name,volume_ml\n"
            "1,liver,1534.25\n"
            "2,\"says \"\"hi\"\", twice\",0.10000000000000001\n");
  EXPECT_DOUBLE_EQ(std::stod("0.10000000000000001"), 0.1);
}

#if TESSERA_IO_HAS_JSON
TEST(Tables, JsonIsAnArrayOfObjects) {
  const auto j = nlohmann::json::parse(to_json(sample()));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["label"], 1);
  EXPECT_EQ(j[1]["name"], "says \"hi\", twice");
  EXPECT_DOUBLE_EQ(j[0]["volume_ml"].get<double>(), 1534.25);
  test::ScratchDir dir;
  write_json(dir.file("t.json"), sample());
  EXPECT_EQ(nlohmann::json::parse(test::read_bytes(dir.file("t.json"))).size(), 2u);
}
#endif

TEST(Tables, WritesAtomicallyAndRefusesRaggedRows) {
  test::ScratchDir dir;
  write_csv(dir.file("t.csv"), sample());
  EXPECT_EQ(test::read_bytes(dir.file("t.csv")), to_csv(sample()));
  Table bad = sample();
  EXPECT_THROW(bad.add_row({std::int64_t{3}}), std::invalid_argument);
  bad.rows.push_back({std::int64_t{3}});
  test::expect_error_naming([&] { write_csv(dir.file("bad.csv"), bad); }, dir.file("bad.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.csv")));
  // A folder that does not exist: the error names the file, nothing is left.
  test::expect_error_naming([&] { write_csv(dir.file("missing/t.csv"), sample()); }, dir.file("missing/t.csv"));
}

TEST(AtomicFile, KeepsTheExtensionForFormatSniffingWriters) {
  EXPECT_EQ(full_extension("/a/b/mask.nii.gz"), ".nii.gz");
  EXPECT_EQ(full_extension("mask.mha"), ".mha");
  EXPECT_EQ(full_extension("/a.b/noext"), "");
  EXPECT_EQ(full_extension(".hidden"), "");
  test::ScratchDir dir;
  std::string seen;
  write_atomically_keeping_extension(dir.file("x.nii.gz"), [&](const std::string& tmp) {
    seen = tmp;
    test::write_bytes(tmp, "data");
  });
  EXPECT_EQ(full_extension(seen), ".nii.gz");
  EXPECT_NE(seen, dir.file("x.nii.gz"));
  EXPECT_EQ(test::read_bytes(dir.file("x.nii.gz")), "data");
  EXPECT_FALSE(std::filesystem::exists(seen));
  EXPECT_THROW(write_atomically_keeping_extension(dir.file("y.mha"),
                                                  [&](const std::string& tmp) {
                                                    seen = tmp;
                                                    test::write_bytes(tmp, "half");
                                                    throw std::runtime_error("boom");
                                                  }),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("y.mha")));
  EXPECT_FALSE(std::filesystem::exists(seen));
}

}  // namespace
}  // namespace tessera::io
