"""specdec-tui: deploy EAGLE3 speculative decoding with vLLM Neuron and prove what it buys."""

__version__ = "0.1.0"
