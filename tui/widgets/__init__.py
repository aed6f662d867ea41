"""Widgets of the Textual front end (step list, phase timeline, log, gauges, panels, charts)."""
