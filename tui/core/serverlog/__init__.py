"""serverlog floor."""
