#include "job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"

namespace zs::run {
namespace {

sigset_t stop_signals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

// fork + exec in a new process group; stdout/stderr to `out_fd` (-1: /dev/null).
pid_t spawn(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  ZS_CHECK(pid >= 0, ErrorCode::kInternal, "cannot fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    const sigset_t s = stop_signals();
    ::sigprocmask(SIG_UNBLOCK, &s, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, 0);
    ::dup2(out_fd >= 0 ? out_fd : null_fd, 1);
    ::dup2(out_fd >= 0 ? out_fd : null_fd, 2);
    ::execvp(args[0], args.data());
    const std::string msg = "zs_run: cannot run " + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the first kill of the group
  return pid;
}

// The pids whose parent is this process (from /proc/PID/stat's fourth field).
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  std::error_code ec;
  const pid_t me = ::getpid();
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');  // the command may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == me)
      out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Why: Open MPI starts each local rank in a process group of its own; when mpirun is killed they
// are orphaned (and, with this process the subreaper, re-parented to it). They would go on
// holding the save directory's lock. Kills them, and what they leave in turn; returns how many.
int kill_orphans() {
  int n = 0;
  for (int round = 0; round < 10; ++round) {
    const std::vector<pid_t> left = children();
    if (left.empty()) break;
    for (const pid_t p : left) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
      ++n;
    }
  }
  return n;
}

JobEnd ended(int status) {
  JobEnd e;
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  return e;
}

}  // namespace

int make_stop_signal_fd() {
  const sigset_t s = stop_signals();
  ZS_CHECK(::sigprocmask(SIG_BLOCK, &s, nullptr) == 0, ErrorCode::kInternal, "sigprocmask: {}",
           std::strerror(errno));
  const int fd = ::signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK);
  ZS_CHECK(fd >= 0, ErrorCode::kInternal, "signalfd: {}", std::strerror(errno));
  ZS_CHECK(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, ErrorCode::kInternal,
           "prctl(PR_SET_CHILD_SUBREAPER): {}", std::strerror(errno));
  return fd;
}

int stop_requested(int stop_fd) {
  signalfd_siginfo info{};
  if (::read(stop_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info)))
    return static_cast<int>(info.ssi_signo);
  return 0;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    default:
      return "signal " + std::to_string(sig);
  }
}

JobEnd run_job(const std::vector<std::string>& argv, int stop_fd,
               const std::function<void(const std::string&, Clock::time_point)>& on_line,
               std::chrono::seconds grace) {
  int fds[2];
  ZS_CHECK(::pipe2(fds, O_CLOEXEC) == 0, ErrorCode::kInternal, "pipe: {}", std::strerror(errno));
  const int flags = ::fcntl(fds[1], F_GETFD);
  ::fcntl(fds[1], F_SETFD, flags & ~FD_CLOEXEC);  // the child's stdout
  const pid_t pid = spawn(argv, fds[1]);
  ::fcntl(fds[1], F_SETFD, flags);
  ::close(fds[1]);
  const int out = fds[0];
  std::string pending;
  bool open = true, reaped = false;
  int status = 0, stop = 0;
  Clock::time_point kill_at{}, reaped_at{};
  auto flush_lines = [&](bool all) {
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      on_line(pending.substr(0, nl), Clock::now());
      pending.erase(0, nl + 1);
    }
    if (all && !pending.empty()) {
      on_line(pending, Clock::now());
      pending.clear();
    }
  };
  // Why a 200 ms poll rather than waiting for EOF: a rank orphaned by a dying mpirun may hold the
  // pipe open; the child's end (waitpid) decides, and the output gets 2 s more to drain. A child
  // that closes its output before it exits is waited for, not killed.
  while (open || !reaped) {
    pollfd p[2] = {{open ? out : -1, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    ::poll(p, 2, 200);
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t n = ::read(out, buf, sizeof(buf));
      if (n > 0) {
        pending.append(buf, static_cast<size_t>(n));
        flush_lines(false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        open = false;
      }
    }
    if (stop == 0 && (p[1].revents & POLLIN) && (stop = stop_requested(stop_fd)) != 0) {
      ::kill(-pid, SIGTERM);
      kill_at = Clock::now() + grace;
    }
    if (stop != 0 && !reaped && Clock::now() >= kill_at) ::kill(-pid, SIGKILL);
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      reaped_at = Clock::now();
    }
    if (reaped && Clock::now() - reaped_at > std::chrono::seconds(2)) break;
  }
  flush_lines(true);
  ::close(out);
  ::kill(-pid, SIGKILL);  // leftovers of the group (none when mpirun cleaned up)
  if (!reaped) ::waitpid(pid, &status, 0);
  JobEnd e = ended(status);
  e.stop_signal = stop;
  e.orphans_killed = kill_orphans();
  return e;
}

bool run_quietly(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                 int stop_fd) {
  const pid_t pid = spawn(argv, -1);
  const Clock::time_point deadline = Clock::now() + limit;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    pollfd p = {stop_fd, POLLIN, 0};
    if (Clock::now() >= deadline || ::poll(&p, 1, 50) > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
  }
  ::kill(-pid, SIGKILL);
  kill_orphans();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace zs::run
