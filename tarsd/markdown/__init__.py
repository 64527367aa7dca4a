"""What a note's text means, as pure functions on strings: chunks with exact line numbers,
wikilinks and markdown links, tags, and the keyword tokens search matches on.

No files, no database, no model: imports nothing of tars, so every layer above may use it.
"""
