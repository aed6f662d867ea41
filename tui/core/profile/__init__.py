"""profile floor."""
