// Batch extraction: one run (skip / resume against the existing output, the decode and network pipeline, part
// files, the final merge, the report). See batch.hpp.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "util/file.hpp"

namespace superpoint_rt::batch {
namespace fs = std::filesystem;

std::string Report::json() const {
  nlohmann::json j;
  j["output"] = output;
  j["shard"] = shard;
  j["total"] = total;
  j["skipped"] = skipped;
  j["processed"] = processed;
  j["failed_count"] = failed.size();
  j["failed"] = nlohmann::json::array();
  for (const auto& f : failed) j["failed"].push_back({{"name", f.name}, {"path", f.path}, {"error", f.error}});
  j["seconds"] = seconds;
  j["images_per_s"] = images_per_s;
  return j.dump(2) + "\n";
}

Report run(const SuperPoint& model, const std::vector<ImageEntry>& images, const Params& params,
           const RunConfig& config) {
  const auto t0 = std::chrono::steady_clock::now();
  Report rep;
  rep.total = images.size();
  rep.output = config.output;
  rep.shard = config.shard;
  const bool h5 = !config.output.empty();
  const std::string parts_dir = config.output + ".parts";
  std::set<std::string> existing;
  // With overwrite, the old output and parts go on a thread of their own, beside the network: unlinking a large
  // feature file blocks (9 ms for the 44 images of ../shared/images on ext4, with both cores idle). The writer
  // touches the output and the parts folder only after `clearing` has finished (join_clearing).
  std::jthread clearing;
  if (h5) {
    std::error_code ec;
    if (config.overwrite) {
      clearing = std::jthread([output = config.output, parts_dir] {
        std::error_code e;
        fs::remove(output, e);
        fs::remove_all(parts_dir, e);
      });
    } else {
      if (fs::exists(config.output) || !part_files(config.output).empty()) {
        check_existing_output(config);
        if (fs::exists(config.output))
          for (auto& n : list_h5_names(config.output)) existing.insert(n);
        for (const auto& p : part_files(config.output))
          for (auto& n : list_h5_names(p)) existing.insert(n);
      }
      // Temporary part files of a killed run hold no finished work.
      for (auto it = fs::directory_iterator(parts_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
        if (it->path().extension() == ".tmp") fs::remove(it->path(), ec);
    }
  }
  const auto join_clearing = [&clearing] {
    if (clearing.joinable()) clearing.join();
  };
  std::vector<ImageEntry> todo;
  for (const auto& e : images)
    if (existing.count(e.name))
      ++rep.skipped;
    else
      todo.push_back(e);

  PartWriter writer(parts_dir, config.as_half, resolve(params).output);
  const std::size_t chunk = std::max<std::size_t>(1, config.chunk);
  // One list for the whole run, its results streamed in input order (run_each with a sink): the network never drains
  // at a chunk boundary, the results of only a few images are held at a time, and each chunk's part file is written
  // while the network runs the next images.
  std::vector<ImageInput> inputs;
  inputs.reserve(todo.size());
  for (const auto& e : todo) inputs.push_back(ImageInput::file(e.path));
  std::size_t ok = 0;  // images of the current chunk that succeeded
  // The last chunk's images go straight into the merged output (PartWriter::start_final), whose merge of the parts
  // starts with that chunk's first result, while the network computes the rest of it.
  const std::size_t last_chunk = todo.empty() ? 0 : (todo.size() - 1) / chunk * chunk;
  model.run_each(inputs, params, config.workers, [&](std::size_t i, std::variant<Features, Error>&& r) {
    join_clearing();
    if (h5 && i == last_chunk) writer.start_final(part_files(config.output), config.output);
    if (auto* failure = std::get_if<Error>(&r)) {
      rep.failed.push_back({todo[i].name, todo[i].path, failure->what()});
    } else {
      const Features& f = std::get<Features>(r);
      bool written = true;
      try {
        if (config.on_result) config.on_result(todo[i], f);
      } catch (const Error& e) {
        rep.failed.push_back({todo[i].name, todo[i].path, e.what()});
        written = false;
      }
      if (written) {
        if (h5) writer.add(todo[i].name, f);
        ++ok;
      }
    }
    const std::size_t end = i + 1;
    if (end % chunk != 0 && end != todo.size()) return;
    if (h5 && end < todo.size()) writer.commit();
    rep.processed += ok;
    ok = 0;
    if (config.on_progress)
      config.on_progress(end, todo.size(),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
  join_clearing();
  if (h5 && todo.empty()) {  // nothing new: fold in the parts of killed runs, or write an empty output
    const auto parts = part_files(config.output);
    if (!parts.empty() || !fs::exists(config.output)) writer.start_final(parts, config.output);
  }
  if (h5 && writer.finishing()) {
    writer.finish();
    std::error_code ec;
    fs::remove_all(parts_dir, ec);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.images_per_s = rep.seconds > 0 ? static_cast<double>(rep.processed) / rep.seconds : 0;
  const std::string report_path = !config.report.empty() ? config.report : h5 ? config.output + ".report.json" : "";
  if (!report_path.empty()) {
    util::write_file_atomic(report_path, rep.json());
  }
  return rep;
}

}  // namespace superpoint_rt::batch
