// The tools' logger: spdlog behind cli/log.h, so that only this file compiles spdlog's headers.
#include "cli/log.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdio>
#include <memory>
#include <unistd.h>

namespace ctxkit::cli {

namespace {

struct LogState {
  std::string tool = "ctxkit";
  std::shared_ptr<spdlog::logger> logger;
  std::string status;  // the status line shown now, empty when none
};

LogState& state() {
  static LogState s;
  return s;
}

spdlog::level::level_enum spdlogLevel(Severity s) {
  switch (s) {
    case Severity::Verbose: return spdlog::level::debug;
    case Severity::Info: return spdlog::level::info;
    case Severity::Warning: return spdlog::level::warn;
    case Severity::Error: return spdlog::level::err;
    case Severity::Fatal: return spdlog::level::critical;
  }
  return spdlog::level::info;
}

spdlog::logger& logger() {
  LogState& s = state();
  if (!s.logger) {
    // Messages carry their own "TOOL: severity: " prefix, the wording the tools have always printed.
    s.logger = std::make_shared<spdlog::logger>(s.tool, std::make_shared<spdlog::sinks::stderr_sink_mt>());
    s.logger->set_pattern("%v");
    s.logger->set_level(spdlog::level::info);
    s.logger->flush_on(spdlog::level::debug);
  }
  return *s.logger;
}

constexpr std::array<std::string_view, 5> kNames = {"verbose", "info", "warning", "error", "fatal"};

}  // namespace

std::optional<Severity> parseSeverity(std::string_view text) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (text == kNames[i] || (text.size() == 1 && text[0] == static_cast<char>('0' + i)))
      return static_cast<Severity>(i);
  return std::nullopt;
}

void addLogOptions(CLI::App& app, LogOptions& options) {
  app.add_flag("-v,--verbose", options.verbose, "more detail on stderr (--log-level verbose)");
  app.add_flag("-q,--quiet", options.quiet, "print errors only (--log-level error)");
  app.add_option("--log-level", options.level, fmt::format("diagnostics from this severity on: {}", kSeverityNames));
}

std::optional<std::string> initLogging(std::string_view tool, const LogOptions& options) {
  state().tool = std::string(tool);
  state().logger.reset();
  Severity level = Severity::Info;
  if (options.verbose && options.quiet) return std::string("-v and -q contradict each other");
  if (options.verbose) level = Severity::Verbose;
  if (options.quiet) level = Severity::Error;
  if (!options.level.empty()) {
    auto parsed = parseSeverity(options.level);
    if (!parsed) return fmt::format("--log-level '{}': expected one of {} (or 0-4)", options.level, kSeverityNames);
    if ((options.verbose || options.quiet) && *parsed != level)
      return fmt::format("--log-level {} contradicts {}", options.level, options.verbose ? "-v" : "-q");
    level = *parsed;
  }
  logger().set_level(spdlogLevel(level));
  return std::nullopt;
}

bool logEnabled(Severity severity) { return logger().should_log(spdlogLevel(severity)); }

void logMessage(Severity severity, std::string_view message) {
  spdlog::logger& l = logger();
  const auto level = spdlogLevel(severity);
  if (!l.should_log(level)) return;
  const bool status = statusLineShown();
  if (status) std::fputs("\r\033[K", stderr);
  const std::string& tool = state().tool;
  switch (severity) {
    case Severity::Verbose:
    case Severity::Info: l.log(level, "{}: {}", tool, message); break;
    default: l.log(level, "{}: {}: {}", tool, kNames[static_cast<size_t>(severity)], message); break;
  }
  if (status) {
    std::fputs(state().status.c_str(), stderr);
    std::fflush(stderr);
  }
}

bool statusLineShown() { return !state().status.empty(); }

void setStatusLine(std::string_view text) {
  static const bool terminal = isatty(fileno(stderr)) != 0;
  if (!terminal || !logEnabled(Severity::Info) || text.empty()) return;
  std::fputs("\r\033[K", stderr);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  state().status = std::string(text);
}

void clearStatusLine() {
  if (!statusLineShown()) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  state().status.clear();
}

}  // namespace ctxkit::cli
