"""What tarsctl prints, read as a user reads it: counts of one are singular."""

from __future__ import annotations

from pathlib import Path

from harness.vault_files import write


def test_index_of_one_note_says_one_file_and_one_chunk(start_daemon, vault: Path):
    write(vault, "Only.md", "# Only\n\nOne short note.\n")
    daemon = start_daemon()
    done = daemon.tarsctl("index", "--full")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 file scanned: 1 indexed"), lines
    assert lines[1].startswith("1 chunk written;"), lines


def test_status_shows_any_channel_from_its_status_alone():
    """Issue 38: `tarsctl status` has a line per messenger channel, WhatsApp's webhook or a channel
    that polls (Telegram); what only one messenger has (a signature, an id change, the 24-hour
    window) shows only when it happened, and the warnings name the channel's own section."""
    from tarsctl.cli import _channel_line
    from tarsctl.protocol import ChannelStatus
    from tarsd.serve.status import channel_warnings

    webhook = ChannelStatus(name="whatsapp", title="WhatsApp", path="/channels/whatsapp", allowed_senders=2, received=4, answered=4)
    assert _channel_line(webhook) == (
        "whatsapp   /channels/whatsapp: 2 allowed senders; 4 received, 4 answered, 0 delivered twice, 0 from senders not allowed, "
        "0 refused for the signature; 0 sent, 0 retried, 0 failed"
    )
    polling = ChannelStatus(name="telegram", title="Telegram", receives="long polling", allowed_senders=1, received=3, answered=3, sent=3)
    assert _channel_line(polling) == (
        "telegram   long polling: 1 allowed sender; 3 received, 3 answered, 0 delivered twice, 0 from senders not allowed; "
        "3 sent, 0 retried, 0 failed"
    )
    changed = ChannelStatus(name="whatsapp", title="WhatsApp", path="/channels/whatsapp", allowed_senders=1, received=1, id_changes=1)
    assert "1 id change waiting for you" in _channel_line(changed)
    [warning] = channel_warnings([changed, polling])
    assert warning.startswith("whatsapp: 1 sender id change reported by WhatsApp: a new id is not answered until you add it to [whatsapp]")
