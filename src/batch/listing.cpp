// Batch extraction: listing the images of a run (folders, files, an image list) and sharding the list. See
// batch.hpp.
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "batch/batch.hpp"

namespace superpoint_rt::batch {
namespace fs = std::filesystem;
namespace {

// ---- listing -----------------------------------------------------------------------------------------------------

bool default_image_file(const fs::path& p) {
  static const char* kExt[] = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp",
                               ".tif", ".tiff", ".pgm", ".ppm", ".pnm", ".pbm"};
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(std::begin(kExt), std::end(kExt), [&](const char* k) { return e == k; });
}

bool matches(const std::vector<std::string>& globs, const std::string& rel) {
  const std::string base = rel.substr(rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/') + 1);
  for (const auto& g : globs)
    if (fnmatch(g.c_str(), g.find('/') != std::string::npos ? rel.c_str() : base.c_str(), 0) == 0) return true;
  return false;
}

/// `p` relative to `root` in POSIX form; throws when p is outside root.
std::string relative_name(const fs::path& p, const fs::path& root) {
  // Lexical, not canonical: the images may be symbolic links to files elsewhere; their names stay in the tree.
  const fs::path rel = fs::absolute(p).lexically_normal().lexically_relative(fs::absolute(root).lexically_normal());
  const std::string s = rel.generic_string();
  if (s.empty() || s == "." || s.rfind("..", 0) == 0)
    throw Error(ErrorKind::InvalidArgument, "image " + p.string() + " is not inside the image root " + root.string());
  return s;
}

}  // namespace

std::vector<ImageEntry> list_images(const ListSpec& spec) {
  std::vector<ImageEntry> out;
  for (const auto& in : spec.inputs) {
    std::error_code ec;
    const auto st = fs::status(in, ec);
    // A missing file stays in the list: it fails alone (in the report) and the run continues.
    if (fs::is_directory(st)) {
      const fs::path root = spec.image_root.empty() ? fs::path(in) : fs::path(spec.image_root);
      std::vector<ImageEntry> found;
      for (auto it = fs::recursive_directory_iterator(in, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const std::string rel = it->path().lexically_relative(in).generic_string();
        if (spec.globs.empty() ? !default_image_file(it->path()) : !matches(spec.globs, rel)) continue;
        found.push_back({relative_name(it->path(), root), it->path().string()});
      }
      if (ec) throw Error(ErrorKind::Io, "cannot list folder " + in + ": " + ec.message());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      const std::string name =
          spec.image_root.empty() ? fs::path(in).filename().string() : relative_name(in, spec.image_root);
      out.push_back({name, in});
    }
  }
  if (!spec.image_list.empty()) {
    std::ifstream f(spec.image_list);
    if (!f) throw Error(ErrorKind::NotFound, "cannot read image list " + spec.image_list);
    const fs::path root = spec.image_root.empty() ? fs::path(".") : fs::path(spec.image_root);
    std::string line;
    while (std::getline(f, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      const std::string name = fs::path(line).lexically_normal().generic_string();
      if (fs::path(name).is_absolute() || name.rfind("..", 0) == 0)
        throw Error(ErrorKind::InvalidArgument,
                    "image list " + spec.image_list + ": '" + line + "' is not a path relative to the image root");
      out.push_back({name, (root / name).string()});
    }
  }
  std::sort(out.begin(), out.end(), [](const ImageEntry& a, const ImageEntry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      throw Error(ErrorKind::InvalidArgument, "two images have the name '" + out[i].name + "': " + out[i - 1].path +
                                                  " and " + out[i].path + " (use --image-root)");
  return out;
}

std::pair<int, int> parse_shard(const std::string& text, const std::string& option) {
  const auto slash = text.find('/');
  const auto bad = [&] {
    return Error(ErrorKind::InvalidArgument, option + ": '" + text + "' is not i/n with 0 <= i < n <= 1000000");
  };
  if (slash == std::string::npos) throw bad();
  try {
    std::size_t a = 0, b = 0;
    const std::string si = text.substr(0, slash), sn = text.substr(slash + 1);
    const long i = std::stol(si, &a), n = std::stol(sn, &b);
    if (a != si.size() || b != sn.size() || i < 0 || n < 1 || i >= n || n > 1000000) throw bad();
    return {static_cast<int>(i), static_cast<int>(n)};
  } catch (const std::logic_error&) {
    throw bad();
  }
}

std::vector<ImageEntry> shard(const std::vector<ImageEntry>& images, int index, int count) {
  std::vector<ImageEntry> out;
  for (std::size_t i = static_cast<std::size_t>(index); i < images.size(); i += static_cast<std::size_t>(count))
    out.push_back(images[i]);
  return out;
}

}  // namespace superpoint_rt::batch
