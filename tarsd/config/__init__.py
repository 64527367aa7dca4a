"""Settings: the config file, TARS_* variables and defaults, and where each value came from.

The lowest layer of tarsd: every other package reads its settings from here, so it imports
nothing of tars but the wire types (tarsctl.protocol) that name its errors.
"""
