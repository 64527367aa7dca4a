"""Chat: the assistant's turn loop (assistant), the Ollama and Anthropic providers (providers),
tools the model may call (tools), conversations kept in the index database (conversations),
the prompts with vault text fenced as data (prompts) and memory recalled into them (recall).

May import everything below it: config, markdown, vault, embed, store, index, search, memory.
"""
