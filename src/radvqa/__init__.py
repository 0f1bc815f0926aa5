"""radvqa: radiology visual question answering datasets — build, export, predict, evaluate."""

__version__ = "0.1.0"
