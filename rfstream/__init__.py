"""rfstream: kernel machines with random features on Dask."""
__version__ = "0.1.0"
