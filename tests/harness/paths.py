"""Where the tests find the repository, the shared model and the benchmark vaults."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TARS_SHARED", REPO.parent / "shared"))
MODEL_DIR = Path(os.environ.get("TARS_MODEL_DIR", SHARED / "models" / "all-MiniLM-L6-v2-int8"))
DENDRON = SHARED / "data" / "vaults" / "dendron-site"
