"""The model's markdown as Telegram HTML (tarsd/channels/telegram_text.py), each message checked by
the fake Bot API's own parser (tests/harness/fake_telegram.py), which refuses what Telegram
refuses: a tag it does not know, an unescaped ``<`` or ``&``, a tag left open."""

from __future__ import annotations

import pytest

from harness.fake_telegram import EntityError, parse_html
from tarsd.channels.telegram_text import MAX_MESSAGE_CHARS, plain, to_html, to_messages


def shown(markdown: str) -> list[str]:
    """What the user sees of each message, as Telegram parses it."""
    return [parse_html(message) for message in to_messages(markdown)]


def test_the_fake_refuses_what_telegram_refuses():
    for bad in ("a < b", "AT&T", "<script>x</script>", "<b>open", "<i>a</b>"):
        with pytest.raises(EntityError):
            parse_html(bad)
    assert parse_html("<b>a &lt; b</b> &amp; c") == "a < b & c"


def test_markup_and_text_that_looks_like_it():
    markdown = (
        "# Plan <draft>\n\n"
        "**Bold** and *italic*, _also_, ~~gone~~, `x < y && z`, snake_case_name, 2*3*4.\n\n"
        "- one & two\n* three\n\n"
        "> a quote <with> a tag\n\n"
        '[a link](https://example.org/?a=1&b="2") [obsidian](obsidian://open?vault=v&file=x) <https://example.org>'
    )
    html = to_html(markdown)
    assert html.startswith("<b>Plan &lt;draft&gt;</b>\n\n<b>Bold</b> and <i>italic</i>, <i>also</i>, <s>gone</s>, ")
    assert "<code>x &lt; y &amp;&amp; z</code>, snake_case_name, 2*3*4." in html
    assert "• one &amp; two\n• three" in html and "<blockquote>a quote &lt;with&gt; a tag</blockquote>" in html
    assert '<a href="https://example.org/?a=1&amp;b=&quot;2&quot;">a link</a>' in html
    assert "obsidian (obsidian://open?vault=v&amp;file=x)" in html  # an address Telegram cannot open is written out
    [text] = shown(markdown)
    assert "Plan <draft>" in text and "x < y && z" in text and "a quote <with> a tag" in text


def test_code_blocks_keep_their_text_exactly():
    markdown = "Run:\n\n```python\nif a < b and c > d:\n    print('&amp;')\n\n    done()\n```\nafter"
    html = to_html(markdown)
    assert "<pre><code class=\"language-python\">if a &lt; b and c &gt; d:\n    print('&amp;amp;')\n\n    done()</code></pre>" in html
    assert "if a < b and c > d:\n    print('&amp;')\n\n    done()" in shown(markdown)[0]


def test_a_long_reply_is_cut_between_paragraphs_below_the_limit():
    paragraphs = [f"Paragraph {n}: " + "a < b & c " * 20 + "end." for n in range(40)]
    messages = to_messages("\n\n".join(paragraphs))
    assert len(messages) > 1 and all(len(m) <= MAX_MESSAGE_CHARS for m in messages)
    texts = [parse_html(m) for m in messages]
    assert all(t.startswith("Paragraph ") and t.endswith("end.") for t in texts)  # never inside a paragraph
    assert "\n\n".join(texts) == "\n\n".join(paragraphs)


def test_a_paragraph_or_code_block_longer_than_a_message_is_cut_and_stays_valid():
    words = " ".join(f"word{n} <&>" for n in range(1500))
    texts = shown(words)
    assert len(texts) >= 2 and " ".join(texts) == words
    code = "```\n" + "\n".join(f"line {n} < {n + 1} && ok" for n in range(600)) + "\n```"
    messages = to_messages(code)
    assert len(messages) >= 2 and all(m.startswith("<pre>") and m.endswith("</pre>") and len(m) <= MAX_MESSAGE_CHARS for m in messages)
    assert "\n".join(parse_html(m) for m in messages) == code[4:-4]
    one_line = "x&y" * 3000  # no space anywhere: cut, but never through an entity
    assert "".join(shown(one_line)) == one_line


def test_plain_reverses_the_markup_for_a_refused_message():
    assert plain(to_html("**a** < b & `c`")) == "a < b & c"
