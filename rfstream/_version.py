"""The version of rfstream, in one place (read by pyproject.toml and the model files)."""
__version__ = "0.1.0"
