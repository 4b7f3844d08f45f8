// Batch extraction: one run (skip / resume against the existing output, the decode and network pipeline, part
// files, the final merge, the report). See batch.hpp.
#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

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
  if (h5) {
    std::error_code ec;
    if (config.overwrite) {
      fs::remove(config.output, ec);
      fs::remove_all(parts_dir, ec);
    } else if (fs::exists(config.output) || !part_files(config.output).empty()) {
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
  std::vector<ImageEntry> todo;
  for (const auto& e : images)
    if (existing.count(e.name))
      ++rep.skipped;
    else
      todo.push_back(e);

  PartWriter writer(parts_dir, config.as_half, resolve(params).output);
  const std::size_t chunk = std::max<std::size_t>(1, config.chunk);
  // Two chunks in flight: the workers of chunk k+1 decode and resize while the network runs the end of chunk k, so
  // the pipeline does not drain at every chunk boundary even though chunks (= commits) are small.
  using Results = std::vector<std::variant<Features, Error>>;
  const auto launch = [&](std::size_t start) {
    return std::async(std::launch::async, [&model, &params, &todo, &config, start, chunk] {
      std::vector<ImageInput> inputs;
      for (std::size_t i = start; i < std::min(todo.size(), start + chunk); ++i)
        inputs.push_back(ImageInput::file(todo[i].path));
      return model.run_each(inputs, params, config.workers);
    });
  };
  std::deque<std::future<Results>> in_flight;
  std::size_t next = 0;
  for (; next < todo.size() && in_flight.size() < 2; next += chunk) in_flight.push_back(launch(next));
  for (std::size_t start = 0; start < todo.size(); start += chunk) {
    Results results = in_flight.front().get();
    in_flight.pop_front();
    if (next < todo.size()) {
      in_flight.push_back(launch(next));
      next += chunk;
    }
    const std::size_t end = std::min(todo.size(), start + chunk);
    std::size_t ok = 0;
    for (std::size_t i = start; i < end; ++i) {
      auto& r = results[i - start];
      if (auto* e = std::get_if<Error>(&r)) {
        rep.failed.push_back({todo[i].name, todo[i].path, e->what()});
        continue;
      }
      const Features& f = std::get<Features>(r);
      try {
        if (config.on_result) config.on_result(todo[i], f);
      } catch (const Error& e) {
        rep.failed.push_back({todo[i].name, todo[i].path, e.what()});
        continue;
      }
      if (h5) writer.add(todo[i].name, f);
      ++ok;
    }
    if (h5) writer.commit();
    rep.processed += ok;
    if (config.on_progress)
      config.on_progress(end, todo.size(),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (h5) {
    const auto parts = part_files(config.output);
    if (!parts.empty() || !fs::exists(config.output)) {
      merge_h5(parts, config.output, /*overwrite=*/true, /*include_existing=*/true);
      std::error_code ec;
      fs::remove_all(parts_dir, ec);
    }
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
