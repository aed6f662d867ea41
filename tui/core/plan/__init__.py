"""plan floor."""
