"""Chat providers: Ollama and Anthropic through their official clients, streaming, with
tool use in each provider's native format.

Conversations are kept in a neutral shape (conversations.ChatMessage) and converted here.
Every failure becomes a ProviderError whose message says what went wrong and what to do.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tarsd.chat.conversations import ChatMessage, ToolCall
from tarsd.config.settings import ChatConfig


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Done:
    stop_reason: str


Event = TextDelta | ToolCallEvent | Done


class ProviderError(Exception):
    """code: unreachable | no_api_key | auth | model_missing | rate_limited | stream_broken | provider_error"""

    def __init__(self, code: str, message: str, hint: str = "", partial: str = ""):
        super().__init__(message)
        self.code, self.message, self.hint, self.partial = code, message, hint, partial


class Provider:
    name = ""

    def __init__(self, config: ChatConfig, model: str):
        self.config = config
        self.model = model

    def stream(self, system: str, messages: list[ChatMessage], tools: list[dict], cancel: threading.Event) -> Iterator[Event]:
        raise NotImplementedError

    def complete(self, system: str, prompt: str) -> str:
        """A whole answer to one prompt, no tools (summaries, reviews)."""
        text = []
        for event in self.stream(system, [ChatMessage(role="user", content=prompt)], [], threading.Event()):
            if isinstance(event, TextDelta):
                text.append(event.text)
        return "".join(text)


class OllamaProvider(Provider):
    name = "ollama"

    def __init__(self, config: ChatConfig, model: str):
        super().__init__(config, model)
        import ollama

        self._ollama = ollama
        self._client = ollama.Client(host=config.ollama_host, timeout=config.request_timeout)

    @staticmethod
    def convert(system: str, messages: list[ChatMessage]) -> list[dict]:
        out: list[dict] = [{"role": "system", "content": system}]
        for m in messages:
            if m.role == "assistant":
                entry: dict = {"role": "assistant", "content": m.content}
                if m.tool_calls:
                    entry["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
                out.append(entry)
            elif m.role == "tool":
                out.append({"role": "tool", "content": m.content, "tool_name": m.tool_name})
            else:
                out.append({"role": "user", "content": m.content})
        return out

    def stream(self, system, messages, tools, cancel):
        import httpx  # here, not at the top: the daemon loads the HTTP stack only once chat is used

        host, model = self.config.ollama_host, self.model
        specs = [{"type": "function", "function": spec} for spec in tools]
        ids = itertools.count(1)
        partial: list[str] = []
        try:
            chunks = self._client.chat(
                model=model,
                messages=self.convert(system, messages),
                tools=specs or None,
                stream=True,
                options={"num_predict": self.config.max_tokens},
            )
            stop = None
            for chunk in chunks:
                if cancel.is_set():
                    stop = "cancelled"
                    break
                message = chunk.message
                if message.content:
                    partial.append(message.content)
                    yield TextDelta(message.content)
                for call in message.tool_calls or []:
                    arguments = dict(call.function.arguments or {})
                    yield ToolCallEvent(ToolCall(id=f"call_{next(ids)}", name=call.function.name, arguments=arguments))
                if chunk.done:
                    stop = chunk.done_reason or "stop"
            if stop is None:
                raise ProviderError(
                    "stream_broken", "the answer from Ollama ended before it was done", "send the message again", "".join(partial)
                )
            yield Done(stop)
        except self._ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise ProviderError(
                    "model_missing",
                    f"Ollama at {host} does not have the model {model}",
                    f"run `ollama pull {model}` or set [chat] ollama_model",
                ) from exc
            if exc.status_code == 429:
                raise ProviderError(
                    "rate_limited", f"Ollama at {host} is busy: {exc.error}", "wait a moment and send the message again", "".join(partial)
                ) from exc
            code = "stream_broken" if partial else "provider_error"
            raise ProviderError(
                code, f"Ollama at {host} failed: {exc.error}", "send the message again; see `journalctl` / Ollama's log", "".join(partial)
            ) from exc
        except (ConnectionError, httpx.HTTPError, OSError) as exc:
            raise _transport_error("Ollama", host, exc, partial, "start it with `ollama serve`, or set [chat] ollama_host") from exc


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(self, config: ChatConfig, model: str):
        super().__init__(config, model)
        import anthropic

        self._anthropic = anthropic
        key = os.environ.get("ANTHROPIC_API_KEY", "").strip() or _read_key(Path(config.anthropic_key_file).expanduser())
        if not key:
            raise ProviderError(
                "no_api_key",
                "no Anthropic API key",
                f"set ANTHROPIC_API_KEY in tarsd's environment, or put the key in {config.anthropic_key_file}",
            )
        self._client = anthropic.Anthropic(
            api_key=key, base_url=config.anthropic_base_url or None, timeout=config.request_timeout, max_retries=config.max_retries
        )

    @staticmethod
    def convert(messages: list[ChatMessage]) -> list[dict]:
        """Native Messages API turns: tool calls are tool_use blocks, tool results are
        tool_result blocks in a user turn; consecutive turns of one role are merged."""
        out: list[dict] = []

        def add(role: str, blocks: list[dict]) -> None:
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": list(blocks)})

        for m in messages:
            if m.role == "assistant":
                blocks = [{"type": "text", "text": m.content}] if m.content.strip() else []
                blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
                if blocks:
                    add("assistant", blocks)
            elif m.role == "tool":
                add("user", [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}])
            elif m.content.strip():
                add("user", [{"type": "text", "text": m.content}])
        return out

    def stream(self, system, messages, tools, cancel):
        anthropic, model = self._anthropic, self.model
        where = self.config.anthropic_base_url or "api.anthropic.com"
        partial: list[str] = []
        specs = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]
        try:
            options = {"tools": specs} if specs else {}
            with self._client.messages.stream(
                model=model, max_tokens=self.config.max_tokens, system=system, messages=self.convert(messages), **options
            ) as stream:
                for event in stream:
                    if cancel.is_set():
                        yield Done("cancelled")
                        return
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        partial.append(event.delta.text)
                        yield TextDelta(event.delta.text)
                final = stream.get_final_message()
            for block in final.content:
                if block.type == "tool_use":
                    yield ToolCallEvent(ToolCall(id=block.id, name=block.name, arguments=dict(block.input or {})))
            yield Done(final.stop_reason or "end_turn")
        except anthropic.AuthenticationError as exc:
            raise ProviderError(
                "auth", f"Anthropic rejected the API key: {_detail(exc)}", "check ANTHROPIC_API_KEY or the key file"
            ) from exc
        except anthropic.NotFoundError as exc:
            raise ProviderError(
                "model_missing", f"Anthropic has no model {model}: {_detail(exc)}", "set [chat] anthropic_model to a current model"
            ) from exc
        except anthropic.RateLimitError as exc:
            after = exc.response.headers.get("retry-after", "")
            raise ProviderError(
                "rate_limited",
                "Anthropic rate-limited the request" + (f" (retry after {after} s)" if after else ""),
                "wait, then send the message again",
                "".join(partial),
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise _transport_error("Anthropic", where, exc, partial, "check the network, or [chat] anthropic_base_url") from exc
        except Exception as exc:  # noqa: BLE001 - the SDK's transport (a vendored httpx) raises its own types mid-stream
            code = "stream_broken" if partial else "provider_error"
            what = "the answer from Anthropic broke off" if partial else "Anthropic failed"
            raise ProviderError(code, f"{what}: {_detail(exc)}", "send the message again", "".join(partial)) from exc


def _transport_error(provider: str, where: str, exc: Exception, partial: list[str], hint: str) -> ProviderError:
    """A connection failure: before any text, the provider is unreachable; after, the stream broke."""
    if partial:
        return ProviderError("stream_broken", f"the answer from {provider} broke off: {exc}", "send the message again", "".join(partial))
    return ProviderError("unreachable", f"cannot reach {provider} at {where}: {exc}", hint)


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(exc)


def _read_key(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0].strip()
    except (OSError, IndexError):
        return ""


def make_provider(config: ChatConfig, provider: str = "", model: str = "") -> Provider:
    name = provider or config.provider
    if name == "ollama":
        return OllamaProvider(config, model or config.ollama_model)
    if name == "anthropic":
        return AnthropicProvider(config, model or config.anthropic_model)
    raise ProviderError("provider_error", f"unknown provider {name!r}", "use ollama or anthropic")
