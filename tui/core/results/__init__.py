"""results floor."""
