"""The daemon's wiring, the top of tarsd: start-up, the single-instance lock, signals and
shutdown (main), scheduled jobs (scheduler) and systemd's notify protocol (notify).

May import every other package; nothing imports it.
"""
