"""tarsd: the tars daemon, keeping an Obsidian vault indexed and answering over a Unix socket."""

from tarsctl import __version__

__all__ = ["__version__"]
