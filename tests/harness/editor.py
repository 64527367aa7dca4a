"""An editor saving a file the way editors do: read it, change it (taking a moment), write a
temp file, rename it over the original. Run as a separate process by the race tests:

    python tests/harness/editor.py FILE COUNT [SEED] [rename|in-place]

Adds "- editor line N" at the end of the file COUNT times; prints "done" when finished.
"rename" (the default) saves as most editors do; "in-place" truncates the file and writes
it again, as Obsidian and Node's fs.writeFile do.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path


def main() -> int:
    path, count = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    in_place = len(sys.argv) > 4 and sys.argv[4] == "in-place"
    for number in range(count):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        time.sleep(rng.uniform(0.0, 0.012))  # the buffer goes stale while the user types
        saved = text.rstrip("\n") + f"\n- editor line {number}\n"
        if in_place:
            path.write_text(saved, encoding="utf-8")
        else:
            temp = path.with_name(f".{path.name}.editor-{os.getpid()}")
            temp.write_text(saved, encoding="utf-8")
            os.replace(temp, path)
        time.sleep(rng.uniform(0.0, 0.012))
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
