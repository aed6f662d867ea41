"""proc floor."""
