#!/usr/bin/env python3
"""The tiny models' construction (tui/tools/tinymodels.py) at a wider shape, for the synthetic-acceptance sweep.

    python widemodels.py --out DIR --sonnet PATH      (in the vLLM interpreter, like tinymodels.py)

Why: on this CPU the standard tiny target (4 layers, hidden 128) costs about 1 ms a decode step while a speculative
step costs about 10 ms whatever the acceptance (eager PyTorch and the CPU build's per-request Python fallbacks for
the EAGLE kernels dominate), so speculation cannot pay there even with every draft token accepted (measured: k = 3 at
acceptance length 3.0, 0.7x). An 8-layer, hidden-768 target (about 50 M parameters, 100 MB in bf16) costs about
14 ms a step at one sequence, so a one-layer draft with synthetic acceptance near 1 pays at low concurrency and
stops paying as the batch grows (measured on 2 shared cores, k = 3, acceptance length 4.0: 1.9x at 1 concurrent
request, 0.9x at 4, 0.84x at 8; at 3.8 in the app's sweep: 1.6-1.9x at 1, 0.9-1.2x at 4, 0.65x at 8). Same
tokenizer, same walk, same draft layout; only the sizes differ. The standard tiny models, their cache key and every
other real test are untouched: this writes its own directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tui" / "tools"
SHAPE = {"HIDDEN": 768, "LAYERS": 8, "HEADS": 12, "KV_HEADS": 4, "HEAD_DIM": 64, "INTERMEDIATE": 2048,
         "AUX_LAYERS": [1, 4, 6]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sonnet", required=True)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(TOOLS))
    import tinymodels  # the construction itself; its module constants are the shape

    for name, value in SHAPE.items():
        assert hasattr(tinymodels, name), f"tui/tools/tinymodels.py has no {name}: update SHAPE here"
        setattr(tinymodels, name, value)
    info = tinymodels.build(Path(a.out), Path(a.sonnet))
    assert info["hidden_size"] == SHAPE["HIDDEN"] and info["num_hidden_layers"] == SHAPE["LAYERS"], info
    print(json.dumps({"out": a.out, "hidden_size": info["hidden_size"], "layers": info["num_hidden_layers"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
