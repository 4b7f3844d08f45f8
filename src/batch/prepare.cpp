// Batch extraction: the checks of a run's options (images, shard, skip / resume / overwrite, output), done once here
// for `superpoint-rt extract` and superpoint_rt.extract_folder, with messages in the caller's spelling. See
// batch.hpp.
#include <filesystem>
#include <string>

#include "batch/batch.hpp"

namespace superpoint_rt::batch {

void check_existing_output(const RunConfig& config) {
  if (config.output.empty() || config.skip_existing || config.overwrite) return;
  if (std::filesystem::exists(config.output) || !part_files(config.output).empty()) {
    const Spelling& s = config.spelling;
    throw Error(ErrorKind::InvalidArgument, std::string(s.caller) + ": output " + config.output + " exists: use " +
                                                s.skip_existing + " to continue it or " + s.overwrite);
  }
}

std::vector<ImageEntry> prepare(const ListSpec& list, const std::string& shard, RunConfig& config) {
  const Spelling& s = config.spelling;
  const std::string caller = std::string(s.caller) + ": ";
  if (list.inputs.empty() && list.image_list.empty()) throw Error(ErrorKind::InvalidArgument, caller + s.no_images);
  if (config.skip_existing && config.overwrite) {
    throw Error(ErrorKind::InvalidArgument, caller + s.skip_existing + " and " + s.overwrite + " conflict");
  }
  if (config.output.empty() && (config.skip_existing || config.overwrite || config.as_half)) {
    throw Error(ErrorKind::InvalidArgument,
                caller + s.skip_existing + ", " + s.overwrite + " and " + s.as_half + " need " + s.output);
  }
  int index = 0, count = 1;
  if (!shard.empty()) std::tie(index, count) = parse_shard(shard, s.shard);
  config.shard = shard;
  std::vector<ImageEntry> images = batch::shard(list_images(list), index, count);
  // Refuse an existing output before the caller loads the model (run() checks again).
  check_existing_output(config);
  return images;
}

}  // namespace superpoint_rt::batch
