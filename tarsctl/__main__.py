"""python -m tarsctl: the tarsctl command."""

from tarsctl.quick import entry

entry()
