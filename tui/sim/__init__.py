"""The built-in stand-in for `vllm` (serve / bench serve) and for the Hugging Face hub + dataset mirror.

`python -m tui.sim serve MODEL [flags]` and `python -m tui.sim bench serve [flags]` are argv-compatible
with `vllm serve` / `vllm bench serve`; `python -m tui.sim hub` runs the loopback hub. Simulation
settings come from the JSON in the SPECDEC_SIM environment variable (the profile's [simulation] table).
"""
