"""tars speaks first: a routine's run (its prompt as a conversation of its own, under the routine's
tool policy and limits), a reminder's message, and delivering what they say: to the inbox always,
and to the routine's targets (Telegram, WhatsApp, a note in the vault), retried until sent.

What is due and when comes from tarsd.routines (the routines file, the clock, the ledger); the
runs go through the doors' dispatcher as the ``routine`` principal (tarsctl/authority.py), so the
authority table holds them like any other request; the messengers are tarsd.channels' relays."""
