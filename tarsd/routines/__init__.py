"""Routines and reminders, what and when: schedules, the routines file, the run ledger and inbox,
and the clock that says when one is due. Running a routine (the model, delivery) is built on top."""
