"""Textual screens, one per wizard step (filled in by the TUI issue)."""
