// Hugging Face hub, internal: the HTTP requests (libcurl) of a download.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/hub_cache.hpp"

namespace superpoint_rt::model::hub {

/// What the HEAD of one file tells: the commit, the blob name, where to GET it, its size when known.
struct FileMeta {
  std::string commit, etag, location;
  std::optional<std::uint64_t> size;
};

/// urllib.parse.quote: keeps A-Z a-z 0-9 _ . - ~ (and '/' when `keep_slash`), percent-encodes every other byte.
std::string url_quote(const std::string& s, bool keep_slash);

/// get_hf_file_metadata: HEAD, following redirects while they stay on the same or a hub origin. Records
/// .no_exist/{commit}/{file} after an EntryNotFound 404. Throws Error (NotFound / Io) as resolve_model documents.
FileMeta fetch_metadata(const Target& t, const std::string& revision, const std::string& file,
                        const std::string& endpoint, const std::optional<std::string>& token);

/// _download_to_tmp_and_move: GET into blobs/{etag}.{8 hex}.incomplete, check the size, rename to `blob`.
void download_blob(const Target& t, const std::string& file, const FileMeta& m, const fs::path& blob,
                   const std::string& endpoint, const std::optional<std::string>& token, const std::string& head_url);

}  // namespace superpoint_rt::model::hub
