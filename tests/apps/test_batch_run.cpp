// batch::run below the commands: staged rows (Job::stage), whose rest runs beside the next row's device part,
// its lock held until it ends (and released, the row announced, as soon as it does), its failure recorded on its own
// row, the records in row order; and the row read ahead (Job::upcoming), whose lock is taken when it is announced.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "batch.h"

namespace batch = tessera::apps::batch;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("tessera_batch_run_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path / "in");
    fs::create_directories(path / "out");
  }
  ~Dir() { fs::remove_all(path); }
};

// `n` rows whose inputs exist; output of row i: out/i.done.
std::vector<batch::ManifestRow> rows_in(const Dir& d, int n, batch::Job& job) {
  std::vector<batch::ManifestRow> rows;
  for (int i = 0; i < n; ++i) {
    batch::ManifestRow r;
    r.index = i;
    r.input = (d.path / "in" / std::to_string(i)).string();
    std::ofstream(r.input) << i;
    rows.push_back(r);
  }
  job.command = "embed-wsi";
  job.out_dir = (d.path / "out").string();
  job.quiet = true;
  job.output_of = [out = job.out_dir](const batch::ManifestRow& r) { return out + "/" + std::to_string(r.index) + ".done"; };
  return rows;
}

}  // namespace

TEST(BatchStage, ARowsRestRunsBesideTheNextRowsDevicePartWithItsLockHeld) {
  Dir d;
  batch::Job job;
  const auto rows = rows_in(d, 3, job);
  std::promise<void> second_started;
  std::shared_future<void> started = second_started.get_future().share();
  bool overlapped = false, locked_meanwhile = false;
  job.stage = [&](const batch::ManifestRow& r, const std::string& out) -> batch::Job::Finish {
    if (r.index == 1) second_started.set_value();
    return [&, r, out] {
      // Row 0's rest waits for row 1's device part: a run that finished row 0 first would time out here.
      if (r.index == 0) {
        overlapped = started.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
        locked_meanwhile = fs::exists(out + ".lock");
      }
      std::ofstream(out) << "done";
      return json{{"tiles", r.index * 10}};
    };
  };
  const batch::Result res = batch::run(job, rows);
  EXPECT_TRUE(overlapped);
  EXPECT_TRUE(locked_meanwhile);
  EXPECT_EQ(res.done, 3);
  EXPECT_EQ(res.failed, 0);
  ASSERT_EQ(res.items.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(res.items[i]["row"], i);
    EXPECT_EQ(res.items[i]["status"], "done");
    EXPECT_EQ(res.items[i]["tiles"], i * 10);
    EXPECT_FALSE(fs::exists(d.path / "out" / (std::to_string(i) + ".done.lock"))) << i;
  }
}

// A task stopped while the next row is on the device must not leave a finished row locked or unannounced: the lock
// goes, and the row's "done" line is said, as soon as its rest has put the output in place.
TEST(BatchStage, AFinishedRowsLockIsGoneBeforeTheNextRowsDevicePartEnds) {
  Dir d;
  batch::Job job;
  const auto rows = rows_in(d, 2, job);
  std::promise<void> rest0_done;
  std::shared_future<void> rest0 = rest0_done.get_future().share();
  bool lock0_gone = false;
  job.stage = [&](const batch::ManifestRow& r, const std::string& out) -> batch::Job::Finish {
    if (r.index == 1) {  // row 1's device part: waits for row 0's rest, then sees row 0's lock
      const bool ended = rest0.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
      const std::string lock0 = job.output_of(rows[0]) + ".lock";
      for (int i = 0; i < 2000 && ended && fs::exists(lock0); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock0_gone = ended && !fs::exists(lock0);
    }
    return [&, r, out] {
      std::ofstream(out) << "done";
      if (r.index == 0) rest0_done.set_value();
      return json::object();
    };
  };
  testing::internal::CaptureStderr();
  const batch::Result res = batch::run(job, rows);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(lock0_gone);
  EXPECT_EQ(res.done, 2);
  EXPECT_NE(said.find("tessera: done " + rows[0].input + " -> "), std::string::npos) << said;
}

TEST(BatchStage, AFailingRestFailsItsRowAloneAndRecordsStayInRowOrder) {
  Dir d;
  batch::Job job;
  const auto rows = rows_in(d, 4, job);
  std::ofstream(job.output_of(rows[2])) << "done before";  // skipped while row 1's rest is in flight
  job.stage = [&](const batch::ManifestRow& r, const std::string& out) -> batch::Job::Finish {
    if (r.index == 3) throw std::runtime_error("device part of row 3 failed");
    return [r, out]() -> json {
      if (r.index == 1) throw std::runtime_error(out + ": disk full");
      std::ofstream(out) << "done";
      return json::object();
    };
  };
  const batch::Result res = batch::run(job, rows);
  EXPECT_EQ(res.done, 1);
  EXPECT_EQ(res.skipped, 1);
  EXPECT_EQ(res.failed, 2);
  ASSERT_EQ(res.items.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(res.items[i]["row"], i);
  EXPECT_EQ(res.items[0]["status"], "done");
  EXPECT_EQ(res.items[1]["status"], "failed");
  EXPECT_NE(res.items[1]["error"].get<std::string>().find("disk full"), std::string::npos);
  EXPECT_EQ(res.items[2]["status"], "skipped");
  EXPECT_EQ(res.items[3]["status"], "failed");
  EXPECT_FALSE(fs::exists(job.output_of(rows[1])));
  EXPECT_FALSE(fs::exists(job.output_of(rows[1]) + ".lock"));
}

TEST(BatchUpcoming, TheRowReadAheadIsLockedAndOneLockedElsewhereIsPassedOver) {
  Dir d;
  batch::Job job;
  const auto rows = rows_in(d, 3, job);
  std::string held_by;
  const auto other = batch::LockFile::acquire(job.output_of(rows[1]) + ".lock", 600, held_by);  // another worker's
  ASSERT_TRUE(other);
  std::vector<int> told;
  bool ahead_locked = false;
  job.upcoming = [&](const batch::ManifestRow& r) { told.push_back(r.index); };
  job.process = [&](const batch::ManifestRow& r, const std::string& out) {
    if (r.index == 0) {
      std::string by;
      ahead_locked = !batch::LockFile::acquire(job.output_of(rows[2]) + ".lock", 600, by);
    }
    std::ofstream(out) << "done";
    return json::object();
  };
  const batch::Result res = batch::run(job, rows);
  EXPECT_EQ(told, std::vector<int>{2});
  EXPECT_TRUE(ahead_locked);
  EXPECT_EQ(res.done, 2);
  EXPECT_EQ(res.skipped, 1);
  ASSERT_EQ(res.items.size(), 3u);
  EXPECT_EQ(res.items[1]["status"], "skipped");
  EXPECT_NE(res.items[1]["reason"].get<std::string>().find("locked"), std::string::npos);
  EXPECT_EQ(res.items[2]["status"], "done");
  for (int i : {0, 2}) EXPECT_FALSE(fs::exists(job.output_of(rows[i]) + ".lock")) << i;
}

TEST(BatchSummary, ATaskWithAManifestShowsItsSummaryBeforeItsFirstRowEnds) {
  Dir d;
  batch::Job job;
  const auto rows = rows_in(d, 2, job);
  job.manifest = (d.path / "m.csv").string();
  bool seen = false;
  job.process = [&](const batch::ManifestRow& r, const std::string& out) {
    if (r.index == 0) {
      for (const auto& f : fs::directory_iterator(batch::summaries_dir(job.out_dir))) {
        std::ifstream in(f.path());
        const json j = json::parse(in);
        seen = j["finished"] == false && j["items"].empty();
      }
    }
    std::ofstream(out) << "done";
    return json::object();
  };
  const batch::Result res = batch::run(job, rows);
  EXPECT_TRUE(seen);
  EXPECT_EQ(res.done, 2);
  std::ifstream in(res.summary_path);
  const json j = json::parse(in);
  EXPECT_EQ(j["finished"], true);
  EXPECT_EQ(j["items"].size(), 2u);
}
