"""host floor."""
