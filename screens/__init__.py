"""Textual panes, one per wizard step (profile, environment, checkpoints, dataset, launch, results),
plus the modal screens (quit confirmation, help, save-as, commands)."""
