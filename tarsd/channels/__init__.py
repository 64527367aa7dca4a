"""tars in chat apps: messenger channels on tarsd's HTTP listener (docs/whatsapp.md).

A channel is a door for one messenger, over the same dispatcher as the socket and HTTP: its
webhook takes the messenger's deliveries in, and its client sends the replies out. What every
messenger shares (who may talk to tars, one conversation per sender, commands, questions answered
by buttons, each message answered once) is the relay; what is WhatsApp's own (Meta's webhook,
signatures, the Graph API, WhatsApp's formatting) is in the whatsapp modules. A second messenger
is one more such set of modules behind ``Channel``, not a change to the relay or the assistant.

Loaded only when a channel is enabled (and with it the HTTP listener).
"""
