#include "gpumem/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace gpumem {
namespace {

std::atomic<bool> g_enabled{false};

}  // namespace

void set_progress_enabled(bool enabled) { g_enabled.store(enabled); }
bool progress_enabled() { return g_enabled.load(); }

struct Progress::State {
  std::string label;
  std::uint64_t total = 0;
  std::atomic<double> seconds{0};  // timed: the bar is elapsed / seconds
  std::FILE* out = nullptr;
  std::atomic<std::uint64_t> done{0};
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void draw() {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string text;
    if (const double limit = seconds.load(); limit > 0) {
      const auto ms = static_cast<std::uint64_t>(std::min(elapsed, limit) * 1000);
      text = line(label, ms, static_cast<std::uint64_t>(limit * 1000), elapsed);
    } else {
      text = line(label, done.load(std::memory_order_relaxed), total, elapsed);
    }
    std::fprintf(out, "\r%s\x1b[K", text.c_str());
    std::fflush(out);
  }
};

std::string Progress::line(const std::string& label, std::uint64_t done, std::uint64_t total, double seconds,
                           int width) {
  if (total == 0) return fmt::format("{}  {:.1f} s", label, seconds);
  const double share = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int marks = static_cast<int>(share * width);
  return fmt::format("{} [{}{}] {:3.0f}%  {:.1f} s", label, std::string(static_cast<std::size_t>(marks), '#'),
                     std::string(static_cast<std::size_t>(width - marks), '.'), share * 100, seconds);
}

Progress::Progress(std::string label, std::uint64_t total, std::FILE* out, bool force) {
  if (!force && !(progress_enabled() && out && isatty(fileno(out)))) return;
  state_ = std::make_unique<State>();
  state_->label = std::move(label);
  state_->total = total;
  state_->out = out;
  State* s = state_.get();
  s->thread = std::thread([s] {
    std::unique_lock lock(s->mutex);
    // Quick work never draws: the first line comes after 200 ms.
    if (s->wake.wait_for(lock, std::chrono::milliseconds(200), [s] { return s->stop; })) return;
    do {
      s->draw();
    } while (!s->wake.wait_for(lock, std::chrono::milliseconds(100), [s] { return s->stop; }));
    std::fprintf(s->out, "\r\x1b[K");
    std::fflush(s->out);
  });
}

Progress Progress::timed(std::string label, double seconds, std::FILE* out, bool force) {
  Progress p(std::move(label), 0, out, force);
  if (p.state_) p.state_->seconds.store(seconds);
  return p;
}

Progress::Progress(Progress&&) noexcept = default;

void Progress::advance(std::uint64_t units) noexcept {
  if (state_) state_->done.fetch_add(units, std::memory_order_relaxed);
}

Progress::~Progress() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

}  // namespace gpumem
