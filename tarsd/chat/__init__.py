"""Chat: providers, tools, conversations, compaction, prompts and session logs."""
