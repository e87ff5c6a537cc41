"""The version of this implementation (not of the format: see ocf.format.container)."""

__version__ = "0.4.3"
"""The version of this package (not of the format: see ocf.format.container).

Examples:
    >>> ocf.__version__
    '0.4.3'
"""
