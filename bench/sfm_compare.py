"""From a folder of photos to a COLMAP reconstruction, three ways, measured side by side (docs/SFM.md):

  superpoint-rt  superpoint-rt extract (hloc:superpoint_aachen) -> pairs -> match (NN-mutual) -> colmap, then
                 pycolmap.verify_matches + pycolmap.incremental_mapping;
  hloc           the same feature file, then hloc's own pairs_from_exhaustive, match_features (NN-mutual) and
                 reconstruction.py import (create_empty_db, import_images, import_features, import_matches), then the
                 same verification and mapping;
  pycolmap SIFT  pycolmap.extract_features (SIFT) + match_exhaustive (with its verification) + incremental_mapping.

Printed per pipeline: registered images, 3D points, mean track length, mean reprojection error (px) of the largest
model, and the median wall time of each stage over --repeat runs (the pipelines interleaved, their order rotated each
run), with the stage's peak RSS. Every stage runs in its own process (the RSS is that process's). Run r seeds COLMAP
with r: the RANSAC of the verification (RANSACOptions.random_seed; pycolmap.set_random_seed does not reach it) and the
mapper (random_seed, on one thread, whose bundle adjustments then run in a fixed order), so a run is reproducible and
the runs show how much a reconstruction of a few photos depends on RANSAC's draws: the registered images of every run
are listed, the other figures are medians. With hloc, the matches of the two databases are compared after every run
(the same feature file: equal sets of matches per pair unless a near-tie of similarities went the other way; the row
order differs in the pairs hloc's pairs_from_exhaustive lists the other way round, and COLMAP's RANSAC draws depend on
it).
PYTHONHASHSEED is fixed (hloc's list_h5_names returns a set: its pair order would change).

hloc is not installed by the project: give --hloc a folder that holds its `hloc` package (a checkout of
cvg/Hierarchical-Localization; it needs torch, h5py, tqdm, opencv and pycolmap, which the test venv has). Without
it the hloc column is left out.

  .venv/bin/python bench/sfm_compare.py --cli build/src/cli/superpoint-rt --hloc /tmp/hloc [--repeat 5]
                                        [--scene sacre|berlin | --images DIR] [--plot A B] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SCENES = {  # photos of ../shared/images (MANIFEST.tsv)
    "sacre": ["hloc_sacre_02928139_3448003521.jpg", "hloc_sacre_03903474_1471484089.jpg",
              "hloc_sacre_10265353_3838484249.jpg", "hloc_sacre_71295362_4051449754.jpg", "lg_sacre_coeur1.jpg",
              "lg_sacre_coeur2.jpg"],
    "berlin": ["opensfm_berlin_01.jpg", "opensfm_berlin_02.jpg", "opensfm_berlin_03.jpg"],
}


def run_stage(cmd, env, seed: int) -> tuple[float, float]:
    """Runs one stage in its own process: (wall seconds, peak RSS in MiB)."""
    env = {**(env or os.environ), "SFM_SEED": str(seed), "PYTHONHASHSEED": "0"}
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    out, err = p.stdout.read().decode(errors="replace"), p.stderr.read().decode(errors="replace")
    p.stdout.close()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{out[-2000:]}\n{err[-4000:]}")
    return wall, usage.ru_maxrss / 1024.0


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def map_code(db, images, out) -> str:
    return (f"import json, os, pycolmap\n"
            f"pycolmap.logging.minloglevel = 2\n"
            f"seed = int(os.environ['SFM_SEED'])\n"
            f"maps = pycolmap.incremental_mapping({str(db)!r}, {str(images)!r}, {str(out)!r}, "
            f"options=dict(random_seed=seed, num_threads=1))\n"
            f"best = max(maps.values(), key=lambda r: r.num_reg_images()) if maps else None\n"
            f"s = dict(registered=best.num_reg_images() if best else 0, points=best.num_points3D() if best else 0,\n"
            f"         track=best.compute_mean_track_length() if best else 0,\n"
            f"         reproj=best.compute_mean_reprojection_error() if best else 0)\n"
            f"open({str(out / 'stats.json')!r}, 'w').write(json.dumps(s))\n")


def verify_code(db, pairs) -> str:
    # hloc's estimation_and_geometric_verification options, seeded
    return (f"import os, pycolmap\npycolmap.logging.minloglevel = 2\n"
            f"ransac = dict(max_num_trials=20000, min_inlier_ratio=0.1, random_seed=int(os.environ['SFM_SEED']))\n"
            f"pycolmap.verify_matches({str(db)!r}, {str(pairs)!r}, options=dict(ransac=ransac))\n")


def matches_table(db) -> dict:
    """pair_id -> (blob, the set of its (i, j) rows) of a COLMAP database's matches table."""
    con = sqlite3.connect(str(db))
    try:
        out = {}
        for pair_id, data in con.execute("SELECT pair_id, data FROM matches"):
            v = memoryview(data or b"").cast("I")
            out[pair_id] = (bytes(data or b""), {(v[k], v[k + 1]) for k in range(0, len(v), 2)})
        return out
    finally:
        con.close()


def compare_matches(ours, hloc) -> dict:
    """Whether two databases hold the same matches, as sets per pair, and in how many pairs the rows come in another
    order (a pair hloc lists the other way round: its matches0 is indexed by the other image)."""
    a, b = matches_table(ours), matches_table(hloc)
    return {"same_sets": a.keys() == b.keys() and all(a[k][1] == b[k][1] for k in a),
            "pairs": len(a), "other_order": sum(1 for k in a if k in b and a[k][0] != b[k][0])}


def pipelines(a, images: pathlib.Path, work: pathlib.Path):
    """name -> (list of (stage, command, env)), shared setup done here."""
    cli, weights = a.cli, a.weights
    hloc_env = {**os.environ, "PYTHONPATH": str(a.hloc)} if a.hloc else None
    feats = work / "feats.h5"
    out = {}
    ours = work / "ours"
    ours_pairs, ours_matches, ours_db = ours / "pairs.txt", ours / "matches.h5", ours / "database.db"
    stages = [("extract", [cli, "extract", images, "--preset", "hloc:superpoint_aachen", "--as-half", "-o", feats,
                           "--weights", weights, "--quiet", "--overwrite"], None),
              ("pairs", [cli, "pairs", "--exhaustive", feats, "-o", ours_pairs, "--quiet"], None),
              ("match", [cli, "match", "--features", feats, "--pairs", ours_pairs, "--conf", "NN-mutual", "-o",
                         ours_matches, "--quiet"], None),
              ("import", [cli, "colmap", "--features", feats, "--matches", ours_matches, "--pairs", ours_pairs,
                           "--images", images, "-o", ours_db, "--overwrite", "--quiet"], None),
               ("verify", py(verify_code(ours_db, ours_pairs)), None),
               ("map", py(map_code(ours_db, images, ours / "sfm")), None)]
    out["superpoint-rt"] = (ours, stages, [])
    if a.hloc:
        h = work / "hloc"
        hp, hm, hdb = h / "pairs.txt", h / "matches.h5", h / "database.db"
        imp = (f"import pathlib, pycolmap\nfrom hloc import reconstruction as R, triangulation as T\n"
               f"db = pathlib.Path({str(hdb)!r})\nR.create_empty_db(db)\n"
               f"R.import_images(pathlib.Path({str(images)!r}), db, pycolmap.CameraMode.PER_IMAGE)\n"
               f"ids = R.get_image_ids(db)\n"
               f"with pycolmap.Database.open(db) as d:\n"
               f"    T.import_features(ids, d, pathlib.Path({str(feats)!r}))\n"
               f"    T.import_matches(ids, d, pathlib.Path({str(hp)!r}), pathlib.Path({str(hm)!r}))\n")
        out["hloc"] = (h, [
            ("pairs", py(f"from hloc import pairs_from_exhaustive as p; import pathlib\n"
                         f"p.main(pathlib.Path({str(hp)!r}), features=pathlib.Path({str(feats)!r}))"), hloc_env),
            ("match", py(_hloc_match(feats, hp, hm)), hloc_env),
            ("import", py(imp), hloc_env),
            ("verify", py(verify_code(hdb, hp)), None),
            ("map", py(map_code(hdb, images, h / "sfm")), None)], ["extract: the superpoint-rt feature file"])
    s = work / "sift"
    sdb = s / "database.db"
    out["pycolmap SIFT"] = (s, [
        ("extract", py(f"import pycolmap\npycolmap.logging.minloglevel = 2\n"
                       f"pycolmap.extract_features({str(sdb)!r}, {str(images)!r}, "
                       f"camera_mode=pycolmap.CameraMode.PER_IMAGE)"), None),
        ("match", py(f"import os, pycolmap\npycolmap.logging.minloglevel = 2\n"
                     f"ransac = dict(random_seed=int(os.environ['SFM_SEED']))\n"
                     f"pycolmap.match_exhaustive({str(sdb)!r}, verification_options=dict(ransac=ransac))"), None),
        ("map", py(map_code(sdb, images, s / "sfm")), None)], ["match includes COLMAP's verification"])
    return out


def _hloc_match(feats, pairs, matches) -> str:
    return (f"import pathlib\nfrom hloc import match_features as m\n"
            f"m.main(m.confs['NN-mutual'], pathlib.Path({str(pairs)!r}), features=pathlib.Path({str(feats)!r}), "
            f"matches=pathlib.Path({str(matches)!r}), overwrite=True)\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=str(HERE.parent / "build" / "src" / "cli" / "superpoint-rt"))
    shared = pathlib.Path(os.environ.get("SUPERPOINT_RT_SHARED", HERE.parents[1] / "shared"))
    ap.add_argument("--weights", default=str(shared / "weights" / "superpoint"))
    ap.add_argument("--images", type=pathlib.Path, help="image folder (default: --scene's photos)")
    ap.add_argument("--scene", choices=list(SCENES), default="sacre",
                    help="photos of ../shared/images: sacre (six of the Sacre Coeur) or berlin (three street views)")
    ap.add_argument("--hloc", type=pathlib.Path, help="folder holding hloc's `hloc` package")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", type=pathlib.Path, help="working folder (default: a temporary one, removed)")
    ap.add_argument("--plot", nargs=2, metavar=("NAME0", "NAME1"),
                    help="also write pair.png: plot-matches of this pair coloured by COLMAP's verification")
    ap.add_argument("--plot-height", type=int, default=0)
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args()
    work = a.work or pathlib.Path(tempfile.mkdtemp(prefix="sfm_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        images = a.images
        if images is None:
            images = work / "images"
            images.mkdir(exist_ok=True)
            for n in SCENES[a.scene]:
                if not (images / n).exists():
                    (images / n).symlink_to(shared / "images" / n)
        images = images.resolve()
        plan = pipelines(a, images, work)
        times = {name: {} for name in plan}
        rss = {name: {} for name in plan}
        stats = {name: [] for name in plan}
        same_matches = []  # per run: compare_matches of superpoint-rt's and hloc's databases
        names = list(plan)
        for r in range(a.repeat):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                folder, stages, _ = plan[name]
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                for stage, cmd, env in stages:
                    wall, peak = run_stage([str(c) for c in cmd], env, r)
                    times[name].setdefault(stage, []).append(wall)
                    rss[name][stage] = max(rss[name].get(stage, 0.0), peak)
                stats[name].append(json.loads((folder / "sfm" / "stats.json").read_text()))
            if "hloc" in plan:
                same_matches.append(compare_matches(plan["superpoint-rt"][0] / "database.db",
                                                    plan["hloc"][0] / "database.db"))
        n_images = sum(1 for _ in images.iterdir())
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   "?")
        print(f"{n_images} images in {images}; {os.cpu_count()} cores ({cpu}); medians of {a.repeat} runs, "
              f"pipelines interleaved")
        print(f"{'pipeline':15} {'registered (each run)':>22} {'points':>7} {'track':>6} {'reproj px':>9} "
              f"{'total s':>8}  stages: median s (peak RSS MiB)")
        result = {}
        for name in names:
            med = {k: statistics.median(v) for k, v in times[name].items()}
            runs = stats[name]
            st = {k: statistics.median(r[k] for r in runs) for k in ("points", "track", "reproj")}
            registered = ",".join(str(r["registered"]) for r in runs) + f" of {n_images}"
            total = sum(med.values())
            stage_text = ", ".join(f"{k} {v:.2f} ({rss[name][k]:.0f})" for k, v in med.items())
            print(f"{name:15} {registered:>22} {st['points']:>7.0f} {st['track']:>6.2f} {st['reproj']:>9.3f} "
                  f"{total:>8.2f}  {stage_text}")
            for note in plan[name][2]:
                print(f"{'':15}   note: {note}")
            result[name] = {"runs": runs, "median": st, "median_s": med, "peak_rss_mib": rss[name],
                            "runs_s": times[name], "notes": plan[name][2]}
        if same_matches:
            c = same_matches[-1]
            print(f"superpoint-rt's and hloc's databases hold the same matches in "
                  f"{sum(m['same_sets'] for m in same_matches)} of {len(same_matches)} runs; in {c['other_order']} of "
                  f"{c['pairs']} pairs in another row order (hloc lists those pairs the other way round)")
            result["same_matches_as_hloc"] = same_matches
        if a.plot:
            ours = plan["superpoint-rt"][0]
            png = work / "pair.png"
            cmd = [a.cli, "plot-matches", *a.plot, "--features", work / "feats.h5", "--matches",
                   ours / "matches.h5", "--images", images, "--database", ours / "database.db", "-o", png]
            if a.plot_height:
                cmd += ["--height", str(a.plot_height)]
            print(subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout.strip())
            result["plot"] = str(png)
        if a.json:
            a.json.write_text(json.dumps(result, indent=1))
    finally:
        if a.work is None and not a.plot:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
