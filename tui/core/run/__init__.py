"""run floor."""
