// The COLMAP database writer (colmap_db.hpp).
#include "sfm/colmap_db.hpp"

#include <sqlite3.h>

#include <bit>
#include <utility>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::sfm {
namespace {

static_assert(std::endian::native == std::endian::little, "COLMAP's blobs are little-endian: byte-swap here first");

// COLMAP 4.2.1's tables (database_sqlite.cc CreateTables), column for column: names, types, keys, constraints and
// indexes as pycolmap 4.2.1 creates them. The image id check is kMaxNumImages.
constexpr const char* kSchema = R"sql(
CREATE TABLE rigs (
  rig_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
  ref_sensor_id INTEGER NOT NULL,
  ref_sensor_type INTEGER NOT NULL);
CREATE UNIQUE INDEX rig_ref_sensor_assignment ON rigs(ref_sensor_id, ref_sensor_type);
CREATE TABLE rig_sensors (
  rig_id INTEGER NOT NULL,
  sensor_id INTEGER NOT NULL,
  sensor_type INTEGER NOT NULL,
  sensor_from_rig BLOB,
  FOREIGN KEY(rig_id) REFERENCES rigs(rig_id) ON DELETE CASCADE);
CREATE UNIQUE INDEX rig_sensor_assignment ON rig_sensors(sensor_id, sensor_type);
CREATE TABLE cameras (
  camera_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
  model INTEGER NOT NULL,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  params BLOB,
  prior_focal_length INTEGER NOT NULL);
CREATE TABLE frames (
  frame_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
  rig_id INTEGER NOT NULL,
  FOREIGN KEY(rig_id) REFERENCES rigs(rig_id) ON DELETE CASCADE);
CREATE TABLE frame_data (
  frame_id INTEGER NOT NULL,
  data_id INTEGER NOT NULL,
  sensor_id INTEGER NOT NULL,
  sensor_type INTEGER NOT NULL,
  FOREIGN KEY(frame_id) REFERENCES frames(frame_id) ON DELETE CASCADE);
CREATE UNIQUE INDEX frame_sensor_assignment ON frame_data(data_id, sensor_type);
CREATE TABLE images (
  image_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
  name TEXT NOT NULL UNIQUE,
  camera_id INTEGER NOT NULL,
  CONSTRAINT image_id_check CHECK(image_id >= 0 and image_id < 2147483647),
  FOREIGN KEY(camera_id) REFERENCES cameras(camera_id));
CREATE UNIQUE INDEX index_name ON images(name);
CREATE TABLE pose_priors (
  pose_prior_id INTEGER PRIMARY KEY NOT NULL,
  corr_data_id INTEGER NOT NULL,
  corr_sensor_id INTEGER NOT NULL,
  corr_sensor_type INTEGER NOT NULL,
  position BLOB,
  position_covariance BLOB,
  gravity BLOB,
  coordinate_system INTEGER NOT NULL);
CREATE UNIQUE INDEX pose_prior_data_assignment ON pose_priors(corr_data_id, corr_sensor_id, corr_sensor_type);
CREATE TABLE keypoints (
  image_id INTEGER PRIMARY KEY NOT NULL,
  rows INTEGER NOT NULL,
  cols INTEGER NOT NULL,
  data BLOB,
  FOREIGN KEY(image_id) REFERENCES images(image_id) ON DELETE CASCADE);
CREATE TABLE descriptors (
  image_id INTEGER PRIMARY KEY NOT NULL,
  type INTEGER NOT NULL,
  rows INTEGER NOT NULL,
  cols INTEGER NOT NULL,
  data BLOB,
  FOREIGN KEY(image_id) REFERENCES images(image_id) ON DELETE CASCADE);
CREATE TABLE matches (
  pair_id INTEGER PRIMARY KEY NOT NULL,
  rows INTEGER NOT NULL,
  cols INTEGER NOT NULL,
  data BLOB);
CREATE TABLE two_view_geometries (
  pair_id INTEGER PRIMARY KEY NOT NULL,
  rows INTEGER NOT NULL,
  cols INTEGER NOT NULL,
  data BLOB,
  config INTEGER NOT NULL,
  F BLOB,
  E BLOB,
  H BLOB,
  qvec BLOB,
  tvec BLOB,
  camera1 BLOB,
  camera2 BLOB);
)sql";

/// Binds a row-major matrix blob: NULL when empty, as COLMAP's WriteDynamicMatrixBlob of an empty Eigen matrix.
int bind_blob(sqlite3_stmt* s, int col, const void* data, std::size_t bytes) {
  if (bytes == 0) return sqlite3_bind_null(s, col);
  return sqlite3_bind_blob64(s, col, data, bytes, SQLITE_STATIC);
}

}  // namespace

ColmapDatabase::ColmapDatabase(std::string path) : path_(std::move(path)) {
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(ErrorKind::Io, "cannot create the COLMAP database " + path_ + ": " + msg);
  }
  // A new file written in one transaction and renamed into place when complete: no journal needed.
  exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON;");
  exec(kSchema);
  exec(("PRAGMA user_version=" + std::to_string(kColmapSchemaVersion) + ";").c_str());
  exec("BEGIN;");
  camera_ = prepare(
      "INSERT INTO cameras(camera_id, model, width, height, params, prior_focal_length) "
      "VALUES(?, ?, ?, ?, ?, ?);");
  rig_ = prepare("INSERT INTO rigs(rig_id, ref_sensor_id, ref_sensor_type) VALUES(?, ?, ?);");
  image_ = prepare("INSERT INTO images(image_id, name, camera_id) VALUES(?, ?, ?);");
  frame_ = prepare("INSERT INTO frames(frame_id, rig_id) VALUES(?, ?);");
  frame_data_ = prepare("INSERT INTO frame_data(frame_id, data_id, sensor_id, sensor_type) VALUES(?, ?, ?, ?);");
  keypoints_ = prepare("INSERT INTO keypoints(image_id, rows, cols, data) VALUES(?, ?, ?, ?);");
  matches_ = prepare("INSERT INTO matches(pair_id, rows, cols, data) VALUES(?, ?, ?, ?);");
}

ColmapDatabase::~ColmapDatabase() {
  for (sqlite3_stmt* s : {camera_, rig_, image_, frame_, frame_data_, keypoints_, matches_}) sqlite3_finalize(s);
  if (db_) sqlite3_close(db_);  // an open transaction is rolled back
}

void ColmapDatabase::fail(const std::string& what) const {
  throw Error(ErrorKind::Io, "COLMAP database " + path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "closed"));
}

void ColmapDatabase::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw Error(ErrorKind::Io, "COLMAP database " + path_ + ": " + msg);
  }
}

sqlite3_stmt* ColmapDatabase::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) fail(std::string("cannot prepare ") + sql);
  return s;
}

void ColmapDatabase::step(sqlite3_stmt* s, const char* what) {
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc != SQLITE_DONE) fail(std::string("cannot write ") + what);
}

void ColmapDatabase::add_camera(std::int64_t camera_id, int model, std::int64_t width, std::int64_t height,
                                std::span<const double> params, bool prior_focal_length) {
  if (sqlite3_bind_int64(camera_, 1, camera_id) || sqlite3_bind_int64(camera_, 2, model) ||
      sqlite3_bind_int64(camera_, 3, width) || sqlite3_bind_int64(camera_, 4, height) ||
      bind_blob(camera_, 5, params.data(), params.size_bytes()) ||
      sqlite3_bind_int64(camera_, 6, prior_focal_length ? 1 : 0))
    fail("cannot bind a camera");
  step(camera_, "a camera");
}

void ColmapDatabase::add_rig(std::int64_t rig_id, std::int64_t camera_id) {
  if (sqlite3_bind_int64(rig_, 1, rig_id) || sqlite3_bind_int64(rig_, 2, camera_id) ||
      sqlite3_bind_int64(rig_, 3, kColmapSensorCamera))
    fail("cannot bind a rig");
  step(rig_, "a rig");
}

void ColmapDatabase::add_image(std::int64_t image_id, const std::string& name, std::int64_t camera_id) {
  if (sqlite3_bind_int64(image_, 1, image_id) ||
      sqlite3_bind_text64(image_, 2, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8) ||
      sqlite3_bind_int64(image_, 3, camera_id))
    fail("cannot bind image " + name);
  step(image_, "an image");
}

void ColmapDatabase::add_frame(std::int64_t frame_id, std::int64_t rig_id, std::int64_t image_id,
                               std::int64_t camera_id) {
  if (sqlite3_bind_int64(frame_, 1, frame_id) || sqlite3_bind_int64(frame_, 2, rig_id)) fail("cannot bind a frame");
  step(frame_, "a frame");
  if (sqlite3_bind_int64(frame_data_, 1, frame_id) || sqlite3_bind_int64(frame_data_, 2, image_id) ||
      sqlite3_bind_int64(frame_data_, 3, camera_id) || sqlite3_bind_int64(frame_data_, 4, kColmapSensorCamera))
    fail("cannot bind a frame's data");
  step(frame_data_, "a frame's data");
}

void ColmapDatabase::add_keypoints(std::int64_t image_id, std::span<const float> xy) {
  if (sqlite3_bind_int64(keypoints_, 1, image_id) ||
      sqlite3_bind_int64(keypoints_, 2, static_cast<std::int64_t>(xy.size() / 2)) ||
      sqlite3_bind_int64(keypoints_, 3, 2) || bind_blob(keypoints_, 4, xy.data(), xy.size_bytes()))
    fail("cannot bind keypoints");
  step(keypoints_, "keypoints");
}

void ColmapDatabase::add_matches(std::int64_t pair_id, std::span<const std::uint32_t> pairs) {
  if (sqlite3_bind_int64(matches_, 1, pair_id) ||
      sqlite3_bind_int64(matches_, 2, static_cast<std::int64_t>(pairs.size() / 2)) ||
      sqlite3_bind_int64(matches_, 3, 2) || bind_blob(matches_, 4, pairs.data(), pairs.size_bytes()))
    fail("cannot bind matches");
  step(matches_, "matches");
}

void ColmapDatabase::commit() {
  exec("COMMIT;");
  for (sqlite3_stmt** s : {&camera_, &rig_, &image_, &frame_, &frame_data_, &keypoints_, &matches_}) {
    sqlite3_finalize(*s);
    *s = nullptr;
  }
  if (sqlite3_close(db_) != SQLITE_OK) fail("cannot close");
  db_ = nullptr;
}

}  // namespace superpoint_rt::sfm
