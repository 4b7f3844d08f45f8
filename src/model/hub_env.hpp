// Hugging Face hub, internal: the environment as huggingface_hub 2.4 reads it (constants.py, utils/_auth.py). The
// cache folder itself (hub_cache_dir) is declared in hub.hpp.
#pragma once

#include <optional>
#include <string>

namespace superpoint_rt::model::hub {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";

/// The value of an environment variable; nullopt when unset. Python's os.getenv treats "" as set; callers decide.
std::optional<std::string> env(const char* name);
/// constants.HF_HUB_OFFLINE: _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")).
bool env_offline();
/// os.path.expanduser for "~" and "~/..." (the only forms the hub variables use).
std::string expand_user(const std::string& p);
/// expandvars(expanduser(p)).
std::string expand(const std::string& p);
/// constants.HF_HOME: expandvars(expanduser($HF_HOME or $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface)).
std::string hf_home();
/// The token huggingface_hub would send implicitly (get_token_to_send(None)).
std::optional<std::string> hub_token();
/// constants.ENDPOINT: $HF_ENDPOINT (default https://huggingface.co) without trailing slashes.
std::string hub_endpoint();
/// HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT (seconds); non-numbers and non-positive values keep the default.
long env_seconds(const char* name);

}  // namespace superpoint_rt::model::hub
