"""Bundled specdec-tui profiles (TOML), installed as the `specdec_profiles` package."""
