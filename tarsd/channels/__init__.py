"""tars in chat apps: messenger channels (docs/whatsapp.md, docs/telegram.md).

A channel is a door for one messenger, over the same dispatcher as the socket and HTTP: its
webhook on tarsd's HTTP listener (WhatsApp; Telegram in webhook mode) or its long poll of the
messenger's API (Telegram) takes the messages in, and its client sends the replies out. What every
messenger shares (who may talk to tars, one conversation per sender, commands, questions answered
by buttons, each message answered once) is the relay; what is one messenger's own (Meta's webhook,
signatures, the Graph API, WhatsApp's formatting; the Bot API client, Telegram HTML) is in its
modules. A further messenger is one more such set of modules behind ``Channel``, not a change to
the relay or the assistant.

Loaded only when a channel is enabled.
"""
