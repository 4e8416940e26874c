// zs_train's run log (apps/zs_train/run_log.h) under injected faults ([Note: fault
// injection] in core/file_writer.h): every write point of a log's life — opening, each record's
// write(2), the final fsync and close — failed in turn with ENOSPC, EIO and a short write. Each
// failure is an error naming --json-log, the file and (for a record) its number; the records
// before it are in the file whole; nothing is reported as written that was not.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_writer.h"
#include "run_log.h"

namespace zs::train {
namespace {

namespace fs = std::filesystem;

class PlannedFault : public FaultInjector {
 public:
  PlannedFault(int fail_at, Fault kind) : fail_at_(fail_at), kind_(kind) {}
  Fault at(const char* op, const std::string&) override {
    if (count_++ != fail_at_) return Fault::kNone;
    op_ = op;
    return kind_;
  }
  int count() const { return count_; }
  const std::string& op() const { return op_; }

 private:
  int fail_at_;
  Fault kind_;
  int count_ = 0;
  std::string op_;
};

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A log of a header, 5 steps and a final record; returns the error text ("" when none).
std::string write_log(const std::string& path, LogMode mode) {
  try {
    RunLog log(path, mode, std::chrono::steady_clock::now());
    log.write("header", {{"config", {{"lr", 2e-3}}}});
    for (int s = 1; s <= 5; ++s) log.write("step", {{"step", s}, {"loss", 5.0 - s}});
    log.write("final", {{"final", true}});
    log.close();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunLogFaults, EveryWritePointFailsWithANamedError) {
  const fs::path dir = fs::temp_directory_path() / ("zs_run_log_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "log.jsonl").string();
  PlannedFault counter(-1, Fault::kNone);
  install_fault_injector(&counter);
  ASSERT_EQ(write_log(path, LogMode::kNew), "");
  install_fault_injector(nullptr);
  const int points = counter.count();
  ASSERT_EQ(points, 1 + 7 + 2) << "create, 7 records, fsync, close";
  ASSERT_EQ(lines_of(path).size(), 7u);
  for (Fault kind : {Fault::kNoSpace, Fault::kIo, Fault::kShortWrite}) {
    const char* text = kind == Fault::kIo ? "Input/output error" : "No space left on device";
    for (int k = 0; k < points; ++k) {
      fs::remove(path);
      PlannedFault plan(k, kind);
      install_fault_injector(&plan);
      const std::string err = write_log(path, LogMode::kNew);
      install_fault_injector(nullptr);
      const bool write_point = plan.op() == "write";
      if (kind == Fault::kShortWrite && !write_point) {
        EXPECT_EQ(err, "") << "a short write is no fault at " << plan.op();
        continue;
      }
      ASSERT_NE(err, "") << "no error at write point " << k << " (" << plan.op() << ")";
      EXPECT_EQ(err.rfind("--json-log " + path, 0), 0u) << err;
      EXPECT_NE(err.find(text), std::string::npos) << err;
      const std::vector<std::string> lines = lines_of(path);
      if (write_point) {
        const int record = k;  // write point k is record k (create is point 0)
        EXPECT_NE(err.find(fmt::format("record {} (", record)), std::string::npos) << err;
        EXPECT_NE(err.find(fmt::format("holds the {} records before it", record - 1)),
                  std::string::npos)
            << err;
        // The records before it are whole; a short write leaves part of the next line.
        const size_t whole = static_cast<size_t>(record - 1);
        ASSERT_GE(lines.size(), whole);
        for (size_t i = 0; i < whole; ++i) EXPECT_EQ(lines[i].front(), '{') << lines[i];
        EXPECT_EQ(lines.size(), kind == Fault::kShortWrite ? whole + 1 : whole);
        EXPECT_EQ(err.find("partial line") != std::string::npos, kind == Fault::kShortWrite) << err;
      } else if (plan.op() == "create") {
        EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
      } else {
        EXPECT_NE(err.find("after 7 records"), std::string::npos) << err;  // fsync or close
      }
    }
  }
  // Append mode keeps what the file holds.
  fs::remove(path);
  ASSERT_EQ(write_log(path, LogMode::kNew), "");
  ASSERT_EQ(write_log(path, LogMode::kAppend), "");
  EXPECT_EQ(lines_of(path).size(), 14u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zs::train
