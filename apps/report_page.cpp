#include "report_page.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tessera/io/atomic_file.h"

namespace tessera::apps::report {
namespace {

namespace fs = std::filesystem;

std::string bundle_path(const std::string& kind) {
#ifdef TESSERA_REPORT_DIR
  return std::string(TESSERA_REPORT_DIR) + "/" + kind + ".js";
#else
  (void)kind;
  return "";
#endif
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot read the report viewer (rebuild tessera with TESSERA_REPORT=ON)");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// JSON inside <script>: every '<' (only ever inside strings) as \u003c, so no "</script" or "<!--" can form.
std::string json_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

// Script text inside <script>: "</" would end the element early.
std::string script_safe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

fs::path stem_of(const std::string& page) {
  fs::path p(page);
  return p.parent_path() / p.stem();
}

}  // namespace

bool viewers_built() {
  for (const char* kind : {"segment", "wsi", "video"}) {
    const std::string p = bundle_path(kind);
    if (p.empty() || !fs::is_regular_file(p)) return false;
  }
  return true;
}

CLI::Option* add_option(CLI::App* cmd, std::string& path, const std::string& what) {
  return cmd->add_option("--report", path, "Write an HTML report (opens offline): " + what);
}

void check_option(const std::string& path) {
  if (path.empty()) return;
  if (fs::path(path).extension() != ".html")
    throw CLI::ValidationError("--report", path + ": the report is an HTML page: give a name ending in .html");
  if (!viewers_built())
    throw CLI::ValidationError("--report", "this tessera was built without the report viewers (configure with "
                                           "-DTESSERA_REPORT=ON, with node and npm installed; `tessera doctor` says)");
}

std::string assets_dir(const std::string& page) { return stem_of(page).string() + "_files"; }

std::string assets_url(const std::string& page) { return fs::path(page).stem().string() + "_files/"; }

void write_assets(const std::string& page, const std::function<void(const std::string& dir)>& write) {
  const fs::path final_dir(assets_dir(page));
  const fs::path tmp = final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp);
    write(tmp.string());
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

void write_page(const std::string& page, const std::string& kind, const nlohmann::json& data) try {
  const std::string script = read_file(bundle_path(kind));
  const std::string title = data.value("title", "tessera report");
  std::string html;
  html.reserve(script.size() + 4096);
  html += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  html += html_escape(title);
  html += "</title>\n</head>\n<body>\n<script type=\"application/json\" id=\"tessera-data\">";
  html += json_safe(data.dump());
  html += "</script>\n<script>";
  html += script_safe(script);
  html += "</script>\n</body>\n</html>\n";
  const fs::path p(page);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  io::write_file_atomically(page, html);
} catch (...) {
  std::error_code ec;
  fs::remove_all(assets_dir(page), ec);
  throw;
}

void remove_report(const std::string& page) noexcept {
  std::error_code ec;
  fs::remove(page, ec);
  fs::remove_all(assets_dir(page), ec);
}

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    out += {abc[v >> 18], abc[(v >> 12) & 63], abc[(v >> 6) & 63], abc[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += {abc[v >> 18], abc[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += {abc[v >> 18], abc[(v >> 12) & 63], abc[(v >> 6) & 63], '='};
  }
  return out;
}

std::array<std::uint8_t, 3> class_rgb(std::int64_t i) {
  static const std::uint8_t palette[][3] = {{230, 25, 75},  {60, 180, 75},   {255, 225, 25}, {0, 130, 200},
                                            {245, 130, 48}, {145, 30, 180},  {70, 240, 240}, {240, 50, 230},
                                            {210, 245, 60}, {250, 190, 212}, {0, 128, 128},  {170, 110, 40}};
  const auto* c = palette[((i % 12) + 12) % 12];
  return {c[0], c[1], c[2]};
}

}  // namespace tessera::apps::report
