"""The built-in stand-in for `vllm` (serve / bench serve) and for the Hugging Face hub + dataset mirror.

`python -m tui.sim serve MODEL [flags]` and `python -m tui.sim bench serve [flags]` are argv-compatible
with `vllm serve` / `vllm bench serve`; `python -m tui.sim hub` runs the loopback hub; `python -m tui.sim
stand-in --profile FILE` is a profile's `[stand_in]` platform (tui/sim/standin.py: hub, fake trn2 sysroot and
neuron-ls, stub vllm / vllm_neuron / transformers), which the engine starts like any child process. Simulation
settings come from the JSON in the SPECDEC_SIM environment variable (the profile's [simulation] table).
"""
