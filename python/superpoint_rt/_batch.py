"""Batch extraction to hloc feature files: the Python face of `superpoint-rt extract --output F.h5` and
`superpoint-rt merge` (the same C++ code, src/batch/; see docs/SCALING.md).

    import superpoint_rt
    report = superpoint_rt.extract_folder("images/", "features.h5", skip_existing=True)
    print(report["processed"], report["failed"])

The file has hloc's layout (one group per image keyed by its path relative to the image root; keypoints (N, 2) in
hloc's pixel convention, scores (N,), descriptors (256, N), image_size (W, H)), so hloc.match_features and
hloc.reconstruction read it as their own.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _core
from ._params import check_bool, check_max_pixels, check_num_workers, check_threads, resolve

PathLike = Union[str, "os.PathLike[str]"]

_DEFAULT_MODEL = "magic-leap-community/superpoint"


def _load_submodule(short_name: str):
    # _batchcore and _sfmcore are compiled into _core's shared object (python/src/batch.cpp, sfm.cpp); load them
    # from that file.
    name = __package__ + "." + short_name
    loader = importlib.machinery.ExtensionFileLoader(name, _core.__file__)
    spec = importlib.util.spec_from_file_location(name, _core.__file__, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {name} from {_core.__file__}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_batchcore = _load_submodule("_batchcore")


def _paths(x: Union[PathLike, Iterable[PathLike], None]) -> List[str]:
    if x is None:
        return []
    if isinstance(x, (str, os.PathLike)):
        return [os.fspath(x)]
    return [os.fspath(p) for p in x]


class BatchExtractor:
    """A loaded model for any number of batch extractions (load once, e.g. once per Dask worker).

    `weights` is a local folder with config.json + model.safetensors or a Hugging Face repo id (default:
    $SUPERPOINT_RT_WEIGHTS, else "magic-leap-community/superpoint"). `threads` = network compute threads (0 = all
    cores). Threads may share it (runs of one model take turns on the network); never let two runs write the same
    output file at once.
    """

    def __init__(self, weights: Optional[PathLike] = None, *, revision: Optional[str] = "",
                 cache_dir: Optional[PathLike] = None, local_files_only: bool = False, threads: int = 0, max_pixels: int = _core.DEFAULT_MAX_PIXELS,
                 verbose: bool = False) -> None:
        model = os.fspath(weights) if weights is not None else os.environ.get("SUPERPOINT_RT_WEIGHTS", _DEFAULT_MODEL)
        # The same checks as SuperPoint.from_pretrained (_params): nothing is coerced (threads=1.9 is a TypeError,
        # not 1).
        if revision is not None and not isinstance(revision, str):
            raise TypeError(f"revision must be a str or None, got {revision!r}")
        self._x = _batchcore.Extractor(model, revision or "", os.fspath(cache_dir) if cache_dir else "",
                                       check_bool("local_files_only", local_files_only), check_threads(threads, 0),
                                       check_max_pixels(max_pixels), check_bool("verbose", verbose))

    def extract(self, images: Union[PathLike, Sequence[PathLike], None], output: PathLike, **options: Any
                ) -> Dict[str, Any]:
        """Same options as `superpoint-rt extract --output` (image_list, image_root, glob, shard "i/n", as_half,
        skip_existing, overwrite, report, workers (2), max_keypoints (1024), keypoint_threshold (0.005), nms_radius
        (4), descriptors (True), grayscale (False), progress (False)); returns the report (also written to `report`,
        default <output>.report.json): total, skipped, processed, failed [{name, path, error}], seconds,
        images_per_s. Per-image failures are in the report, not raised."""
        return self._run(_extract_args(images, output, **options))

    def _run(self, args: Tuple[Any, ...]) -> Dict[str, Any]:
        return json.loads(self._x.extract(*args))

    def close(self) -> None:
        self._x.close()

    def __enter__(self) -> "BatchExtractor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_UNSET: Any = object()  # a parameter that was not given: the preset's default


def _extract_args(images: Union[PathLike, Sequence[PathLike], None], output: PathLike, *,
                  image_list: Optional[PathLike] = None, image_root: Optional[PathLike] = None,
                  glob: Union[str, Sequence[str], None] = None, shard: Optional[str] = None, as_half: bool = False,
                  skip_existing: bool = False, overwrite: bool = False, report: Optional[PathLike] = None,
                  workers: int = 2, preset: Any = _UNSET, max_keypoints: Any = _UNSET, keypoint_threshold: Any = _UNSET,
                  nms_radius: Any = _UNSET, descriptors: bool = True, grayscale: Any = _UNSET, resize: Any = _UNSET,
                  resize_max: Any = _UNSET, resize_force: Any = _UNSET, interpolation: Any = _UNSET,
                  exif_orientation: Any = _UNSET, progress: bool = False) -> Tuple[Any, ...]:
    """Checks the options of an extraction (before any work: extract_folder checks them before loading the model)
    and returns _batchcore.Extractor.extract's arguments."""
    globs = [glob] if isinstance(glob, str) else list(glob or [])
    if shard is not None and not isinstance(shard, str):
        raise TypeError(f"shard must be a str 'i/n' or None, got {type(shard).__name__} {shard!r}")
    # The request parameters go through the check of model(...) (_params.resolve): max_keypoints=1.9 or True is a
    # TypeError here too, never int(1.9) = 1.
    # Parameters not given take the preset's default (the same table and checks as model(...),
    # include/superpoint_rt/params.hpp); descriptors is return_descriptors.
    check_bool("descriptors", descriptors)
    given = {"preset": preset, "max_keypoints": max_keypoints, "keypoint_threshold": keypoint_threshold,
             "nms_radius": nms_radius, "return_descriptors": descriptors, "grayscale": grayscale, "resize": resize,
             "resize_max": resize_max, "resize_force": resize_force, "interpolation": interpolation,
             "exif_orientation": exif_orientation}
    params = resolve({k: v for k, v in given.items() if v is not _UNSET})
    return (_paths(images), os.fspath(output), os.fspath(image_list) if image_list else "",
            os.fspath(image_root) if image_root else "", globs, shard or "", check_bool("as_half", as_half),
            check_bool("skip_existing", skip_existing), check_bool("overwrite", overwrite),
            os.fspath(report) if report else "", check_num_workers(workers, "workers"), params,
            check_bool("progress", progress))


def extract_folder(images: Union[PathLike, Sequence[PathLike], None], output: PathLike, *,
                   weights: Optional[PathLike] = None, threads: int = 0, local_files_only: bool = False,
                   **options: Any) -> Dict[str, Any]:
    """Extracts every image of folders / files / an image list into the hloc feature file `output` and returns the
    report. Options as BatchExtractor.extract (image_list, image_root, glob, shard "i/n", as_half, skip_existing,
    overwrite, report, workers, preset, max_keypoints, keypoint_threshold, nms_radius, descriptors, grayscale,
    resize, resize_max, resize_force, interpolation, exif_orientation, progress). With preset="hloc:superpoint_aachen" and
    as_half=True the file equals what hloc's extract_features.main(confs["superpoint_aachen"], ...) writes."""
    args = _extract_args(images, output, **options)  # bad options fail before the model loads
    with BatchExtractor(weights, threads=threads, local_files_only=local_files_only) as x:
        return x._run(args)


def merge_features(inputs: Sequence[PathLike], output: PathLike, *, overwrite: bool = False) -> int:
    """Merges feature files (e.g. shards) into `output` like `superpoint-rt merge`; returns the image count."""
    return int(_batchcore.merge(_paths(inputs), os.fspath(output), check_bool("overwrite", overwrite)))


def list_names(path: PathLike) -> List[str]:
    """The image names in a feature file, as hloc's list_h5_names (sorted)."""
    return list(_batchcore.list_names(os.fspath(path)))
