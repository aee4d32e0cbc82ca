// Diagnostics of the command-line tools on stderr, with ONNX Runtime's severities; stdout is kept for results.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace ctxkit::cli {

// ONNX Runtime's logging severities, least severe first.
enum class Severity { Verbose, Info, Warning, Error, Fatal };

// "verbose", "info", "warning", "error" or "fatal" (ORT's names), or ORT's numbers 0-4; nullopt otherwise.
std::optional<Severity> parseSeverity(std::string_view text);
inline constexpr std::string_view kSeverityNames = "verbose, info, warning, error, fatal";

// The level from the tools' options: --log-level LEVEL, else -v (verbose), else -q (errors only), else info.
// Both -v and -q, or -v/-q with a --log-level that says otherwise, is a usage error.
struct LogOptions {
  bool verbose = false;
  bool quiet = false;
  std::string level;
};
// Adds -v/--verbose, -q/--quiet and --log-level LEVEL to a tool's options.
void addLogOptions(CLI::App& app, LogOptions& options);
// Sets up the tool's logger ("TOOL: error: ..." lines on stderr). Returns the usage error to report, if any.
std::optional<std::string> initLogging(std::string_view tool, const LogOptions& options);

bool logEnabled(Severity severity);
void logMessage(Severity severity, std::string_view message);

// One line on a terminal that later output replaces (a progress display): log lines clear it before they print.
// Does nothing unless stderr is a terminal and info messages are shown.
bool statusLineShown();
void setStatusLine(std::string_view text);
void clearStatusLine();

template <typename... Args> void logVerbose(fmt::format_string<Args...> f, Args&&... args) {
  if (logEnabled(Severity::Verbose)) logMessage(Severity::Verbose, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void logInfo(fmt::format_string<Args...> f, Args&&... args) {
  if (logEnabled(Severity::Info)) logMessage(Severity::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void logWarning(fmt::format_string<Args...> f, Args&&... args) {
  if (logEnabled(Severity::Warning)) logMessage(Severity::Warning, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args> void logError(fmt::format_string<Args...> f, Args&&... args) {
  logMessage(Severity::Error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ctxkit::cli
