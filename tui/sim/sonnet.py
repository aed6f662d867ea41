"""vLLM's `benchmarks/sonnet.txt`, the bundled copy the loopback dataset mirror serves.

The demo downloads the same bytes a real run downloads (the app ships the file: `profiles/data/sonnet.txt`,
package data of `specdec_profiles`), so a demo profile's `[dataset] sha256` is the real file's hash and the
bench samples prompts from the real sonnets. `SONNET_SHA256` and `SONNET_SIZE` are the file's facts
(shared/reference vllm.md §4.1); a test checks the bundled bytes against them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tui.core.plan.commands import BUNDLED_SONNET_SHA256, bundled_data_dir

SONNET_SHA256 = BUNDLED_SONNET_SHA256
SONNET_SIZE = 22706  # bytes; 518 lines by readlines(), no trailing newline


class SonnetMissing(RuntimeError):
    """The bundled sonnet.txt is absent (a broken install)."""


def sonnet_path() -> Path:
    return bundled_data_dir() / "sonnet.txt"


@lru_cache(maxsize=1)
def sonnet_bytes() -> bytes:
    path = sonnet_path()
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SonnetMissing(f"the bundled sonnet.txt is missing ({path}: {exc.strerror or exc}); reinstall "
                            "specdec-tui, whose package data holds it") from None


def sonnet_text() -> str:
    return sonnet_bytes().decode("utf-8")


__all__ = ["SONNET_SHA256", "SONNET_SIZE", "SonnetMissing", "sonnet_bytes", "sonnet_path", "sonnet_text"]
