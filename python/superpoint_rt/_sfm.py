"""Structure from motion: the Python face of `superpoint-rt colmap` (the same C++ code, superpoint_rt/colmap.hpp;
see docs/SFM.md).

    import pycolmap, superpoint_rt
    superpoint_rt.colmap_database("sfm/database.db", features="feats.h5", matches="matches.h5", pairs="pairs.txt",
                                  images="images/")
    pycolmap.verify_matches("sfm/database.db", "pairs.txt")
    maps = pycolmap.incremental_mapping("sfm/database.db", "images/", "sfm/")
"""

from __future__ import annotations

import json
import math
import numbers
import os
from typing import Any, Dict, Optional, Union

from ._batch import _load_submodule
from ._params import check_bool

PathLike = Union[str, "os.PathLike[str]"]

_sfmcore = _load_submodule("_sfmcore")


def colmap_database(database: PathLike, *, features: PathLike, matches: PathLike, pairs: PathLike,
                    images: Optional[PathLike] = None, single_camera: bool = False,
                    min_match_score: Optional[float] = None, overwrite: bool = False) -> Dict[str, Any]:
    """Writes the COLMAP database hloc's reconstruction.py would import (COLMAP 4's schema, as pycolmap 4.x creates
    it) from hloc's feature file, match file and pair list, and returns what was written: {"database", "images",
    "cameras", "keypoints", "pairs_listed", "pairs_written", "pairs_duplicate", "pairs_self", "matches", "seconds"}.

    Every image of `features` (ids in name order) gets a SIMPLE_RADIAL camera with focal 1.2 * max(W, H) (one per
    image, or one for all with single_camera=True) and its keypoints + 0.5 (COLMAP's pixel centres); each pair of
    `pairs` its matches from `matches` (those with a score above min_match_score when given). `images` (optional):
    the image folder; each image must be there, at the features' image_size as COLMAP reads it. An existing
    `database` is an error unless overwrite=True. Raises ValueError for bad options and inconsistent inputs,
    FileNotFoundError for a missing file, image or pair, RuntimeError for I/O failures.
    """
    if min_match_score is not None:
        if isinstance(min_match_score, bool) or not isinstance(min_match_score, numbers.Real):
            raise TypeError(f"min_match_score must be a number or None, got {type(min_match_score).__name__} "
                            f"{min_match_score!r}")
        if not math.isfinite(float(min_match_score)):
            raise ValueError(f"min_match_score = {min_match_score!r} is not a finite number")
        min_match_score = float(min_match_score)
    report = _sfmcore.colmap_database(os.fspath(database), os.fspath(features), os.fspath(matches), os.fspath(pairs),
                                      os.fspath(images) if images is not None else "",
                                      check_bool("single_camera", single_camera), min_match_score,
                                      check_bool("overwrite", overwrite))
    return json.loads(report)
