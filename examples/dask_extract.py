"""Distributed SuperPoint extraction with Dask: every worker loads the model ONCE (a worker plugin), runs shards of
the sorted image list into its own hloc feature file (shard-I-of-N.h5, resumable), and the client merges the shards
into one file that equals a single-machine `superpoint-rt extract --output` run bit for bit.

    # a local cluster of 2 worker processes on this machine
    python examples/dask_extract.py IMAGES/ --output features.h5 --local-workers 2
    # a real cluster (`dask scheduler` + `dask worker tcp://host:8786 --nworkers 1 --nthreads 1` on each machine);
    # IMAGES/ and the output folder must be on a file system every worker sees (NFS, a mounted bucket, ...)
    python examples/dask_extract.py /data/images --output /data/features.h5 --scheduler tcp://host:8786

Needs `pip install distributed` and the superpoint_rt package on every worker. See docs/SCALING.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import distributed

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import weights as default_weights  # noqa: E402

PLUGIN_NAME = "superpoint-rt-model"


class ModelPlugin(distributed.WorkerPlugin):
    """Loads one BatchExtractor per worker process when the worker starts (or joins later), reused by every task
    that runs there: the model is loaded once per worker, never per task."""

    name = PLUGIN_NAME

    def __init__(self, weights: str, threads: int):
        self.weights, self.threads = weights, threads
        self.extractor = None
        self.loads = 0

    def setup(self, worker):
        import superpoint_rt

        self.extractor = superpoint_rt.BatchExtractor(self.weights, threads=self.threads)
        self.loads += 1

    def teardown(self, worker):
        if self.extractor is not None:
            self.extractor.close()


def extract_shard(index: int, count: int, images: list, out_dir: str, options: dict) -> dict:
    """One task: shard index/count of the image list into out_dir/shard-<index>-of-<count>.h5 (resumable: an
    interrupted or retried task continues where it stopped)."""
    worker = distributed.get_worker()
    plugin = worker.plugins[PLUGIN_NAME]
    path = os.path.join(out_dir, f"shard-{index:05d}-of-{count:05d}.h5")
    report = plugin.extractor.extract(images, path, shard=f"{index}/{count}", skip_existing=os.path.exists(path),
                                      **options)
    return {"shard": index, "path": path, "report": report, "worker": worker.address, "pid": os.getpid(),
            "model_loads": plugin.loads, "extractor_id": id(plugin.extractor)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("images", nargs="+", help="image files and folders (folders are walked recursively)")
    ap.add_argument("--output", required=True, help="merged hloc feature file")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster)")
    ap.add_argument("--local-workers", type=int, default=2, help="worker processes of the LocalCluster")
    ap.add_argument("--shards", type=int, default=0, help="number of shards (default: 4 x the workers)")
    ap.add_argument("--shard-dir", help="folder of the shard files (default: OUTPUT.shards/)")
    ap.add_argument("--weights", default=None, help="model folder or hub repo id")
    ap.add_argument("--threads", type=int, default=1, help="network compute threads per worker")
    ap.add_argument("--image-root", default=None)
    ap.add_argument("--glob", action="append", default=None)
    ap.add_argument("--as-half", action="store_true")
    ap.add_argument("--keep-shards", action="store_true", help="keep the shard files after merging")
    ap.add_argument("--json", action="store_true", help="print the task results as JSON (for tests)")
    args = ap.parse_args(argv)

    import superpoint_rt

    weights = args.weights or default_weights()
    if args.scheduler:
        client = distributed.Client(args.scheduler)
        cluster = None
    else:
        cluster = distributed.LocalCluster(n_workers=args.local_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
    try:
        client.register_plugin(ModelPlugin(weights, args.threads), name=PLUGIN_NAME)
        nworkers = max(1, len(client.scheduler_info()["workers"]))
        count = args.shards or 4 * nworkers
        shard_dir = args.shard_dir or args.output + ".shards"
        os.makedirs(shard_dir, exist_ok=True)
        images = [os.path.abspath(p) for p in args.images]
        options = {"image_root": os.path.abspath(args.image_root) if args.image_root else None, "glob": args.glob,
                   "as_half": args.as_half, "workers": 1}
        futures = [client.submit(extract_shard, i, count, images, os.path.abspath(shard_dir), options, pure=False)
                   for i in range(count)]
        results = client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    n = superpoint_rt.merge_features([r["path"] for r in results], args.output)
    failed = [f for r in results for f in r["report"]["failed"]]
    if not args.keep_shards:
        for r in results:
            for suffix in ("", ".report.json"):
                if os.path.exists(r["path"] + suffix):
                    os.remove(r["path"] + suffix)
        try:
            os.rmdir(shard_dir)
        except OSError:
            pass
    if args.json:
        print(json.dumps({"images": n, "failed": failed, "tasks": results}))
    else:
        print(f"{n} images from {count} shards on {nworkers} workers -> {args.output}; {len(failed)} failed")
        for f in failed:
            print(f"  {f['name']}: {f['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
