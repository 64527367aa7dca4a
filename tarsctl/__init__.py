"""tarsctl: the small, fast client for the tarsd daemon."""

__version__ = "0.1.0"
