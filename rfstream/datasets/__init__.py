"""Small real datasets shipped with rfstream (see PROVENANCE.txt)."""
from importlib.resources import files


def demo_path():
    """Path of the shipped MAGIC gamma telescope CSV (gzip), used by ``rfstream demo``."""
    return files(__name__) / "magic04.data.gz"
