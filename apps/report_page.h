// The HTML pages of `--report` (segment, embed-wsi, video): one self-contained page per run, its data as
// JSON and its viewer's script (built from report/ with npm at build time) inlined, so it opens offline;
// bulky assets (Deep Zoom tiles, the video) go into a folder beside it, "<page stem>_files/".
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace tessera::apps::report {

// Whether this build has the viewer bundles (CMake option TESSERA_REPORT, node and npm at build time).
bool viewers_built();

// Adds `--report PATH.html` to a command; `what` says what the page shows.
CLI::Option* add_option(CLI::App* cmd, std::string& path, const std::string& what);

// Before any work: a clear error when a report is asked for and cannot be made.
void check_option(const std::string& path);

// "<dir>/<stem>_files" beside the page, and the same relative to the page (for URLs in it).
std::string assets_dir(const std::string& page);
std::string assets_url(const std::string& page);

// Writes assets into a fresh temporary folder, then moves it to assets_dir(page) (replacing an older one);
// an exception leaves neither.
void write_assets(const std::string& page, const std::function<void(const std::string& dir)>& write);

// Writes the page (atomically): the `kind` viewer ("segment", "wsi", "video") over `data`. Called after
// write_assets; when the page cannot be written, its assets are removed too.
void write_page(const std::string& page, const std::string& kind, const nlohmann::json& data);

// Removes a page and its assets (when the run's main output fails after them: no partial output).
void remove_report(const std::string& page) noexcept;

std::string base64(const std::string& bytes);

// The colour of class `i` (0-based) in reports, timelines and overlay pictures.
std::array<std::uint8_t, 3> class_rgb(std::int64_t i);

}  // namespace tessera::apps::report
