// Writing a COLMAP 4 database (SQLite): the tables, columns and blob layouts of COLMAP's
// src/colmap/scene/database_sqlite.cc as pycolmap 4.2.1 creates them (tests/sfm/test_colmap.py compares the schema
// with pycolmap's). Blobs are little-endian row-major matrices, as COLMAP's WriteDynamicMatrixBlob stores Eigen data:
// rows and cols in their own columns, and NULL data for an empty matrix.
//
// Ownership and thread-safety: one ColmapDatabase owns one SQLite connection; use it from one thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace superpoint_rt::sfm {

/// COLMAP's enums and constants used by the writer (src/colmap/sensor/models.h, util/types.h, scene/database.h).
inline constexpr int kColmapSimpleRadial = 2;                    // CameraModelId::kSimpleRadial
inline constexpr int kColmapSensorCamera = 0;                    // SensorType::CAMERA
inline constexpr std::int64_t kColmapMaxNumImages = 2147483647;  // kMaxNumImages: image ids below it
/// The schema written: COLMAP 4.2.1's, whose PRAGMA user_version is MakeDatabaseVersionNumber(4, 2, 1, 0).
inline constexpr int kColmapSchemaVersion = 4020100;

class ColmapDatabase {
 public:
  /// Creates `path` (which must not exist), its tables, and starts the one transaction of the writer. Journaling is
  /// off (a failed export deletes the file: see write_colmap_database). Error(Io) naming the path and SQLite's
  /// message.
  explicit ColmapDatabase(std::string path);
  /// Closes the connection; without commit() everything written is discarded.
  ~ColmapDatabase();
  ColmapDatabase(const ColmapDatabase&) = delete;
  ColmapDatabase& operator=(const ColmapDatabase&) = delete;

  /// cameras(camera_id, model, width, height, params (float64 blob), prior_focal_length).
  void add_camera(std::int64_t camera_id, int model, std::int64_t width, std::int64_t height,
                  std::span<const double> params, bool prior_focal_length);
  /// rigs(rig_id, ref_sensor_id = camera_id, ref_sensor_type = CAMERA); a one-camera rig has no rig_sensors row.
  void add_rig(std::int64_t rig_id, std::int64_t camera_id);
  /// images(image_id, name, camera_id).
  void add_image(std::int64_t image_id, const std::string& name, std::int64_t camera_id);
  /// frames(frame_id, rig_id) and its frame_data(frame_id, data_id = image_id, sensor_id = camera_id, CAMERA).
  void add_frame(std::int64_t frame_id, std::int64_t rig_id, std::int64_t image_id, std::int64_t camera_id);
  /// keypoints(image_id, rows = N, cols = 2, float32 blob), `xy` N x 2.
  void add_keypoints(std::int64_t image_id, std::span<const float> xy);
  /// matches(pair_id, rows = K, cols = 2, uint32 blob), `pairs` K x 2 indices with the smaller image id's first.
  void add_matches(std::int64_t pair_id, std::span<const std::uint32_t> pairs);
  /// Commits and closes. Error(Io) when SQLite cannot.
  void commit();

 private:
  void exec(const char* sql);
  sqlite3_stmt* prepare(const char* sql);
  void step(sqlite3_stmt* stmt, const char* what);
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt *camera_ = nullptr, *rig_ = nullptr, *image_ = nullptr, *frame_ = nullptr, *frame_data_ = nullptr,
               *keypoints_ = nullptr, *matches_ = nullptr;
};

}  // namespace superpoint_rt::sfm
