"""bench floor."""
