"""The bench's stdout: vLLM's lines, flushed as they come."""

from __future__ import annotations

from typing import Any


def emit(*parts: Any) -> None:
    print(*parts, flush=True)


def emit_row(label: str, value: Any, fmt: str = "") -> None:
    emit(("{:<40} {:<10" + fmt + "}").format(label, value))


def emit_banner(title: str, c: str) -> None:
    emit("{s:{c}^{n}}".format(s=title, n=50, c=c))
