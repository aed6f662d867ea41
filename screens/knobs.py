"""The Profile pane's editable settings (the knobs) and the words the app uses for them.

The pane (profile.py) draws a field per knob; a failed step's banner (base.py) and the retry key (tui/app) name
the field a fix is about. They all read this module, which imports no pane, so no two panes import each other.
"""

from __future__ import annotations

from tui.core import events as ev

# (section, key, label, input type)
KNOBS: tuple[tuple[str, str, str, str], ...] = (
    ("server", "host", "Host", "text"),
    ("server", "port", "Port", "integer"),
    ("server", "tensor_parallel_size", "Tensor parallel (TP)", "integer"),
    ("speculative", "num_speculative_tokens", "Speculative tokens", "integer"),
    ("benchmark", "num_prompts", "Prompts", "integer"),
    ("benchmark", "input_len", "Input length", "integer"),
    ("benchmark", "output_len", "Output length", "integer"),
)

# How a retry is started once a field has been edited: Enter (or esc) leaves the field for the step list, where r
# retries; ctrl+r retries from inside the field (r there is a letter typed into it).
RETRY_KEYS = "Enter, then r (ctrl+r in a field)"


def knob_id(section: str, key: str) -> str:
    return f"knob-{section}-{key}".replace("_", "-")


def is_knob(setting: str) -> bool:
    """`setting` (a dotted key such as "server.tensor_parallel_size") has a field on the Profile pane."""
    return any(f"{s}.{k}" == setting for s, k, _l, _t in KNOBS)


def setting_label(setting: str) -> str:
    """The field's label for a dotted key ("Tensor parallel (TP)"), else the key itself."""
    return next((label for s, k, label, _t in KNOBS if f"{s}.{k}" == setting), setting)


def setting_hint(diag: ev.Diagnosis) -> str:
    """The in-app way to apply a fix that is a setting (Diagnosis.setting): the Profile pane's field and the keys
    that retry with it; "" when the fix is not one of the pane's settings."""
    if not diag.setting or not is_knob(diag.setting):
        return ""
    to = f" to {diag.suggest}" if diag.suggest else ""
    return (f"press p (Profile pane, field {setting_label(diag.setting)}), set it{to}, then {RETRY_KEYS} retries "
            "with it.")
