"""store floor."""
