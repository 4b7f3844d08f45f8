"""SuperPoint: the Python front end of the C++ engine (seed PYTHON.md, with the adaptations of SPEC §4).

Thread-safety: one SuperPoint object may be shared by any number of Python threads. The GIL is released while the
engine works (loading, warm-up, every call), so threads calling the model and threads doing other Python work run
at the same time. close() waits for calls in flight; later calls raise RuntimeError.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._inputs import _is_torch, split_batch, to_engine
from ._output import SuperPointOutput
from ._params import (DEFAULTS, NMS_RADIUS_MAX, check_bool, check_int, check_max_pixels, check_num_workers,
                      check_threads, resolve, unknown_parameter)

DEFAULT_REPO = "magic-leap-community/superpoint"
_DECODERS = ("jpeg", "png", "gif", "bmp", "webp", "tiff", "pnm")
_SPEC_KEYS = ("sizes", "nms_radii", "decoders", "num_workers", "fallbacks", "network_sizes")
_DEFAULT_PARAMS: Dict[str, Any] = {}
_SIZE_MAX = 1 << 20  # warm-up sizes: a side of at most 1,048,576 pixels


def _check_size(name: str, s: Any) -> Tuple[int, int]:
    if isinstance(s, (str, bytes)) or not isinstance(s, Sequence) or len(s) != 2:
        raise TypeError(f"{name}: a size is a (width, height) pair of ints, got {s!r}")
    return (check_int(f"{name} width", s[0], 1, _SIZE_MAX), check_int(f"{name} height", s[1], 1, _SIZE_MAX))


def _check_sizes(name: str, v: Any) -> List[Tuple[int, int]]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
        raise TypeError(f"{name} must be a list of (width, height) pairs, got {v!r}")
    return [_check_size(name, s) for s in v]


def _check_radii(name: str, v: Any) -> List[int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = [v]
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
        raise TypeError(f"{name} must be a list of ints in [0, {NMS_RADIUS_MAX}], got {v!r}")
    return [check_int(name, r, 0, NMS_RADIUS_MAX) for r in v]


def _check_decoders(name: str, v: Any) -> List[str]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, Iterable):
        raise TypeError(f"{name} must be a list of decoder names ({', '.join(_DECODERS)}), got {v!r}")
    out = []
    for d in v:
        if not isinstance(d, str):
            raise TypeError(f"{name}: decoder names are strings, got {d!r}")
        d2 = d.lower()
        if d2 == "jpg":
            d2 = "jpeg"
        if d2 not in _DECODERS:
            raise ValueError(f"{name}: unknown decoder {d!r} (one of {', '.join(_DECODERS)})")
        out.append(d2)
    return out


def _resolve_warmup(warmup_variants: Any, precompile_sizes: Any, precompile_nms_radii: Any) -> Dict[str, Any]:
    """The warm-up spec as a dict with sizes, nms_radii, decoders, num_workers, fallbacks (seed "warmup_variants")."""
    v = warmup_variants
    if v is None or v is True or v == "default":
        spec = dict(_core.default_warmup())
    elif v is False or v == "minimal":
        spec = dict(_core.minimal_warmup())
    elif v == "all":
        spec = dict(_core.all_warmup())
    elif v == "none":
        spec = {"sizes": [], "nms_radii": [], "decoders": [], "num_workers": 0, "network_sizes": []}
    elif isinstance(v, Mapping):
        spec = dict(_core.default_warmup())
        for k, val in v.items():
            if k not in _SPEC_KEYS:
                raise ValueError(f"warmup_variants: unknown key {k!r} (the keys are {', '.join(_SPEC_KEYS)})")
            spec[k] = val
    else:
        raise ValueError(f"warmup_variants = {v!r}: use None / 'default', 'minimal' / False, 'all', 'none', or a dict "
                         f"with the keys {', '.join(_SPEC_KEYS)}")
    spec.setdefault("fallbacks", True)
    if precompile_sizes is not None:
        spec["sizes"] = precompile_sizes  # the older name replaces the sizes (seed)
    spec["sizes"] = _check_sizes("warmup_variants['sizes']", spec["sizes"])
    # Network frames (width, height) to plan at load, e.g. (1024, 768) for hloc:superpoint_aachen on 4:3 photos.
    spec["network_sizes"] = _check_sizes("warmup_variants['network_sizes']", spec.get("network_sizes", []))
    spec["nms_radii"] = _check_radii("warmup_variants['nms_radii']", spec["nms_radii"])
    for r in _check_radii("precompile_nms_radii", precompile_nms_radii or ()):
        if r not in spec["nms_radii"]:
            spec["nms_radii"].append(r)  # the older name adds radii (seed)
    spec["decoders"] = _check_decoders("warmup_variants['decoders']", spec["decoders"])
    spec["num_workers"] = check_num_workers(spec["num_workers"], "warmup_variants['num_workers']")
    spec["fallbacks"] = check_bool("warmup_variants['fallbacks']", spec["fallbacks"])
    return spec


def _resolve_device(device: Any, device_id: Optional[int]) -> str:
    if device is None:
        device = "cpu"
    if not isinstance(device, str):
        device = str(device)  # e.g. torch.device("cpu")
    d = device.strip().lower()
    if device_id is not None:
        check_int("device_id", device_id, 0, 1 << 16)
        if d == "cuda":
            d = f"cuda:{int(device_id)}"
        elif d == "cpu" and int(device_id) != 0:
            raise ValueError(f"device_id = {device_id} is not valid with device 'cpu' (0 or None)")
    if d != "cpu" and not (d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())):
        raise ValueError(f"device = {device!r}: use 'cpu', 'cuda' or 'cuda:N'")
    return d


def _calibration_inputs(calibration: Any) -> List[Any]:
    """int8 calibration images -> the engine's single-image inputs (a batch array or tensor counts as its images)."""
    if calibration is None:
        return []
    single = isinstance(calibration, (str, bytes, bytearray, memoryview, os.PathLike))
    one_array = (isinstance(calibration, np.ndarray) and calibration.ndim < 4) or (
        _is_torch(calibration) and calibration.dim() < 4)
    if single or one_array or not hasattr(calibration, "__iter__"):
        raise TypeError("calibration must be a list of images, not a single image; wrap it in a list")
    batch = split_batch(calibration)
    items = batch if batch is not None else list(calibration)
    if not items:
        raise ValueError("calibration is an empty list: pass at least one image, or None for the built-in set")
    return [to_engine(im) for im in items]


class SuperPoint:
    """SuperPoint keypoints and 256-d descriptors (Hugging Face ``SuperPointForKeypointDetection``, bit-exact).

    Create it with :meth:`from_pretrained`; call it on an image or a list of images; close it with :meth:`close`
    or a ``with`` block.
    """

    def __init__(self, core: Any, config: Dict[str, Any]) -> None:
        if not isinstance(core, _core.Model):
            raise TypeError("use SuperPoint.from_pretrained(...) to create a model")
        self._core = core
        self._config = config
        self._lock = threading.Lock()  # guards self._config["warmup_s"] updates only

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: Union[str, "os.PathLike[str]"] = DEFAULT_REPO,
        *,
        revision: Optional[str] = None,
        device: Any = None,
        device_id: Optional[int] = None,
        threads: Optional[int] = None,
        precision: str = "fp32",
        calibration: Optional[Iterable[Any]] = None,
        warmup_variants: Any = None,
        precompile_sizes: Optional[Iterable[Tuple[int, int]]] = None,
        precompile_nms_radii: Iterable[int] = (),
        local_files_only: bool = False,
        cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        max_pixels: Optional[int] = None,
        max_frame_pixels: Optional[int] = None,
        verbose: bool = False,
    ) -> "SuperPoint":
        """Loads the weights, builds the network and warms up the requested variants.

        Args:
            pretrained_model_name_or_path: a Hugging Face repo id ("org/name"), or a local directory with
                config.json and model.safetensors.
            revision: branch, tag or commit of a repo id (default "main").
            device: "cpu" (default), "cuda" or "cuda:N" (when the library was built with CUDA).
            device_id: with device="cuda", the GPU index.
            threads: compute threads of the network (None = all cores).
            precision: "fp32" (default; bit-exact with the reference), or "bf16" / "int8" where the backend offers
                them (the CPU backend does; their speed and fidelity are in docs/BENCHMARKS.md).
            calibration: precision="int8" only: images (paths, bytes, PIL images, arrays, tensors: anything a call
                accepts, one image each) whose fp32 activations set the int8 ranges; pick a few like the ones the
                model will see. None (default): the built-in calibration (six synthetic 640x480 pictures).
            warmup_variants: None / "default", "minimal" / False, "all", "none", or a dict with keys sizes
                ((width, height) pairs), nms_radii, decoders, num_workers, fallbacks (see docs/PYTHON.md).
            precompile_sizes: older name; replaces warmup_variants["sizes"].
            precompile_nms_radii: older name; added to warmup_variants["nms_radii"].
            local_files_only: never use the network (also with $HF_HUB_OFFLINE=1).
            cache_dir: hub cache (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub).
            max_pixels: decoder limit (default 178,956,970, Pillow's); larger images are refused before decoding.
            max_frame_pixels: network-frame limit (default 16,777,216 = 4096 x 4096, the network's own): a request
                whose frame (what resize / resize_max give for the image) has more pixels raises ValueError before
                any plan or buffer of that frame is made. At least 64 (8 x 8).
            verbose: False (default): only warnings and errors; True: loading and warm-up progress on stderr.

        Raises:
            FileNotFoundError: the directory, repo, revision or a file is missing (offline or not on the hub).
            ValueError / TypeError: an argument out of range or of the wrong type.
            RuntimeError: the weights do not match the network, or a download failed.
        """
        path = os.fspath(pretrained_model_name_or_path)
        if not isinstance(path, str) or not path:
            raise TypeError(f"pretrained_model_name_or_path must be a non-empty str or path, got {path!r}")
        if revision is not None and not isinstance(revision, str):
            raise TypeError(f"revision must be a str or None, got {revision!r}")
        if not isinstance(precision, str):
            raise TypeError(f"precision must be a str, got {precision!r}")
        local_files_only = check_bool("local_files_only", local_files_only)
        verbose = check_bool("verbose", verbose)
        nthreads = 0 if threads is None else check_threads(threads, 1)
        mp = _core.DEFAULT_MAX_PIXELS if max_pixels is None else check_max_pixels(max_pixels)
        mfp = _core.MAX_NETWORK_PIXELS if max_frame_pixels is None else check_int(
            "max_frame_pixels", max_frame_pixels, _core.MIN_FRAME_PIXELS, _core.MAX_NETWORK_PIXELS)
        dev = _resolve_device(device, device_id)
        spec = _resolve_warmup(warmup_variants, precompile_sizes, precompile_nms_radii)
        cache = "" if cache_dir is None else os.fsdecode(cache_dir)
        calib = _calibration_inputs(calibration)
        core = _core.load(path, revision or "", cache, local_files_only, dev, nthreads, precision, mp,
                          spec["sizes"], spec["nms_radii"], spec["decoders"], spec["num_workers"], verbose, calib,
                          spec["network_sizes"], mfp)
        info = core.info()
        config = dict(info)
        config.update({
            "pretrained_model_name_or_path": path,
            "local_files_only": local_files_only,
            "cache_dir": cache or None,
            "max_pixels": mp,
            "max_frame_pixels": mfp,
            "verbose": verbose,
            "warmup_variants": {"sizes": [tuple(s) for s in spec["sizes"]], "nms_radii": list(spec["nms_radii"]),
                                "decoders": list(spec["decoders"]), "num_workers": spec["num_workers"],
                                "fallbacks": spec["fallbacks"]},
            "parameters": dict(DEFAULTS),
            "version": _core.__version__,
        })
        return cls(core, config)

    # ------------------------------------------------------------------ calls
    def __call__(self, images: Any, **params: Any) -> Union[SuperPointOutput, List[SuperPointOutput]]:
        """Features of one image (-> SuperPointOutput) or of a list / tuple / 4-D batch (-> list, input order).

        Parameters (docs/PARAMETERS.md; the defaults are the preset's): preset ("hf"; "hloc:superpoint_aachen",
        "hloc:superpoint_max", "hloc:superpoint_inloc", "lightglue" reproduce those tools' request paths),
        max_keypoints (hf 1024, -1..307200, -1 = all), keypoint_threshold (hf 0.005, [0, 1], strict >), nms_radius
        (hf 4, 0..32), return_descriptors (True), bgr (False: arrays are RGB; True: OpenCV BGR), grayscale (hf False;
        True: HF luma instead of the R channel), resize ("640x480" fixed frame, None = native size), resize_max
        (long side), resize_force, interpolation ("pil_bilinear", "cv2_area", "antialias_bilinear"), exif_orientation
        (files on the hloc / lightglue paths: rotate by the EXIF tag; hloc False, lightglue True), num_workers (4;
        lists: threads decoding the next images while the network runs the current one; where a list runs two
        forwards side by side, each decodes its own images and num_workers only sets how many are read ahead), return_tensors (None =
        numpy, "pt" = torch).
        """
        if not params and type(images) is np.ndarray and images.ndim < 4:
            # The common call (one array, default parameters) in as few Python steps as possible: this runs right
            # after the previous call has evicted the CPU caches, so every step costs (bench_first_call --overhead).
            return SuperPointOutput(*self._core.run_one(to_engine(images), _DEFAULT_PARAMS))
        nw = check_num_workers(params.pop("num_workers", 4))  # checked for single images too
        return_tensors = params.pop("return_tensors", None)
        for k in params:
            if k not in DEFAULTS:
                raise unknown_parameter(k)
        p = resolve(params)
        pt = self._check_tensors(return_tensors)
        batch = split_batch(images)
        if batch is None:
            out = SuperPointOutput(*self._core.run_one(to_engine(images), p))
            return self._to_pt(out) if pt else out
        inputs = [to_engine(im) for im in batch]
        outs = [SuperPointOutput(*t) for t in self._core.run_list(inputs, p, nw)]
        return [self._to_pt(o) for o in outs] if pt else outs

    def iter(self, images: Iterable[Any], **params: Any) -> Iterator[SuperPointOutput]:
        """Outputs for any iterable of images (e.g. a generator of video frames), one at a time, in order.

        With num_workers > 0 (default 4) the images are taken in groups of num_workers, and each group runs as one
        list call (the next images decode while the network runs the current one); num_workers=0 takes one image at
        a time (lowest latency for a live stream). The outputs equal model(list(images), **params).
        """
        num_workers = check_num_workers(params.pop("num_workers", 4))
        return_tensors = params.get("return_tensors")
        for k in params:
            if k not in DEFAULTS and k != "return_tensors":
                raise unknown_parameter(k)
        resolve({k: v for k, v in params.items() if k in DEFAULTS})  # fail before the first item is read
        self._check_tensors(return_tensors)
        return self._iter(iter(images), max(1, num_workers), num_workers, params)

    def _iter(self, it: Iterator[Any], group: int, num_workers: int,
              params: Dict[str, Any]) -> Iterator[SuperPointOutput]:
        while True:
            chunk = []
            for im in it:
                chunk.append(im)
                if len(chunk) == group:
                    break
            if not chunk:
                return
            yield from self(chunk, num_workers=num_workers, **params)

    # ------------------------------------------------------------------ warm-up, lifetime, info
    def warmup(self, *, nms_radius: Optional[int] = None, nms_radii: Optional[Iterable[int]] = None,
               size: Optional[Tuple[int, int]] = None, sizes: Optional[Iterable[Tuple[int, int]]] = None,
               decoders: Optional[Iterable[str]] = None, num_workers: Optional[int] = None,
               network_sizes: Optional[Iterable[Tuple[int, int]]] = None) -> Dict[str, float]:
        """Prepares more variants (see from_pretrained's warmup_variants). Variants that are ready are skipped.
        network_sizes: network frames (width, height) to plan and run once (other presets' sizes, e.g. (1024, 768)).

        Returns the seconds of each step that ran ({} when everything was ready)."""
        sz = []
        if size is not None:
            sz.append(_check_size("size", size))
        if sizes is not None:
            sz += _check_sizes("sizes", sizes)
        radii = []
        if nms_radius is not None:
            radii += _check_radii("nms_radius", [nms_radius])
        if nms_radii is not None:
            radii += _check_radii("nms_radii", nms_radii)
        dec = [] if decoders is None else _check_decoders("decoders", decoders)
        nw = 0 if num_workers is None else check_num_workers(num_workers)
        ns = [] if network_sizes is None else _check_sizes("network_sizes", network_sizes)
        steps = self._core.warmup(sz, radii, dec, nw, ns)
        with self._lock:
            self._config["warmup_s"].update(steps)
        return steps

    @property
    def config(self) -> Dict[str, Any]:
        """The resolved settings: model, revision (commit), weights_dir, source, backend, device, precision,
        threads, cpu_features, cpu_units, fastest_precision, plan, warmup_variants (the spec in use), warmup_s (seconds of each warm-up step),
        and the options given to from_pretrained. A copy: changing it changes nothing."""
        with self._lock:
            c = dict(self._config)
            c["warmup_s"] = dict(self._config["warmup_s"])
        return c

    @property
    def closed(self) -> bool:
        return self._core.closed

    def close(self) -> None:
        """Releases the network, its buffers and the worker threads. Idempotent; waits for calls in flight. Later
        calls raise RuntimeError."""
        self._core.close()

    def __enter__(self) -> "SuperPoint":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._config['device']}, {self._config['precision']}"
        return f"SuperPoint({self._config['pretrained_model_name_or_path']!r}, {state})"

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _check_tensors(return_tensors: Any) -> bool:
        if return_tensors is None or return_tensors == "np":
            return False
        if return_tensors == "pt":
            try:
                import torch  # noqa: F401
            except ImportError as e:
                raise ImportError("return_tensors='pt' needs torch (pip install torch)") from e
            return True
        raise ValueError(f"return_tensors = {return_tensors!r}: use None / 'np' (numpy) or 'pt' (torch)")

    @staticmethod
    def _to_pt(out: SuperPointOutput) -> SuperPointOutput:
        import torch

        out.keypoints = torch.from_numpy(out.keypoints)
        out.scores = torch.from_numpy(out.scores)
        if out.descriptors is not None:
            out.descriptors = torch.from_numpy(out.descriptors)
        return out
