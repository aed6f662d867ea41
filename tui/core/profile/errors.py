"""The one error a profile raises: str(exc) is a one-paragraph message fit for the operator."""


class ProfileError(Exception):
    """A profile could not be loaded. str(exc) is a one-paragraph message fit for the operator."""
