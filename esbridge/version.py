"""esbridge's version (:data:`__version__`, also ``esbridge.__version__``), recorded in what it writes."""

__all__ = ["__version__"]

__version__ = "0.1.0"
