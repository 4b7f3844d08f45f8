"""superpoint_rt: fast, exact SuperPoint keypoints and descriptors (C++ engine, oneDNN on CPU).

    from superpoint_rt import SuperPoint

    with SuperPoint.from_pretrained() as model:
        out = model("image.jpg")
        print(len(out), out.keypoints[:3], out.scores[:3], out.descriptors.shape)

Importing needs numpy only; PIL images and torch tensors are accepted when Pillow / torch are installed.
See docs/PYTHON.md.
"""

from ._core import __version__, fastest_precision, precisions
from ._batch import BatchExtractor, extract_folder, list_names, merge_features
from ._image import draw_keypoints, read_image, write_png
from ._lightglue import LightGlue
from ._match import (match, match_features, pairs_from_exhaustive, pairs_from_sequential, read_matches,
                     read_pairs)
from ._model import SuperPoint
from ._output import SuperPointOutput
from ._sfm import colmap_database
from ._synthetic import synthetic_image

__all__ = ["SuperPoint", "SuperPointOutput", "draw_keypoints", "read_image", "synthetic_image", "write_png",
           "__version__", "precisions", "fastest_precision", "BatchExtractor", "extract_folder", "list_names",
           "merge_features", "match", "match_features", "pairs_from_exhaustive", "pairs_from_sequential",
           "read_matches", "read_pairs", "colmap_database", "LightGlue"]
